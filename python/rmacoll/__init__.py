"""rmacoll: AlltoAllV over one-sided RMA, from Python.

ctypes bindings of librmacoll (no compiled extension; any Python 3.8+ and
any torch version) and torch.distributed.all_to_all_single's call:

    import rmacoll
    rmacoll.all_to_all_single(output, input, output_split_sizes,
                              input_split_sizes, group=None)

A CUDA int64 input_split_sizes tensor selects device split sizes (no
host synchronisation; out_splits=, status=, rmacoll.device_counts_check).

Communicators: rmacoll.Communicator(rank, nranks, unique_id) with a
UniqueId from rmacoll.get_unique_id() on one rank;
Communicator.from_env() under mpirun/srun/torchrun;
Communicator.from_torch_group(group); Communicator.from_nccl(ptr).
torch.distributed backend: import rmacoll.torch_backend, then
torch.distributed.init_process_group(backend="rmacoll") (see that module).
Buffers the caller allocated: Communicator.register(obj) (ncclCommRegister's
analogue), rmacoll.TorchSegments(comm) for torch's caching allocator.
Every failed call raises a subclass of RmacollError, one per status.
The library is found as _lib.py says (RMACOLL_LIBRARY first).
"""

from ._buffers import DataType
from ._comm import CUDA_STREAM_LEGACY, IN_PLACE, Communicator, UniqueId, get_unique_id
from ._errors import (BootstrapError, ConfigError, CountOverflowError, CudaError,
                      DatatypeError, InProgressError, InternalError, InvalidArgumentError,
                      LibraryNotFoundError, MismatchError, NoDeviceError, NoMemoryError,
                      NullBufferError, OverlapError, PeerError, PeerTimeoutError, AbortedError,
                      PluginError, RmacollError, STATUS_CLASSES, TransportError,
                      UnknownStatusError, UnsupportedError)
from ._lib import has_symbol, library_path, load_library
from ._memreg import Registration, TorchSegments
from ._single import Work, all_to_all_single, device_counts_check
from ._torch import destroy_group_communicators

__version__ = "0.1.0"  # the C library's RMACOLL_VERSION_* of this tree


def library_version():
    """(major, minor, patch) of the loaded librmacoll when it has
    rmacoll_get_version, else None."""
    lib = load_library()
    fn = getattr(lib, "rmacoll_get_version", None)
    if fn is None:
        return None
    import ctypes
    v = ctypes.c_int()
    if fn(ctypes.byref(v)) != 0:
        return None
    return (v.value // 10000, (v.value // 100) % 100, v.value % 100)


def build_info():
    """{"transports": [...], "schedulers": [...], "library": path}."""
    lib = load_library()
    return {
        "transports": [t for t in lib.rmacoll_build_transports().decode().split(",") if t],
        "schedulers": [s for s in lib.rmacoll_build_schedulers().decode().split(",") if s],
        "library": library_path(),
    }


__all__ = [
    "all_to_all_single", "Communicator", "UniqueId", "get_unique_id", "DataType", "Work",
    "device_counts_check", "destroy_group_communicators", "load_library", "library_path",
    "Registration", "TorchSegments",
    "has_symbol", "library_version", "build_info", "CUDA_STREAM_LEGACY", "IN_PLACE",
    "STATUS_CLASSES",
    "RmacollError", "LibraryNotFoundError", "UnknownStatusError", "InvalidArgumentError",
    "NullBufferError", "CountOverflowError", "OverlapError", "DatatypeError",
    "MismatchError", "PeerTimeoutError", "NoMemoryError", "UnsupportedError", "ConfigError",
    "TransportError", "BootstrapError", "NoDeviceError", "CudaError", "PluginError",
    "InternalError", "InProgressError", "PeerError", "AbortedError",
]
