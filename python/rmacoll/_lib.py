"""Finding and binding librmacoll through ctypes (no compiled extension, so
one install serves every Python and torch version; the pattern of vLLM's
PyNcclCommunicator over libnccl).

Search order (the first that loads wins; load_library() reports them all
when none does):
  1. RMACOLL_LIBRARY: a path to librmacoll.so*, or a folder holding it.
     When set, nothing else is tried.
  2. A copy bundled into the installed package: rmacoll/lib/librmacoll.so*.
  3. The build folder of the source tree this package sits in
     (<repo>/build/librmacoll.so, for python/rmacoll used from a checkout).
  4. The dynamic loader by name (librmacoll.so.0, librmacoll.so):
     LD_LIBRARY_PATH, the ldconfig cache, the default folders.
  5. ctypes.util.find_library("rmacoll") and the lib folders of sys.prefix,
     /usr/local and /opt/rmacoll (an install with a prefix not in ldconfig).

The library is loaded on first use (importing rmacoll never fails because
the library is missing). Thread-safe.
"""

import ctypes
import ctypes.util
import os
import sys
import sysconfig
import threading

from ._errors import LibraryNotFoundError

UNIQUE_ID_BYTES = 128  # RMACOLL_UNIQUE_ID_BYTES


class UniqueIdStruct(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class CommParams(ctypes.Structure):
    """rmacoll_comm_params_t (include/rmacoll.h)."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("rank", ctypes.c_int),
        ("nranks", ctypes.c_int),
        ("unique_id", ctypes.POINTER(UniqueIdStruct)),
        ("oob", ctypes.c_void_p),
        ("config", ctypes.c_void_p),
        ("node_key", ctypes.c_char_p),
        ("log_fn", ctypes.c_void_p),
        ("log_ctx", ctypes.c_void_p),
    ]


_i64p = ctypes.POINTER(ctypes.c_int64)
_vp = ctypes.c_void_p
_st = ctypes.c_int

# name: (restype, argtypes). Every one of these must exist.
_REQUIRED = {
    "rmacoll_status_string": (ctypes.c_char_p, [_st]),
    "rmacoll_status_name": (ctypes.c_char_p, [_st]),
    "rmacoll_datatype_size": (ctypes.c_size_t, [ctypes.c_int]),
    "rmacoll_datatype_name": (ctypes.c_char_p, [ctypes.c_int]),
    "rmacoll_get_unique_id": (_st, [ctypes.POINTER(UniqueIdStruct)]),
    "rmacoll_comm_create": (_st, [ctypes.POINTER(CommParams), ctypes.POINTER(_vp)]),
    "rmacoll_comm_create_from_env": (_st, [_vp, ctypes.POINTER(_vp)]),
    "rmacoll_comm_destroy": (_st, [_vp]),
    "rmacoll_comm_rank": (_st, [_vp, ctypes.POINTER(ctypes.c_int)]),
    "rmacoll_comm_size": (_st, [_vp, ctypes.POINTER(ctypes.c_int)]),
    "rmacoll_comm_last_error": (ctypes.c_char_p, [_vp]),
    "rmacoll_alltoallv": (_st, [_vp, _i64p, _i64p, _vp, _i64p, _i64p, ctypes.c_int, _vp, _vp]),
    "rmacoll_alltoall": (_st, [_vp, _vp, ctypes.c_int64, ctypes.c_int, _vp, _vp]),
    "rmacoll_build_transports": (ctypes.c_char_p, []),
    "rmacoll_build_schedulers": (ctypes.c_char_p, []),
}

# Bound when the library has them (builds with NCCL; newer versions).
# rmacoll_get_version is as ncclGetVersion: major * 10000 + minor * 100 + patch.
_OPTIONAL = {
    "rmacoll_version_string": (ctypes.c_char_p, []),
    "rmacoll_comm_create_from_nccl": (_st, [_vp, _vp, _vp, ctypes.POINTER(_vp),
                                            ctypes.POINTER(_vp)]),
    "rmacoll_comm_destroy_nccl": (_st, [_vp, _vp]),
    "rmacoll_get_version": (_st, [ctypes.POINTER(ctypes.c_int)]),
    # issue 31: counts in device memory (pointers as ints: device addresses)
    "rmacoll_alltoallv_device_counts": (_st, [_vp, _vp, ctypes.c_int64, _vp, _vp,
                                              ctypes.c_int64, ctypes.c_int, ctypes.c_int, _vp,
                                              _vp, _vp]),
    "rmacoll_device_counts_check": (_st, [_vp]),
    # issue 33: abort and the asynchronous error (after ncclCommAbort /
    # ncclCommGetAsyncError)
    "rmacoll_comm_abort": (_st, [_vp]),
    "rmacoll_comm_get_async_error": (_st, [_vp, ctypes.POINTER(ctypes.c_int)]),
    # issue 34: user buffer registration, counters
    "rmacoll_mem_register": (_st, [_vp, _vp, ctypes.c_size_t, ctypes.POINTER(_vp)]),
    "rmacoll_mem_deregister": (_st, [_vp, _vp]),
    "rmacoll_comm_get_stats": (_st, [_vp, _vp]),
    # issue 33: the survivors' communicator (after ULFM's MPI_Comm_shrink)
    "rmacoll_comm_shrink": (_st, [_vp, ctypes.POINTER(_vp)]),
}


class CommStats(ctypes.Structure):
    """rmacoll_comm_stats_t (include/rmacoll.h), fields in its order; the
    library writes the fields it has (struct_size says how far)."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("device_path", ctypes.c_int),
        ("staged_bytes", ctypes.c_uint64),
        ("device_registered_bytes", ctypes.c_uint64),
        ("device_calls_staged", ctypes.c_uint64),
        ("device_calls_hmem", ctypes.c_uint64),
        ("device_signals", ctypes.c_int32),
        ("device_calls_device_signals", ctypes.c_uint64),
        ("eager_bytes_sent", ctypes.c_uint64),
        ("eager_bytes_copied", ctypes.c_uint64),
        ("node_eager_bytes_sent", ctypes.c_uint64),
        ("node_eager_bytes_copied", ctypes.c_uint64),
        ("direct_min_bytes", ctypes.c_uint64),
        ("direct_bytes_sent", ctypes.c_uint64),
        ("device_counts_calls", ctypes.c_uint64),
        ("memreg_handles", ctypes.c_uint64),
        ("memreg_bytes", ctypes.c_uint64),
        ("memreg_buffers", ctypes.c_uint64),
        ("call_registrations", ctypes.c_uint64),
    ]

RECV_PRODUCE = 0  # rmacoll_recv_mode_t
RECV_GIVEN = 1

_lock = threading.Lock()
_lib = None
_lib_path = None


def _candidates():
    """(candidates, strict): paths or loader names, in search order."""
    env = os.environ.get("RMACOLL_LIBRARY")
    if env:
        if os.path.isdir(env):
            return [os.path.join(env, "librmacoll.so"),
                    os.path.join(env, "librmacoll.so.0")], True
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    cands = []
    bundled = os.path.join(here, "lib")
    if os.path.isdir(bundled):
        cands += sorted(os.path.join(bundled, f) for f in os.listdir(bundled)
                        if f.startswith("librmacoll.so"))
    repo = os.path.dirname(os.path.dirname(here))
    if os.path.isfile(os.path.join(repo, "include", "rmacoll.h")):
        cands.append(os.path.join(repo, "build", "librmacoll.so"))
    cands += ["librmacoll.so.0", "librmacoll.so"]
    found = ctypes.util.find_library("rmacoll")
    if found:
        cands.append(found)
    multiarch = sysconfig.get_config_var("MULTIARCH")  # x86_64-linux-gnu (Debian)
    libdirs = ["lib", "lib64"] + (["lib/" + multiarch] if multiarch else [])
    for prefix in dict.fromkeys((sys.prefix, "/usr/local", "/opt/rmacoll")):
        for libdir in libdirs:
            cands.append(os.path.join(prefix, libdir, "librmacoll.so"))
    return cands, False


def _bind(lib):
    for name, (res, args) in _REQUIRED.items():
        fn = getattr(lib, name)  # AttributeError: not an rmacoll library
        fn.restype = res
        fn.argtypes = args
    for name, (res, args) in _OPTIONAL.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = res
            fn.argtypes = args


def load_library():
    """The bound ctypes.CDLL of librmacoll (loaded once).

    Raises LibraryNotFoundError naming every candidate and why it failed.
    """
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        cands, strict = _candidates()
        tried = []
        for c in cands:
            is_path = os.sep in c
            if is_path and not os.path.exists(c):
                tried.append("%s (no such file)" % c)
                continue
            try:
                lib = ctypes.CDLL(c)
                _bind(lib)
            except (OSError, AttributeError) as e:
                tried.append("%s (%s)" % (c, e))
                continue
            _lib, _lib_path = lib, c
            return _lib
        hint = ("RMACOLL_LIBRARY is set, so only it was tried" if strict else
                "an installed package does not look in a source tree's build/: set "
                "RMACOLL_LIBRARY=/path/to/build/librmacoll.so, or install the library "
                "(cmake --install build --prefix /usr/local)")
        raise LibraryNotFoundError("cannot load librmacoll; tried: %s; %s"
                                   % ("; ".join(tried), hint))


def library_path():
    """The path or name librmacoll was loaded from (loads it)."""
    load_library()
    return _lib_path


def has_symbol(name):
    """Whether the loaded library exports `name` (optional API parts)."""
    return getattr(load_library(), name, None) is not None
