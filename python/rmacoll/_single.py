"""all_to_all_single: torch.distributed.all_to_all_single's call on rmacoll.

Errors and the peers (the rule every check here follows): a check that
only this rank can make (its own shapes, dtypes, devices, split sums)
must not raise before the C call, or the peers would sit in theirs until
timeout_ms and then fail with a timeout that hides the cause. So a failed
local check still enters the call, with arguments the library rejects in
its agreement round (Communicator.fail_collectively): every rank raises
the same exception class (DatatypeError for a dtype problem, else
InvalidArgumentError, both also TypeError / ValueError), nothing is
written anywhere, and the communicator stays usable. The rank at fault
says why in its message; the peers' messages name that rank. Errors that
need the peers' arguments (a send count that differs from the receiver's
count) come from the library itself: MismatchError on every rank.
Only errors no call can be made for raise locally at once: no
communicator (group=None without torch.distributed initialised) or a
closed one. The same rule holds for device split sizes (a CUDA
input_split_sizes tensor): the Python checks of the split tensors
(dtype, shape, device, the data they go with) fail every rank's call the
same way; the checks of their values are made on the device (see
all_to_all_single).
"""

import ctypes
import functools
import sys
import warnings
from itertools import accumulate

from . import _buffers
from ._buffers import DATATYPE_NAMES, describe, dtype_name, numpy_address, split_list
from ._comm import CUDA_STREAM_LEGACY
from ._errors import DatatypeError, InvalidArgumentError, UnsupportedError
from ._lib import RECV_GIVEN, RECV_PRODUCE

_SUPPORTED = ", ".join(DATATYPE_NAMES[t] for t in sorted(DATATYPE_NAMES))


class Work:
    """What all_to_all_single(async_op=True) returns, as torch's Work.

    Host calls are complete on return. CUDA calls are enqueued on the
    current stream: wait() makes the then-current stream wait for them
    (a no-op when it is the same stream), is_completed() queries them.
    """

    def __init__(self, event=None):
        self._event = event

    def wait(self, timeout=None):
        if self._event is not None:
            import torch
            torch.cuda.current_stream().wait_event(self._event)
        return True

    def is_completed(self):
        return True if self._event is None else bool(self._event.query())

    def is_success(self):
        return True

    def synchronize(self):
        if self._event is not None:
            self._event.synchronize()


def _splits(sizes, info, n, what, tensor_name):
    """Rows per rank for one side; raises ValueError/TypeError."""
    rows = split_list(sizes, what)
    if rows is None:
        if info.rows % n != 0:
            raise ValueError("%s is None (equal split) but %s has %d rows in dim 0, "
                             "not divisible by the group size %d"
                             % (what, tensor_name, info.rows, n))
        return [info.rows // n] * n
    if len(rows) != n:
        raise ValueError("%s has %d entries, the group has %d ranks" % (what, len(rows), n))
    if min(rows) < 0:
        j = next(j for j, r in enumerate(rows) if r < 0)
        raise ValueError("%s[%d] = %d is negative" % (what, j, rows[j]))
    if sum(rows) != info.rows:
        raise ValueError("%s sum to %d rows but %s has %d rows in dim 0"
                         % (what, sum(rows), tensor_name, info.rows))
    return rows


def _fill(counts, displs, rows, row_elems):
    """counts/displs (ctypes int64 arrays) from rows per rank, in elements."""
    c = rows if row_elems == 1 else [r * row_elems for r in rows]
    counts[:] = c
    displs[:] = [0, *accumulate(c[:-1])]


_raw_stream_fns = []  # (get device, raw stream of device) once torch is imported


def _current_raw_stream(dev):
    """The handle of torch's current stream on CUDA device dev, when dev
    is the current device, else None (then the full path switches
    devices). Used only with CUDA tensors in hand (CUDA is initialised):
    torch._C._cuda_getDevice and _cuda_getCurrentRawStream where torch has
    them (no lazy-init check, no Stream object made), else
    torch.cuda.current_device() and current_stream(dev).cuda_stream."""
    if not _raw_stream_fns:
        import torch
        get_dev = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is None:
            def raw(d):
                return torch.cuda.current_stream(d).cuda_stream
        _raw_stream_fns.extend((get_dev, raw))
    get_dev, raw = _raw_stream_fns
    if get_dev() != dev:
        return None
    return raw(dev)


class _Prepared:
    """The argument block of a communicator's last call on numpy arrays or
    torch tensors (CPU or CUDA) with split sizes None or lists of ints
    (issue 34 item 4: no per-call describe(), split parsing or count
    arrays on the hot path).

    It holds the four int64 count/displacement arrays that call was made
    with and what they were made from: the array types, for each side the
    (dtype, shape) and, for torch, the device, and the split sizes (None,
    or a copy of the list as ints). A call reuses them (call) only when
    all of these compare equal, so every local check of the slow path
    would pass the same way and fill the same counts; what can differ
    between two such arrays is read again on every call: the data
    pointers, contiguity and (numpy) writability. A split list compares by
    value (list ==), so a list changed in place since is a miss. CUDA
    tensors: the call goes on torch's current stream, and is reused only
    while that stream is the one the communicator's last device call went
    on and their device the current one (a new stream needs the full
    path's ordering, wait_stream; another device its device switch); with
    async_op the full path records the Work's event. Anything else
    (__array_interface__ objects, split sizes given as tuples, arrays or
    tensors, out_splits/status, a host call after a device call or the
    reverse, a closed communicator) takes the full path, which also
    remakes this block. One per communicator, used by the thread that uses the
    communicator (the C API's rule).
    """

    __slots__ = ("ready", "args", "otype", "itype", "key", "osz", "isz", "dt", "torch",
                 "cuda", "dev")

    def __init__(self, n):
        self.ready = False
        self.cuda = False
        self.dev = None
        self.args = tuple((ctypes.c_int64 * n)() for _ in range(4))

    @staticmethod
    def kind(obj):
        """"numpy" or "torch" for the arrays this block is made for (those
        describe() reads as numpy arrays or torch tensors), else None."""
        h = _buffers._HANDLERS.get(type(obj))
        return ("numpy" if h is _buffers._numpy_info else
                "torch" if h is _buffers._torch_info else None)

    @staticmethod
    def reusable(sizes):
        return sizes is None or (type(sizes) is list and len(sizes) > 0)

    def keep(self, output, input, is_torch, dt, orows, irows):
        """Makes this block the one of this call (its arrays are filled).
        orows/irows: the rows the split lists gave, None for None."""
        self.otype, self.itype = type(output), type(input)
        self.torch = is_torch
        self.cuda = is_torch and output.is_cuda
        self.dev = output.device.index if self.cuda else None
        if is_torch:
            self.key = (output.dtype, output.shape, output.device,
                        input.dtype, input.shape, input.device)
        else:
            self.key = (output.dtype, output.shape, input.dtype, input.shape)
        # copies: a list of ints is the caller's own list (split_list)
        self.osz = None if orows is None else list(orows)
        self.isz = None if irows is None else list(irows)
        self.dt = dt
        self.ready = True

    def call(self, comm, output, input, osz, isz):
        """The C call's status, or None when this call is not the kept
        one's (then nothing was called)."""
        if type(output) is not self.otype or type(input) is not self.itype:
            return None
        ds = comm._device_stream
        if comm._h is None or (ds is None) == self.cuda:
            return None
        if (osz is not None or self.osz is not None) and (
                type(osz) is not list or osz != self.osz):
            return None
        if (isz is not None or self.isz is not None) and (
                type(isz) is not list or isz != self.isz):
            return None
        if self.torch:
            if (output.dtype, output.shape, output.device, input.dtype, input.shape,
                    input.device) != self.key:
                return None
            if not (output.is_contiguous() and input.is_contiguous()):
                return None
            optr, iptr = output.data_ptr(), input.data_ptr()
        else:
            if (output.dtype, output.shape, input.dtype, input.shape) != self.key:
                return None
            of = output.flags
            if not (of.c_contiguous and of.writeable and input.flags.c_contiguous):
                return None
            optr = numpy_address(output)
            iptr = numpy_address(input)
        sh = None
        if self.cuda:
            raw = _current_raw_stream(self.dev)
            if raw is None or raw != ds.cuda_stream:
                return None
            sh = raw or CUDA_STREAM_LEGACY
        sc, sd, rc, rd = self.args
        return comm._lib.rmacoll_alltoallv(iptr, sc, sd, optr, rc, rd, self.dt, comm._h, sh)


def _check(out, inp):
    """(exception class, reason) of the first local problem, or None."""
    if out.dtype is None or inp.dtype is None:
        bad = out if out.dtype is None else inp
        return DatatypeError, ("%s has dtype %s, which rmacoll does not move (it moves %s)"
                               % ("output" if bad is out else "input", bad.dtype_text,
                                  _SUPPORTED))
    if out.dtype != inp.dtype:
        return DatatypeError, ("input has dtype %s but output has dtype %s; they must "
                               "match" % (inp.dtype_text, out.dtype_text))
    if out.device != inp.device or (out.device == "cuda" and out.device_index is not None
                                    and inp.device_index is not None
                                    and out.device_index != inp.device_index):
        return InvalidArgumentError, ("input is on %s%s but output is on %s%s" % (
            inp.device, "" if inp.device_index is None else ":%d" % inp.device_index,
            out.device, "" if out.device_index is None else ":%d" % out.device_index))
    for name, b in (("input", inp), ("output", out)):
        if not b.contiguous:
            return InvalidArgumentError, "%s is not contiguous" % name
    if not out.writable:
        return InvalidArgumentError, "output is read-only"
    return None


def _is_cuda_tensor(obj):
    """Whether obj is a torch CUDA tensor (anything whose is_cuda is True
    and that has data_ptr: the tests' stand-ins too)."""
    return getattr(obj, "is_cuda", False) is True and hasattr(obj, "data_ptr")


def _kind(obj):
    """How an argument reads in a message: 'a CPU tensor', 'a list'."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "device"):
        return "a %s tensor" % ("CUDA" if _is_cuda_tensor(obj) else obj.device.type.upper())
    name = type(obj).__name__
    return "%s %s" % ("an" if name[:1].lower() in "aeiou" or name == "ndarray" else "a", name)


def _where(dev):
    return "%s%s" % (dev.type, "" if dev.index is None else ":%d" % dev.index)


def _tensor_problem(t, what, dtype, n):
    """Why a CUDA tensor argument of a device-split call is unusable, or None.
    n: the length it must have (None: at least one element)."""
    if not _is_cuda_tensor(t):
        return "%s is %s; it must be a CUDA %s tensor" % (what, _kind(t), dtype)
    if dtype_name(t.dtype) != dtype:
        return ("%s is a CUDA tensor of dtype %s; it must be %s (convert with "
                ".to(torch.%s))" % (what, dtype_name(t.dtype), dtype, dtype))
    if n is None:
        if t.numel() < 1:
            return "%s is empty; it must hold one %s (its first element is written)" % (
                what, dtype)
    elif t.dim() != 1 or t.shape[0] != n:
        return ("%s has shape %s; it must be 1-d with one entry per rank of the group (%d)"
                % (what, tuple(t.shape), n))
    return None


def _device_splits_check(out, inp, isz, osz, out_splits, status, n):
    """(exception class, reason) of the first problem with the split
    arguments of a call with device split sizes, or None. Also catches the
    device-only arguments given to a call with host split sizes."""
    if not _is_cuda_tensor(isz):
        for what, obj in (("output_split_sizes", osz), ("out_splits", out_splits),
                          ("status", status)):
            if obj is not None and (what != "output_split_sizes" or _is_cuda_tensor(obj)):
                return InvalidArgumentError, (
                    "%s is %s but input_split_sizes is %s: device split sizes (no host "
                    "synchronisation) need input_split_sizes as a CUDA int64 tensor"
                    % (what, _kind(obj), "None" if isz is None else _kind(isz)))
        return None
    why = _tensor_problem(isz, "input_split_sizes", "int64", n)
    if why is None and osz is not None:
        if not _is_cuda_tensor(osz):
            why = ("output_split_sizes is %s but input_split_sizes is a CUDA tensor: give "
                   "output_split_sizes as a CUDA int64 tensor (checked on the device) or "
                   "None (produced by the call into out_splits)" % _kind(osz))
        else:
            why = _tensor_problem(osz, "output_split_sizes", "int64", n)
    if why is None and out_splits is not None:
        if osz is not None:
            why = ("out_splits is given with output_split_sizes: the received split sizes "
                   "are produced only when output_split_sizes is None")
        else:
            why = _tensor_problem(out_splits, "out_splits", "int64", n)
    if why is None and status is not None:
        why = _tensor_problem(status, "status", "int32", None)
    if why is None and out.device != "cuda":
        why = ("input_split_sizes is a CUDA tensor but input and output are in host "
               "memory: device split sizes need CUDA tensors (for host memory pass the "
               "split sizes as a list or a CPU tensor)")
    if why is None and (out.kind != "torch" or inp.kind != "torch"):
        why = ("input_split_sizes is a CUDA tensor but %s is not a torch tensor: device "
               "split sizes need torch CUDA tensors for input and output"
               % ("output" if out.kind != "torch" else "input"))
    if why is None:
        for what, t in (("input_split_sizes", isz), ("output_split_sizes", osz),
                        ("out_splits", out_splits), ("status", status)):
            if t is not None and t.device.index != out.device_index:
                why = "%s is on %s but input and output are on %s" % (
                    what, _where(t.device), _where(out.torch_device))
                break
    return None if why is None else (InvalidArgumentError, why)


_profiler_enabled = []  # torch.autograd._profiler_enabled, once torch is imported


def _profiling():
    """Whether torch's profiler records (torch.profiler / autograd.profiler);
    False without torch imported. Costs a call once torch is imported."""
    if _profiler_enabled:
        return _profiler_enabled[0]()
    torch = sys.modules.get("torch")
    try:
        f = torch.autograd._profiler_enabled  # AttributeError: no torch (yet)
    except AttributeError:
        return False
    _profiler_enabled.append(f)
    return f()


def all_to_all_single(*args, **kwargs):
    if _profiling():
        import torch
        with torch.autograd.profiler.record_function("rmacoll:all_to_all_single"):
            return _all_to_all_single(*args, **kwargs)
    return _all_to_all_single(*args, **kwargs)


def _all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                       group=None, async_op=False, *, comm=None, stream=None,
                       out_splits=None, status=None):
    """torch.distributed.all_to_all_single on rmacoll; collective.

    Splits `input` along dim 0 into group-size blocks of
    input_split_sizes[j] rows, sends block j to rank j, and writes the
    block from rank i into `output` at the rows output_split_sizes[i]
    starts, in rank order. Split sizes are rows of dim 0 (a row is
    everything after dim 0: shape[1:] elements), given as lists, tuples,
    numpy arrays or CPU tensors; None or [] means equal splits of dim 0.
    A CUDA int64 input_split_sizes tensor selects device split sizes
    (below).

    output, input: contiguous torch tensors, numpy arrays or
    __cuda_array_interface__ objects of one dtype among int8, uint8,
    int32, uint32, int64, uint64, float16, bfloat16, float32, float64, on
    one device. CUDA tensors: enqueued on torch.cuda.current_stream() of
    their device and returns without host synchronisation (as NCCL);
    other CUDA arrays on `stream` (None: the legacy default stream).
    Host memory: blocks until output is complete.

    group: a torch.distributed ProcessGroup (None: the default group); its
    rmacoll communicator is made on first use (collective) and kept
    (rmacoll.destroy_group_communicators). comm: an rmacoll Communicator to
    use instead of a group (no torch needed).
    async_op: return a Work (see Work), else None.

    Device split sizes (issue 31; no host synchronisation): when
    input_split_sizes is a CUDA int64 tensor (1-d, group size, rows, on
    the tensors' device; e.g. written by a router kernel), it is never
    copied to the host: the rows are turned into elements with torch ops
    on the current stream and the call is
    rmacoll_alltoallv_device_counts, which reads the sizes on the device
    (so it can be captured into a CUDA graph). The layout is packed as
    above, but the split sizes need not fill dim 0: input.shape[0] and
    output.shape[0] are capacities (rows past the sent ones are not read,
    rows past the received ones are not written), so allocate output for
    the most rows this rank may receive.
      output_split_sizes None: the call produces them (dispatch); pass
        out_splits= (a CUDA int64 tensor of group size) to get them: rows
        from each rank, written on the stream (also when the call fails
        on capacity: the sizes a retry needs).
      output_split_sizes a CUDA int64 tensor: given (combine, e.g. the
        dispatch's out_splits), checked on the device against the
        senders' sizes.
      status: a CUDA int32 tensor whose first element the call sets on the
        stream: 0 when it moved the data, else the rmacoll status code of
        the failure found on the device (3 RMACOLL_ERR_OVERFLOW: a
        negative split, more rows than an input holds, or more received
        than output holds; 6 RMACOLL_ERR_MISMATCH: given output split
        sizes differ from the senders'; 7 RMACOLL_ERR_TIMEOUT); every rank
        sees the same code and then no rank's output is written. The same
        error is raised by Communicator.device_counts_check() (or
        rmacoll.device_counts_check(group)) once the stream has run the
        call.
    Why out_splits= and status= rather than returned tensors: the call
    keeps torch's signature and return value (None, or a Work with
    async_op), the caller allocates every tensor it writes as it does
    `output` (torch's out= convention), so repeated calls and graph
    replays write the same addresses and nothing is allocated for them.
    The device path needs one node and transports.intra_node
    nvlink_kernel or auto (RMACOLL_TRANSPORTS_INTRA_NODE); on any other
    communicator every rank's device-count call returns
    RMACOLL_ERR_UNSUPPORTED with nothing enqueued (the communicator
    remembers it: its later calls do not ask again) and the call falls back
    to host split sizes, as CUDA split tensors always worked: the sizes
    are copied to the host (a synchronisation), the received ones
    exchanged when not given, out_splits and status written (status 0),
    and errors raise as in a host-split call instead of reaching status.
    A CUDA split tensor of another dtype or shape, mixed with host split
    sizes, on another device, or with host or non-torch tensors is an
    InvalidArgumentError on every rank (no call is made).

    Errors: every rank raises together, nothing written (module doc):
    DatatypeError (TypeError) for unsupported or differing dtypes,
    InvalidArgumentError (ValueError) for split sizes that do not fit dim
    0, the wrong number of splits, devices, non-contiguous or read-only
    arrays, MismatchError when a rank's input split for j differs from
    j's output split for it; PeerTimeoutError, TransportError, PeerError
    when a peer dies (the communicator must then be closed).
    """
    if comm is None:
        from . import _torch
        comm = _torch.communicator_for_group(group)
    prep = getattr(comm, "_a2a_prep", None)  # None too on a stand-in communicator
    if (prep is not None and prep.ready and out_splits is None and status is None
            and not (async_op and prep.cuda)):
        # the prepared call of the last host call (see _Prepared): reused
        # when these arguments would pass every local check the same way
        st = prep.call(comm, output, input, output_split_sizes, input_split_sizes)
        if st is not None:
            if st != 0:
                comm._raise(st)
            return Work() if async_op else None
    h = comm._handle()
    n = comm.size
    problem = None
    out = inp = None
    try:
        out = describe(output)
    except (TypeError, ValueError) as e:
        problem = (InvalidArgumentError, "output %s" % e)
    if problem is None:
        try:
            inp = describe(input)
        except (TypeError, ValueError) as e:
            problem = (InvalidArgumentError, "input %s" % e)
    if problem is None:
        problem = _check(out, inp)

    # the stream the call goes on (also for a failing call: same path on every rank)
    sh = None
    tstream = None
    dev_info = out if out is not None else inp
    if dev_info is not None and dev_info.device == "cuda":
        if dev_info.kind == "torch":
            import torch
            tstream = torch.cuda.current_stream(dev_info.torch_device)
            sh = tstream.cuda_stream or CUDA_STREAM_LEGACY
        else:
            sh = (comm._stream_or_fail(stream) if stream is not None
                  else CUDA_STREAM_LEGACY)

    device_splits = _is_cuda_tensor(input_split_sizes)
    if problem is None:
        problem = _device_splits_check(out, inp, input_split_sizes, output_split_sizes,
                                       out_splits, status, n)
    if device_splits:
        if problem is not None:
            comm.fail_collectively(problem[0], problem[1], sh)
        return _device_splits_call(comm, h, out, inp, input_split_sizes, output_split_sizes,
                                   out_splits, status, tstream, sh, async_op,
                                   (output, input))
    if problem is None:
        try:
            orows = _splits(output_split_sizes, out, n, "output_split_sizes", "output")
            irows = _splits(input_split_sizes, inp, n, "input_split_sizes", "input")
        except (TypeError, ValueError) as e:
            problem = (InvalidArgumentError, str(e))
    if problem is not None:
        comm.fail_collectively(problem[0], problem[1], sh)

    kind = _Prepared.kind(output) if sh is None or tstream is not None else None
    if (kind is not None and kind == _Prepared.kind(input)
            and _Prepared.reusable(output_split_sizes)
            and _Prepared.reusable(input_split_sizes)):
        # host memory, splits None or lists: the next call like this one
        # reuses the arrays filled here (prep.call)
        prep = getattr(comm, "_a2a_prep", None)
        if prep is None:
            prep = comm._a2a_prep = _Prepared(n)
        prep.ready = False
        sc, sd, rc, rd = prep.args
    else:
        prep = None
        sc, sd, rc, rd = comm._args  # the communicator's own (one thread per comm)
    _fill(sc, sd, irows, inp.row_elems)
    _fill(rc, rd, orows, out.row_elems)
    if prep is not None:
        prep.keep(output, input, kind == "torch", int(out.dtype),
                  None if output_split_sizes is None else orows,
                  None if input_split_sizes is None else irows)

    lib = comm._lib
    if tstream is not None:
        import torch
        prev = comm._device_stream
        if prev is not None and prev != tstream:
            tstream.wait_stream(prev)  # device calls on one comm stay ordered
        comm._device_stream = tstream
        idx = dev_info.torch_device.index
        if idx is not None and idx != torch.cuda.current_device():
            with torch.cuda.device(idx):
                st = lib.rmacoll_alltoallv(inp.ptr, sc, sd, out.ptr, rc, rd, int(out.dtype),
                                           h, sh)
        else:
            st = lib.rmacoll_alltoallv(inp.ptr, sc, sd, out.ptr, rc, rd, int(out.dtype), h, sh)
    else:
        if sh is None and comm._device_stream is not None:
            # a host call must follow the completion of the previous device call
            comm._device_stream.synchronize()
            comm._device_stream = None
        st = lib.rmacoll_alltoallv(inp.ptr, sc, sd, out.ptr, rc, rd, int(out.dtype), h, sh)
    if st != 0:
        comm._raise(st)
    if not async_op:
        return None
    if tstream is not None:
        import torch
        ev = torch.cuda.Event()
        ev.record(tstream)
        return Work(ev)
    return Work()


def _stream_capturing(torch):
    """Whether torch's current CUDA stream is being captured (False where
    torch cannot tell: no CUDA build, or a torch without the query)."""
    try:
        return bool(torch.cuda.is_current_stream_capturing())
    except (AttributeError, RuntimeError):
        return False


def _dc_buffers(comm, torch, device, n):
    """The communicator's element-count arrays for device split sizes on
    `device`: (send counts, receive counts) int64 [n] and a status word
    int32 [1], made once. Calls on one communicator are stream-ordered
    (a call on another stream first waits for the previous one), so a
    call rewrites them only after the previous call read them."""
    bufs = comm._dc_bufs
    if bufs is None:
        bufs = comm._dc_bufs = {}
    kb = bufs.get(device)
    if kb is None:
        kb = bufs[device] = (torch.empty(n, dtype=torch.int64, device=device),
                             torch.empty(n, dtype=torch.int64, device=device),
                             torch.empty(1, dtype=torch.int32, device=device))
    return kb


def _device_splits_call(comm, h, out, inp, isz, osz, out_splits, status, tstream, sh,
                        async_op, tensors):
    """all_to_all_single with device split sizes (arguments checked):
    rmacoll_alltoallv_device_counts on tstream, no host synchronisation."""
    import torch
    fn = getattr(comm._lib, "rmacoll_alltoallv_device_counts", None)
    if fn is None:
        raise UnsupportedError("rank %d: this librmacoll has no "
                               "rmacoll_alltoallv_device_counts (older than device split "
                               "sizes): pass the split sizes as lists" % comm.rank,
                               rank=comm.rank)
    prev = comm._device_stream
    if prev is not None and prev != tstream:
        tstream.wait_stream(prev)  # device calls on one comm stay ordered
    comm._device_stream = tstream
    n = comm.size
    idx = out.torch_device.index
    ctx = (torch.cuda.device(idx) if idx is not None and idx != torch.cuda.current_device()
           else _NoContext())
    with ctx:
        if comm._dc_refused is not None:
            # refused by an earlier call, on every rank: the communicator's
            # nature (see below), so no device-count call any more
            return _host_splits_fallback(comm, comm._dc_refused, tensors, out, inp, isz, osz,
                                         out_splits, status, async_op, sh)
        # rows -> elements on the current stream (tstream): no host sync,
        # into arrays the communicator keeps (the same addresses at every
        # call: a call captured into a graph across nodes must find the
        # pinned slot an earlier call made, docs/gpu.md)
        kb = _dc_buffers(comm, torch, out.torch_device, n)
        sc = (isz if inp.row_elems == 1 and isz.is_contiguous()
              else torch.mul(isz, inp.row_elems, out=kb[0]))
        if osz is not None:
            mode = RECV_GIVEN
            rc = (osz if out.row_elems == 1 and osz.is_contiguous()
                  else torch.mul(osz, out.row_elems, out=kb[1]))
        else:
            mode = RECV_PRODUCE
            if out_splits is not None and out.row_elems == 1 and out_splits.is_contiguous():
                rc = out_splits
            else:
                rc = kb[1]
        st_t = status if status is not None else kb[2]
        st = fn(inp.ptr, sc.data_ptr(), inp.rows * inp.row_elems, out.ptr, rc.data_ptr(),
                out.rows * out.row_elems, mode, int(out.dtype), h, sh, st_t.data_ptr())
        if st == UnsupportedError.status:
            # every rank got it (agreed, nothing enqueued): this communicator
            # cannot read counts on the device (several nodes, or
            # transports.intra_node ce, the default), so the split sizes
            # come to the host as they did before device split sizes
            why = comm.last_error or "the device-count call is not available"
            if comm._dc_taken:
                # a refusal of this call on this rank alone (across nodes: a
                # second stream, too many argument sets in flight, a captured
                # call with arguments no earlier call had): the other ranks'
                # calls went ahead, so a host-split call here would meet no
                # matching call on them
                raise UnsupportedError(
                    "rank %d: device split sizes: this call was refused on this rank (%s); "
                    "the other ranks' calls went ahead, so it cannot fall back to host "
                    "split sizes" % (comm.rank, why), rank=comm.rank)
            if not _stream_capturing(torch):
                # remembered outside capture only (across nodes a captured
                # call with arguments no earlier call had is refused alone)
                comm._dc_refused = why
            return _host_splits_fallback(comm, why, tensors, out, inp, isz, osz, out_splits,
                                         status, async_op, sh)
        comm._dc_taken = True
        if st != 0:
            comm._raise(st)
        if mode == RECV_PRODUCE and out_splits is not None and rc is not out_splits:
            if out.row_elems:
                torch.div(rc, out.row_elems, rounding_mode="floor", out=out_splits)
            else:
                out_splits.zero_()  # rows of no elements: no sizes to tell
    # the arrays the stream reads or writes stay referenced until the next
    # such call (enqueued after this one on the same stream: the kept ones
    # are rewritten only in stream order)
    comm._dc_keep = (sc, rc, st_t)
    if not async_op:
        return None
    ev = torch.cuda.Event()
    ev.record(tstream)
    return Work(ev)


def device_counts_check(group=None, *, comm=None):
    """Communicator.device_counts_check() of `comm`, else of the
    communicator all_to_all_single made for `group` (None: the default
    group): raises the first error a call with device split sizes met on
    the device that no earlier check reported; returns None when there is
    none, or when the group has no communicator yet (no call to check).
    Local and non-blocking; sees a call once its stream has run it."""
    if comm is None:
        from . import _torch
        comm = _torch.existing_communicator(group)
        if comm is None:
            return None
    comm.device_counts_check()


class _NoContext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _host_splits_fallback(comm, refusal, tensors, out, inp, isz, osz, out_splits, status,
                          async_op, sh):
    """Device split sizes on a communicator without device-count calls
    (refusal: the library's reason): the sizes are copied to the host
    (this synchronises), the received ones exchanged when not given, and
    the call is the host-split one on the rows the sizes cover; out_splits
    and status are written as the device path would (status 0; a failure
    raises instead). Under graph capture UnsupportedError instead; rank 0
    warns once per communicator."""
    import torch
    if _stream_capturing(torch):
        # the fallback copies the sizes to the host: not in a capture
        raise UnsupportedError(
            "rank %d: device split sizes cannot be captured on this communicator: "
            "its calls fall back to host split sizes, which synchronise (%s)"
            % (comm.rank, refusal), rank=comm.rank)
    if comm.rank == 0 and not comm._dc_fallback_told:
        comm._dc_fallback_told = True
        warnings.warn("rmacoll: device split sizes fall back to host split sizes "
                      "on this communicator (a synchronisation per call): %s"
                      % refusal, RuntimeWarning, stacklevel=4)
    n = comm.size
    irows = [int(v) for v in isz.tolist()]
    if osz is not None:
        orows = [int(v) for v in osz.tolist()]
    else:
        s = torch.tensor(irows, dtype=torch.int64)
        r = torch.empty(n, dtype=torch.int64)
        comm.alltoall(s, r, 1)
        orows = [int(v) for v in r.tolist()]
    why = None
    if min(irows) < 0 or min(orows) < 0:
        why = "a split size is negative (input %s, output %s)" % (irows, orows)
    elif sum(irows) > inp.rows:
        why = ("input_split_sizes sum to %d rows but input holds %d"
               % (sum(irows), inp.rows))
    elif sum(orows) > out.rows:
        why = ("this rank receives %d rows but output holds %d"
               % (sum(orows), out.rows))
    if why is not None:
        comm.fail_collectively(InvalidArgumentError, why, sh)
    if out_splits is not None:
        out_splits.copy_(torch.tensor(orows, dtype=torch.int64))
    if status is not None:
        status[0:1].zero_()
    output, input_ = tensors
    return _all_to_all_single(output[:sum(orows)], input_[:sum(irows)], orows, irows,
                             async_op=async_op, comm=comm)


# all_to_all_single shows _all_to_all_single's signature and documentation
# (help(), inspect.signature); under torch's profiler each call is a
# record_function range named "rmacoll:all_to_all_single".
all_to_all_single = functools.wraps(_all_to_all_single)(all_to_all_single)
all_to_all_single.__name__ = all_to_all_single.__qualname__ = "all_to_all_single"
