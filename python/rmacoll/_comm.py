"""Communicators and the raw AlltoAllV call (ctypes over include/rmacoll.h).

Thread-safety is the C library's: distinct communicators may be used from
distinct threads; one communicator must not be used by two threads at once.
"""

import ctypes
import os
import re
import warnings

from . import _lib
from ._buffers import INVALID_DATATYPE, DataType, address_and_dtype, to_datatype
from ._errors import (DatatypeError, InternalError, InvalidArgumentError,
                      UnsupportedError, error_for)

# cudaStreamLegacy: the legacy default stream, as a handle. The C API reads
# a NULL stream as "host memory", so stream 0 (torch's default stream) is
# passed as this handle, which every CUDA runtime and driver call accepts.
CUDA_STREAM_LEGACY = 0x1


def _status_name(code):
    try:
        return _lib.load_library().rmacoll_status_name(code).decode()
    except Exception:  # pragma: no cover - library gone
        return "RMACOLL_STATUS_%d" % code


def _status_string(code):
    return _lib.load_library().rmacoll_status_string(code).decode()


# what the library says about the arguments of fail_collectively
_POISON_TEXTS = ("sendcounts is NULL", "unknown datatype %d" % INVALID_DATATYPE)
_FAILED_ON = re.compile(r"rank \d+: call failed on rank (\d+): ")


class UniqueId:
    """The 128-byte rendezvous id of the built-in TCP bootstrap
    (rmacoll_unique_id_t), as ncclUniqueId: one rank makes it with
    get_unique_id(), every rank of the communicator gets the same bytes (it
    pickles, so torch.distributed.broadcast_object_list, multiprocessing and
    the like carry it), and it serves one communicator only."""

    __slots__ = ("_data",)

    def __init__(self, data):
        data = bytes(data)
        if len(data) != _lib.UNIQUE_ID_BYTES:
            raise ValueError("a unique id is %d bytes, got %d"
                             % (_lib.UNIQUE_ID_BYTES, len(data)))
        self._data = data

    @classmethod
    def from_hex(cls, text):
        return cls(bytes.fromhex(text))

    def hex(self):
        return self._data.hex()

    def __bytes__(self):
        return self._data

    def __eq__(self, other):
        return isinstance(other, UniqueId) and other._data == self._data

    def __hash__(self):
        return hash(self._data)

    def __reduce__(self):
        return (UniqueId, (self._data,))

    def __repr__(self):
        return "UniqueId(%s...)" % self._data[:8].hex()

    def _struct(self):
        s = _lib.UniqueIdStruct()
        ctypes.memmove(ctypes.addressof(s), self._data, _lib.UNIQUE_ID_BYTES)
        return s


def get_unique_id():
    """Makes a UniqueId (rmacoll_get_unique_id): call on one rank only.

    It starts the rendezvous listener in this process, on
    RMACOLL_BOOTSTRAP_ADDR ("host:port" or "host"; default 127.0.0.1 on an
    ephemeral port, so set it to an address the other hosts reach when the
    ranks span hosts). Raises BootstrapError when no socket can be opened.
    """
    lib = _lib.load_library()
    s = _lib.UniqueIdStruct()
    st = lib.rmacoll_get_unique_id(ctypes.byref(s))
    if st != 0:
        raise error_for(st, "rmacoll_get_unique_id: %s (RMACOLL_BOOTSTRAP_ADDR=%r)"
                        % (_status_string(st), os.environ.get("RMACOLL_BOOTSTRAP_ADDR")),
                        name=_status_name(st))
    return UniqueId(ctypes.string_at(ctypes.addressof(s), _lib.UNIQUE_ID_BYTES))


def _i64_array(values, n, what, into=None):
    """values (n ints) as a ctypes int64 array; ValueError/TypeError otherwise.
    into: an int64 array of n to fill and return (a list of n Python ints
    goes in with one slice assignment, as do integers with __index__;
    anything else as before)."""
    if into is not None and type(values) is list and len(values) == n:
        try:
            into[:] = values
            return into
        except TypeError:  # floats and other non-integers: int() each below
            pass
    if hasattr(values, "tolist"):
        values = values.tolist()
    vals = list(values)
    if len(vals) != n:
        raise ValueError("%s has %d entries, the communicator has %d ranks"
                         % (what, len(vals), n))
    return (ctypes.c_int64 * n)(*[int(v) for v in vals])


class _InPlace:
    """rmacoll.IN_PLACE: the sendbuf of an in-place call (RMACOLL_IN_PLACE)."""
    __slots__ = ()
    C_VALUE = 1  # RMACOLL_IN_PLACE, ((const void *)1) in rmacoll.h

    def __repr__(self):
        return "rmacoll.IN_PLACE"

    def __reduce__(self):
        return "IN_PLACE"


IN_PLACE = _InPlace()


def _address(buf, what):
    """(address, DataType or None) of an int address, None, or an array."""
    if buf is None:
        return None, None
    if isinstance(buf, int):
        return buf, None
    try:
        return address_and_dtype(buf)
    except (TypeError, ValueError) as e:
        raise type(e)("%s %s" % (what, e)) from None


def stream_handle(stream):
    """A cudaStream_t value for the C API from None (host memory), an int
    handle (0 = the legacy default stream), a torch.cuda.Stream (.cuda_stream)
    or a cupy stream (.ptr)."""
    if stream is None:
        return None
    if isinstance(stream, int):
        h = stream
    elif hasattr(stream, "cuda_stream"):
        h = int(stream.cuda_stream)
    elif hasattr(stream, "ptr"):
        h = int(stream.ptr)
    else:
        raise TypeError("stream must be None, an int handle, a torch.cuda.Stream or a "
                        "cupy stream, got %r" % type(stream).__name__)
    return h if h != 0 else CUDA_STREAM_LEGACY


class Communicator:
    """An rmacoll communicator (rmacoll_comm_t).

    Creating one is collective over all its ranks, and so is close().
    Close it explicitly or use it as a context manager: destroying is a
    collective, so it is never done by the garbage collector (a
    communicator left open warns with a ResourceWarning and its resources
    go with the process).

    Configuration comes from the environment as for the C library
    (RMACOLL_CONFIG=file.yaml, RMACOLL_<KEY> overrides); every rank must
    use the same one.
    """

    def __init__(self, rank, nranks, unique_id, *, node_key=None):
        """Collective: every one of `nranks` ranks calls it with the same
        `unique_id` (a UniqueId or its 128 bytes) and its own `rank`.

        node_key: ranks with the same key are on one node (None: the
        RMACOLL_NODE_ID environment variable, else the host name).
        Raises InvalidArgumentError, ConfigError, BootstrapError,
        TransportError, NoDeviceError, PeerTimeoutError, NoMemoryError.
        """
        lib = _lib.load_library()
        uid = unique_id if isinstance(unique_id, UniqueId) else UniqueId(unique_id)
        ids = uid._struct()
        p = _lib.CommParams()
        p.struct_size = ctypes.sizeof(_lib.CommParams)
        p.rank = int(rank)
        p.nranks = int(nranks)
        p.unique_id = ctypes.pointer(ids)
        p.node_key = node_key.encode() if node_key is not None else None
        h = ctypes.c_void_p()
        st = lib.rmacoll_comm_create(ctypes.byref(p), ctypes.byref(h))
        if st != 0:
            raise error_for(st, "rank %d: rmacoll_comm_create (rank %d of %d): %s "
                            "(the library's log on stderr has the details)"
                            % (rank, rank, nranks, _status_string(st)), rank=rank,
                            name=_status_name(st))
        self._init(h, nccl_oob=None)

    def _init(self, handle, nccl_oob):
        lib = _lib.load_library()
        self._lib = lib
        self._h = handle
        self._nccl_oob = nccl_oob
        r, n = ctypes.c_int(), ctypes.c_int()
        lib.rmacoll_comm_rank(handle, ctypes.byref(r))
        lib.rmacoll_comm_size(handle, ctypes.byref(n))
        self._rank, self._size = r.value, n.value
        self._zeros = (ctypes.c_int64 * self._size)()
        # count/displacement arrays all_to_all_single fills (no allocation per call)
        self._args = tuple((ctypes.c_int64 * self._size)() for _ in range(4))
        self._vargs = tuple((ctypes.c_int64 * self._size)() for _ in range(4))  # alltoallv's
        self._a2a_prep = None  # all_to_all_single's prepared host call (_single._Prepared)
        self._device_stream = None  # torch stream of the last device call (all_to_all_single)
        self._dc_keep = None  # device-split call's own tensors, kept until the next such call
        self._dc_bufs = None  # device-split calls: element-count arrays per device (_single._dc_buffers)
        # device-split calls (_single._device_splits_call): the library's reason
        # when it refused them with RMACOLL_ERR_UNSUPPORTED (the same on every
        # rank and every call of this communicator), after which they go
        # straight to host split sizes; whether it ever took one (any other
        # result: a later refusal is then that call's own, not remembered);
        # whether rank 0 warned of the fallback (once per communicator)
        self._dc_refused = None
        self._dc_taken = False
        self._dc_fallback_told = False
        self._memregs = set()  # live Registrations (register), forgotten at close

    @classmethod
    def _from_handle(cls, handle, nccl_oob=None):
        self = cls.__new__(cls)
        self._init(handle, nccl_oob)
        return self

    @classmethod
    def from_env(cls):
        """Collective: from launcher variables (rmacoll_comm_create_from_env):
        OMPI_COMM_WORLD_RANK/SIZE (mpirun), SLURM_PROCID/NTASKS (srun),
        RANK/WORLD_SIZE (torchrun) with the rendezvous at
        RMACOLL_BOOTSTRAP_ADDR or MASTER_ADDR:MASTER_PORT+1.
        Raises InvalidArgumentError when no launcher variables are found,
        and the errors of Communicator()."""
        lib = _lib.load_library()
        h = ctypes.c_void_p()
        st = lib.rmacoll_comm_create_from_env(None, ctypes.byref(h))
        if st != 0:
            raise error_for(st, "rmacoll_comm_create_from_env: %s (the library's log on "
                            "stderr names the variable)" % _status_string(st),
                            name=_status_name(st))
        return cls._from_handle(h)

    @classmethod
    def from_nccl(cls, nccl_comm, stream=None):
        """Collective: over the ranks of an existing NCCL communicator
        (rmacoll_comm_create_from_nccl; ncclComm_t given as an int address),
        which then serves as the out-of-band bootstrap and must outlive this
        communicator. stream: a CUDA stream for the out-of-band steps (None:
        rmacoll makes its own). The NCCL communicator must come from the same
        libnccl that librmacoll was linked with. Raises UnsupportedError when
        librmacoll was built without NCCL."""
        lib = _lib.load_library()
        fn = getattr(lib, "rmacoll_comm_create_from_nccl", None)
        if fn is None:
            raise UnsupportedError("librmacoll (%s) was built without NCCL: no "
                                   "rmacoll_comm_create_from_nccl" % _lib.library_path())
        h, oob = ctypes.c_void_p(), ctypes.c_void_p()
        st = fn(ctypes.c_void_p(int(nccl_comm)), stream_handle(stream), None,
                ctypes.byref(h), ctypes.byref(oob))
        if st != 0:
            raise error_for(st, "rmacoll_comm_create_from_nccl: %s" % _status_string(st),
                            name=_status_name(st))
        return cls._from_handle(h, nccl_oob=oob)

    @classmethod
    def from_torch_group(cls, group=None, *, node_key=None, bootstrap="unique_id"):
        """Collective over a torch.distributed process group (None: the
        default group); rmacoll ranks are the group's ranks.

        bootstrap="unique_id" (default, any backend): group rank 0 makes a
        UniqueId, torch.distributed.broadcast_object_list hands it to the
        group (set RMACOLL_BOOTSTRAP_ADDR on group rank 0 when the group
        spans hosts; with an NCCL group the current CUDA device must be
        this rank's). bootstrap="nccl": the group's own NCCL communicator
        is the bootstrap (from_nccl); best effort: it needs a
        ProcessGroupNCCL that exposes _comm_ptr() and a librmacoll built
        with NCCL against the libnccl torch uses, else UnsupportedError.
        """
        from . import _torch
        return _torch.comm_from_group(cls, group, node_key=node_key, bootstrap=bootstrap)

    # ---------------------------------------------------------------- info
    @property
    def rank(self):
        return self._rank

    @property
    def size(self):
        return self._size

    @property
    def closed(self):
        return self._h is None

    @property
    def last_error(self):
        """Message of the last failed call ("" when none): names the rank
        and the argument."""
        if self._h is None:
            return ""
        m = self._lib.rmacoll_comm_last_error(self._h)
        return m.decode(errors="replace") if m else ""

    def abort(self):
        """Aborts the communicator (rmacoll_comm_abort, after ncclCommAbort):
        from any thread, also while a call runs on it. A call in flight on
        this rank raises AbortedError; the peers' calls raise PeerError
        naming this rank; every later call here raises AbortedError.
        close() is still needed (and is then local in effect: it does not
        wait for the peers' data). No-op on a closed communicator.
        Device work already enqueued is not stopped."""
        h = self._h
        if h is None:
            return
        fn = self._optional("rmacoll_comm_abort")
        st = fn(h)
        if st != 0:
            raise error_for(st, "rank %d: rmacoll_comm_abort: %s"
                            % (self._rank, _status_string(st)), rank=self._rank,
                            name=_status_name(st))

    def get_async_error(self):
        """The failure this communicator has seen outside any call
        (rmacoll_comm_get_async_error, after ncclCommGetAsyncError), as an
        exception object (not raised), or None: AbortedError after abort()
        on this rank, PeerError when another rank failed or aborted,
        TransportError / PeerTimeoutError from the network. Never blocks;
        thread-safe. None on a closed communicator."""
        h = self._h
        if h is None:
            return None
        fn = self._optional("rmacoll_comm_get_async_error")
        code = ctypes.c_int(0)
        st = fn(h, ctypes.byref(code))
        if st != 0:
            raise error_for(st, "rank %d: rmacoll_comm_get_async_error: %s"
                            % (self._rank, _status_string(st)), rank=self._rank,
                            name=_status_name(st))
        if code.value == 0:
            return None
        return error_for(code.value, "rank %d: %s (seen outside a call)"
                         % (self._rank, _status_string(code.value)), rank=self._rank,
                         name=_status_name(code.value))

    def shrink(self):
        """The survivors' communicator (rmacoll_comm_shrink, after MPI ULFM's
        MPI_Comm_shrink), as a new Communicator; collective over the ranks
        that are alive, callable after a failure (PeerError, PeerTimeoutError,
        AbortedError) and on a healthy communicator (then the same size).
        The survivors agree through the bootstrap root: a rank that died,
        one the failure named silent (stopped) and one that does not call
        shrink in time are left out; a rank that called abort() is alive
        and included. The survivors keep their order: new rank = place
        among the survivors. This communicator stays to be closed (close()
        is then local); its calls raise. Raises BootstrapError when this
        rank was excluded or the root's process died, UnsupportedError for
        a communicator made by from_nccl (no bootstrap root), and the
        errors of Communicator()."""
        h = self._handle()
        fn = self._optional("rmacoll_comm_shrink")
        out = ctypes.c_void_p()
        st = fn(h, ctypes.byref(out))
        if st != 0:
            raise error_for(st, self.last_error or "rank %d: rmacoll_comm_shrink: %s"
                            % (self._rank, _status_string(st)), rank=self._rank,
                            name=_status_name(st))
        return type(self)._from_handle(out)

    def _optional(self, name):
        fn = getattr(self._lib, name, None)
        if fn is None:
            raise UnsupportedError("rank %d: %s is not in the loaded librmacoll (%s): "
                                   "a newer library is needed" % (self._rank, name,
                                                                  _lib.library_path()),
                                   rank=self._rank)
        return fn

    def __repr__(self):
        return "<rmacoll.Communicator rank %d of %d%s>" % (
            self._rank, self._size, " closed" if self._h is None else "")

    # ------------------------------------------------------------ lifetime
    def close(self):
        """Destroys the communicator; collective. Idempotent."""
        if self._h is None:
            return
        h, oob, self._h, self._nccl_oob = self._h, self._nccl_oob, None, None
        for r in list(self._memregs):  # destroy releases them (and logs it)
            r._forget()
        self._memregs.clear()
        if self._device_stream is not None:
            self._device_stream.synchronize()
            self._device_stream = None
        if oob is not None:
            st = self._lib.rmacoll_comm_destroy_nccl(h, oob)
        else:
            st = self._lib.rmacoll_comm_destroy(h)
        if st != 0:
            raise error_for(st, "rank %d: rmacoll_comm_destroy: %s"
                            % (self._rank, _status_string(st)), rank=self._rank,
                            name=_status_name(st))

    destroy = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_h", None) is not None:
            warnings.warn("%r was never closed (close() is collective, so the "
                          "garbage collector does not do it)" % self, ResourceWarning,
                          stacklevel=2)

    def _handle(self):
        if self._h is None:
            raise InvalidArgumentError("rank %d: the communicator is closed" % self._rank,
                                       rank=self._rank)
        return self._h

    # --------------------------------------------------------------- calls
    def _raise(self, st, prefix=None):
        msg = self.last_error or ("rank %d: %s" % (self._rank, _status_string(st)))
        m = _FAILED_ON.match(msg)
        if prefix:
            # this rank's own check failed (fail_collectively): its reason
            # alone, not the library's text about the arguments it was given
            msg = prefix
        elif m is not None and msg.endswith(_POISON_TEXTS):
            # another rank failed its local checks (fail_collectively)
            msg = ("rank %d: call failed on rank %s: that rank's arguments failed the "
                   "rmacoll package's checks (its exception says which); nothing was "
                   "written" % (self._rank, m.group(1)))
        raise error_for(st, msg, rank=self._rank, name=_status_name(st))

    def fail_collectively(self, cls, reason, stream=None):
        """Fails the current call on every rank, then raises.

        For an error only this rank can see (a bad shape, dtype or split):
        raising before the C call would leave the peers waiting in theirs
        until timeout_ms, so this rank still joins the call with arguments
        the library rejects in its agreement, and every rank returns the
        same status: RMACOLL_ERR_DATATYPE (an unknown datatype) when cls
        is DatatypeError, else RMACOLL_ERR_INVALID_ARG (NULL sendcounts).
        Nothing is written on any rank. This rank raises the exception of
        the agreed status with `reason` in the message; the peers' name
        this rank. stream: the handle this call would have used, or None.
        """
        lib = self._lib
        z = self._zeros
        if issubclass(cls, DatatypeError):
            st = lib.rmacoll_alltoallv(None, z, z, None, z, z, INVALID_DATATYPE,
                                       self._handle(), stream)
        else:
            st = lib.rmacoll_alltoallv(None, None, z, None, z, z, int(DataType.UINT8),
                                       self._handle(), stream)
        if st == 0:
            raise InternalError("rank %d: %s (and the call meant to fail every rank "
                                "succeeded)" % (self._rank, reason), rank=self._rank)
        self._raise(st, prefix="rank %d: %s" % (self._rank, reason))

    def _stream_or_fail(self, stream):
        try:
            return stream_handle(stream)
        except TypeError as e:
            self.fail_collectively(InvalidArgumentError, str(e), None)

    def device_counts_check(self):
        """The host-visible report of calls with device split sizes
        (all_to_all_single with a CUDA input_split_sizes tensor;
        rmacoll_device_counts_check): raises the exception of the first
        error such a call on this communicator met on the device that no
        earlier check reported (CountOverflowError: a negative split, or
        more rows than an input or output holds; MismatchError: given
        output_split_sizes that differ from the senders'; PeerTimeoutError:
        a peer's kernel never arrived, the communicator is then broken),
        and forgets it; returns None when there is none. The message names
        the call, the rank and the reason. It sees a call only once the
        stream has run it (after torch.cuda.synchronize(), an event, or a
        read of the status tensor); every rank then reports the same error.
        Local and non-blocking (reads host-mapped memory): not collective.
        Thread-safety: as a call (not while another thread is in one on
        this communicator). UnsupportedError when librmacoll predates
        device split sizes."""
        h = self._handle()
        fn = getattr(self._lib, "rmacoll_device_counts_check", None)
        if fn is None:
            raise UnsupportedError("rank %d: librmacoll (%s) has no rmacoll_device_counts_check"
                                   " (older than device split sizes)"
                                   % (self._rank, _lib.library_path()), rank=self._rank)
        st = fn(h)
        if st != 0:
            self._raise(st)

    # -------------------------------------------------------- registration
    def register(self, obj):
        """Registers the memory of obj for this communicator's calls
        (rmacoll_mem_register, the analogue of ncclCommRegister): a numpy
        array, a torch tensor (host or CUDA; contiguous), an object with
        __cuda_array_interface__, or an (address, nbytes) pair. Calls
        whose send or receive buffer lies inside it then register nothing
        per call with the network transport (stats()["memreg_buffers"]).
        Local, not collective. Returns a Registration: deregister() it, or
        use it as a context manager; it keeps obj alive meanwhile. Those
        left at close() are released by the destroy. For torch's caching
        allocator see rmacoll.TorchSegments. Raises InvalidArgumentError
        (an empty or non-contiguous object), NoMemoryError, the network
        transport's error, or UnsupportedError when librmacoll predates
        registration."""
        from . import _memreg
        return _memreg.register(self, obj)

    def stats(self):
        """The communicator's counters (rmacoll_comm_get_stats) as a dict:
        the fields of rmacoll_comm_stats_t this library fills (rmacoll.h
        says what each counts), e.g. memreg_buffers and call_registrations."""
        fn = getattr(self._lib, "rmacoll_comm_get_stats", None)
        if fn is None:
            raise UnsupportedError("rank %d: librmacoll has no rmacoll_comm_get_stats"
                                   % self._rank, rank=self._rank)
        s = _lib.CommStats()
        s.struct_size = ctypes.sizeof(s)
        st = fn(self._handle(), ctypes.byref(s))
        if st != 0:
            raise error_for(st, "rank %d: rmacoll_comm_get_stats: %s"
                            % (self._rank, _status_string(st)), rank=self._rank,
                            name=_status_name(st))
        out = {}
        for name, ctype in s._fields_[1:]:
            f = getattr(_lib.CommStats, name)
            if f.offset + ctypes.sizeof(ctype) <= s.struct_size:
                out[name] = getattr(s, name)
        return out

    def alltoallv(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls,
                  dtype=None, stream=None):
        """AlltoAllV (rmacoll_alltoallv); collective.

        sendbuf/recvbuf: int addresses, or arrays/tensors (their data
        pointers; shapes are not looked at). sendcounts, sdispls,
        recvcounts, rdispls: `size` ints each (lists, tuples, numpy arrays),
        in elements of dtype. dtype: DataType, name ("bfloat16"), numpy or
        torch dtype; None takes sendbuf's. sendbuf rmacoll.IN_PLACE: in
        place, MPI_IN_PLACE's semantics (the send blocks are recvbuf's,
        at recvcounts/rdispls; sendcounts and sdispls are ignored; host
        memory only; rmacoll.h RMACOLL_IN_PLACE). stream: None for host memory (the
        call blocks until recvbuf is complete), else the CUDA stream to
        enqueue on (int handle, 0 meaning the legacy default stream,
        torch.cuda.Stream or cupy stream); see rmacoll.h for the stream
        rules. Raises the error of the agreed status on every rank; wrong
        array lengths or an unknown dtype on one rank fail every rank too
        (fail_collectively).
        """
        h = self._handle()
        n = self._size
        sh = self._stream_or_fail(stream)
        inplace = sendbuf is IN_PLACE
        try:
            rp, rdt = _address(recvbuf, "recvbuf")
            sp, sdt = (IN_PLACE.C_VALUE, rdt) if inplace else _address(sendbuf, "sendbuf")
            arrs = [None if inplace and name[0] == "s" else _i64_array(a, n, name, into)
                    for a, name, into in
                    zip((sendcounts, sdispls, recvcounts, rdispls),
                        ("sendcounts", "sdispls", "recvcounts", "rdispls"), self._vargs)]
        except (TypeError, ValueError) as e:
            self.fail_collectively(InvalidArgumentError, str(e), sh)
        dt = to_datatype(dtype) if dtype is not None else sdt
        if dt is None:
            self.fail_collectively(DatatypeError, "dtype %r is not one rmacoll moves (give "
                                   "dtype= for raw addresses)" % (dtype,), sh)
        st = self._lib.rmacoll_alltoallv(sp, arrs[0], arrs[1], rp, arrs[2], arrs[3],
                                         int(dt), h, sh)
        if st != 0:
            self._raise(st)

    def alltoall(self, sendbuf, recvbuf, count, dtype=None, stream=None):
        """Uniform AlltoAll (rmacoll_alltoall): `count` elements to every
        rank; rank i's block for j is at element j * count of sendbuf and
        lands at element i * count of j's recvbuf. Arguments as alltoallv
        (sendbuf rmacoll.IN_PLACE too)."""
        h = self._handle()
        sh = self._stream_or_fail(stream)
        try:
            rp, rdt = _address(recvbuf, "recvbuf")
            sp, sdt = ((IN_PLACE.C_VALUE, rdt) if sendbuf is IN_PLACE
                       else _address(sendbuf, "sendbuf"))
            count = int(count)
        except (TypeError, ValueError) as e:
            self.fail_collectively(InvalidArgumentError, str(e), sh)
        dt = to_datatype(dtype) if dtype is not None else sdt
        if dt is None:
            self.fail_collectively(DatatypeError, "dtype %r is not one rmacoll moves (give "
                                   "dtype= for raw addresses)" % (dtype,), sh)
        st = self._lib.rmacoll_alltoall(sp, rp, count, int(dt), h, sh)
        if st != 0:
            self._raise(st)
