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
closed one.
"""

from itertools import accumulate

from ._buffers import describe, split_list
from ._comm import CUDA_STREAM_LEGACY
from ._errors import DatatypeError, InvalidArgumentError

_SUPPORTED = "int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64"


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
    for j, r in enumerate(rows):
        if r < 0:
            raise ValueError("%s[%d] = %d is negative" % (what, j, r))
    if sum(rows) != info.rows:
        raise ValueError("%s sum to %d rows but %s has %d rows in dim 0"
                         % (what, sum(rows), tensor_name, info.rows))
    return rows


def _fill(counts, displs, rows, row_elems):
    """counts/displs (ctypes int64 arrays) from rows per rank, in elements."""
    c = [r * row_elems for r in rows]
    counts[:] = c
    displs[:] = [0] + list(accumulate(c[:-1]))


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


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False, *, comm=None, stream=None):
    """torch.distributed.all_to_all_single on rmacoll; collective.

    Splits `input` along dim 0 into group-size blocks of
    input_split_sizes[j] rows, sends block j to rank j, and writes the
    block from rank i into `output` at the rows output_split_sizes[i]
    starts, in rank order. Split sizes are rows of dim 0 (a row is
    everything after dim 0: shape[1:] elements), given as lists, tuples,
    numpy arrays or tensors (a CUDA tensor is copied to the host, which
    synchronises); None or [] means equal splits of dim 0.

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
    h = comm._handle()
    n = comm.size
    problem = None
    out = inp = None
    for name, obj in (("output", output), ("input", input)):
        try:
            info = describe(obj)
        except (TypeError, ValueError) as e:
            problem = (InvalidArgumentError, "%s %s" % (name, e))
            break
        if name == "output":
            out = info
        else:
            inp = info
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

    if problem is None:
        try:
            orows = _splits(output_split_sizes, out, n, "output_split_sizes", "output")
            irows = _splits(input_split_sizes, inp, n, "input_split_sizes", "input")
        except (TypeError, ValueError) as e:
            problem = (InvalidArgumentError, str(e))
    if problem is not None:
        comm.fail_collectively(problem[0], problem[1], sh)

    sc, sd, rc, rd = comm._args  # the communicator's own (one thread per comm)
    _fill(sc, sd, irows, inp.row_elems)
    _fill(rc, rd, orows, out.row_elems)

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
