"""Exceptions: one class per rmacoll_status_t code, all under RmacollError.

The codes mirror RMACOLL_STATUS_TABLE in include/rmacoll.h (codes are stable
and only appended to; tests/test_host.py checks every name against the
library). Argument errors also derive from the built-in exception a Python
user expects: InvalidArgumentError (and its NULL-buffer, overflow, overlap
and mismatch subclasses) is a ValueError, DatatypeError a TypeError,
PeerTimeoutError a TimeoutError, NoMemoryError a MemoryError.
"""


class RmacollError(Exception):
    """A failed rmacoll call.

    Attributes:
        status: the rmacoll_status_t code (int), or None for errors that are
            not a library status (the library could not be loaded).
        status_name: "RMACOLL_ERR_MISMATCH" and so on.
        message: the library's message for the call (rmacoll_comm_last_error:
            it names the rank and the argument), or the package's own.
        rank: the rank that raised, or None when not known.
    """

    status = None
    status_name = None

    def __init__(self, message, rank=None):
        self.message = message
        self.rank = rank
        # str(e) is the message alone, as the C library wrote it (it names
        # the rank and the argument); the class and status_name say the code
        super().__init__(message)


class LibraryNotFoundError(RmacollError, OSError):
    """librmacoll.so could not be found or loaded; the message lists every
    place that was tried."""


def _status_class(code, name, doc, *bases):
    cls = type(_CLASS_NAMES[name], bases or (RmacollError,),
               {"status": code, "status_name": name, "__doc__": doc})
    cls.__module__ = "rmacoll"
    return cls


_CLASS_NAMES = {
    "RMACOLL_ERR_INVALID_ARG": "InvalidArgumentError",
    "RMACOLL_ERR_NULL_BUFFER": "NullBufferError",
    "RMACOLL_ERR_OVERFLOW": "CountOverflowError",
    "RMACOLL_ERR_OVERLAP": "OverlapError",
    "RMACOLL_ERR_DATATYPE": "DatatypeError",
    "RMACOLL_ERR_MISMATCH": "MismatchError",
    "RMACOLL_ERR_TIMEOUT": "PeerTimeoutError",
    "RMACOLL_ERR_NO_MEMORY": "NoMemoryError",
    "RMACOLL_ERR_UNSUPPORTED": "UnsupportedError",
    "RMACOLL_ERR_CONFIG": "ConfigError",
    "RMACOLL_ERR_TRANSPORT": "TransportError",
    "RMACOLL_ERR_BOOTSTRAP": "BootstrapError",
    "RMACOLL_ERR_NO_DEVICE": "NoDeviceError",
    "RMACOLL_ERR_CUDA": "CudaError",
    "RMACOLL_ERR_PLUGIN": "PluginError",
    "RMACOLL_ERR_INTERNAL": "InternalError",
    "RMACOLL_ERR_IN_PROGRESS": "InProgressError",
    "RMACOLL_ERR_PEER": "PeerError",
    "RMACOLL_ERR_ABORTED": "AbortedError",
}

InvalidArgumentError = _status_class(
    1, "RMACOLL_ERR_INVALID_ARG", "Invalid argument (also a ValueError).",
    RmacollError, ValueError)
NullBufferError = _status_class(
    2, "RMACOLL_ERR_NULL_BUFFER", "NULL buffer with a non-zero count.",
    InvalidArgumentError)
CountOverflowError = _status_class(
    3, "RMACOLL_ERR_OVERFLOW",
    "Negative count or displacement, or one overflowing a 64-bit byte offset.",
    InvalidArgumentError)
OverlapError = _status_class(
    4, "RMACOLL_ERR_OVERLAP", "Buffers overlap: two receive blocks, or a send block and a receive block.", InvalidArgumentError)
DatatypeError = _status_class(
    5, "RMACOLL_ERR_DATATYPE",
    "Unknown or unsupported datatype, or input and output dtypes differ "
    "(also a TypeError).", RmacollError, TypeError)
MismatchError = _status_class(
    6, "RMACOLL_ERR_MISMATCH",
    "A send count differs from the receiver's count for it.", InvalidArgumentError)
PeerTimeoutError = _status_class(
    7, "RMACOLL_ERR_TIMEOUT", "Timed out waiting for a peer (also a TimeoutError).",
    RmacollError, TimeoutError)
NoMemoryError = _status_class(
    8, "RMACOLL_ERR_NO_MEMORY", "Out of memory (also a MemoryError).",
    RmacollError, MemoryError)
UnsupportedError = _status_class(9, "RMACOLL_ERR_UNSUPPORTED", "Operation not supported.")
ConfigError = _status_class(10, "RMACOLL_ERR_CONFIG", "Invalid configuration.")
TransportError = _status_class(11, "RMACOLL_ERR_TRANSPORT", "Transport error.")
BootstrapError = _status_class(12, "RMACOLL_ERR_BOOTSTRAP", "Bootstrap error.")
NoDeviceError = _status_class(13, "RMACOLL_ERR_NO_DEVICE", "Required device not found.")
CudaError = _status_class(14, "RMACOLL_ERR_CUDA", "CUDA error.")
PluginError = _status_class(15, "RMACOLL_ERR_PLUGIN", "Plugin could not be loaded.")
InternalError = _status_class(16, "RMACOLL_ERR_INTERNAL", "Internal error.")
InProgressError = _status_class(17, "RMACOLL_ERR_IN_PROGRESS", "Operation still in progress.")
PeerError = _status_class(
    18, "RMACOLL_ERR_PEER",
    "A node peer vanished, or the communicator failed in an earlier call.")
AbortedError = _status_class(
    19, "RMACOLL_ERR_ABORTED", "The communicator was aborted (rmacoll_comm_abort).")

STATUS_CLASSES = {
    cls.status: cls
    for cls in (InvalidArgumentError, NullBufferError, CountOverflowError, OverlapError,
                DatatypeError, MismatchError, PeerTimeoutError, NoMemoryError,
                UnsupportedError, ConfigError, TransportError, BootstrapError,
                NoDeviceError, CudaError, PluginError, InternalError, InProgressError,
                PeerError, AbortedError)
}


RmacollError.__module__ = "rmacoll"
LibraryNotFoundError.__module__ = "rmacoll"


class UnknownStatusError(RmacollError):
    """A status code this package does not know (a newer library)."""

    def __init__(self, code, name, message, rank=None):
        self.status = code
        self.status_name = name
        super().__init__(message, rank)


UnknownStatusError.__module__ = "rmacoll"


def error_for(code, message, rank=None, name=None):
    """The exception for status `code` with `message` (not raised)."""
    cls = STATUS_CLASSES.get(code)
    if cls is None:
        return UnknownStatusError(code, name or "RMACOLL_STATUS_%d" % code, message, rank)
    return cls(message, rank)
