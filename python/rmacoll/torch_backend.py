"""rmacoll as a torch.distributed backend (issue 34 item 2).

    import rmacoll.torch_backend          # registers the backend "rmacoll"
    dist.init_process_group("rmacoll")    # torchrun: env:// (RANK, WORLD_SIZE, MASTER_*)
    dist.all_to_all_single(out, inp, out_splits, in_splits)   # rmacoll
    dist.all_to_all(out_list, in_list)                         # rmacoll

Importing this module registers the name with
torch.distributed.Backend.register_backend (once; register() does it
again under another name). The creator torch calls,
create(store, rank, world_size, timeout), returns a ProcessGroupRmacoll:
a Python subclass of torch's ProcessGroup: torch.distributed's functions
call the group's methods from Python, and torch's PyProcessGroup
trampoline routes C++ calls of the overridden ones back to Python, so no
compiled extension is needed. Run on torch 1.13 (Debian's, CPU); torch
2.x has the same trampoline and its own tests register Python groups
this way, but it was not run here.

What it moves: all_to_all_single (ProcessGroup.alltoall_base) and the
list form all_to_all (ProcessGroup.alltoall), on CPU tensors (blocking,
complete on return) and CUDA tensors (enqueued on the current stream of
the tensors' device, as rmacoll.all_to_all_single does); barrier as a
one-byte alltoall. Every other operation raises UnsupportedError naming
it, unless the group was made from a device-split backend string (torch
2.x: "cpu:gloo,cuda:rmacoll"), in which case the operations on the other
devices' tensors go to those devices' backends.

Bootstrap: group rank 0 makes an rmacoll unique id and puts it in the
store torch hands the creator (a PrefixStore of this group); the other
ranks read it there and every rank creates the Communicator (collective).
Set RMACOLL_BOOTSTRAP_ADDR on group rank 0 when the group spans hosts
(its default, 127.0.0.1, only serves one host).
"""

import sys
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, Work as _TorchWork

from ._comm import Communicator, UniqueId, get_unique_id
from ._errors import InvalidArgumentError, RmacollError, UnsupportedError, error_for
from ._single import all_to_all_single
from . import _torch

NAME = "rmacoll"
_UID_KEY = "rmacoll/unique_id"

# operations torch.distributed may call on a group that rmacoll does not do
# (ProcessGroup's methods in torch 1.13 and 2.x)
_OTHER_OPS = (
    "allreduce", "allreduce_coalesced", "allgather", "allgather_coalesced",
    "_allgather_base", "allgather_into_tensor_coalesced", "broadcast", "reduce",
    "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced",
    "gather", "scatter", "send", "recv", "recv_anysource", "monitored_barrier",
)


class Work(_TorchWork):
    """The work object of a ProcessGroupRmacoll call (a torch Work).

    CPU tensors: the call was complete on return: wait() returns True at
    once, is_completed() is True. CUDA tensors: the call was enqueued on
    the current stream of the tensors' device; wait() makes the then
    current stream of that device wait for it (nothing when it is the same
    stream; the host does not block, as with NCCL), is_completed() queries
    it, synchronize() blocks the host until it ran. result() is the list
    of output tensors; get_future() a torch.futures.Future of that list
    (CUDA-aware for CUDA tensors: its wait()/then() order after the call).
    """

    def __init__(self, result, event=None, stream=None):
        super().__init__()
        self._result = result
        self._event = event
        self._stream = stream

    def wait(self, timeout=None):
        if self._event is not None:
            torch.cuda.current_stream(self._stream.device).wait_event(self._event)
        return True

    def is_completed(self):
        return True if self._event is None else bool(self._event.query())

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        return self._result

    def synchronize(self):
        if self._event is not None:
            self._event.synchronize()

    def get_future(self):
        if self._event is None:
            fut = torch.futures.Future()
            fut.set_result(self._result)
            return fut
        fut = torch.futures.Future(devices=[self._stream.device])
        # a CUDA-aware future records the current streams at set_result:
        # the call's stream, on which the call is already enqueued
        with torch.cuda.stream(self._stream):
            fut.set_result(self._result)
        return fut


def _first_tensor(obj, depth=0):
    if isinstance(obj, torch.Tensor):
        return obj
    if depth < 3 and isinstance(obj, (list, tuple)):
        for o in obj:
            t = _first_tensor(o, depth + 1)
            if t is not None:
                return t
    return None


def _unsupported_op(name):
    def op(self, *args, **kwargs):
        t = _first_tensor(args)
        if t is None:
            t = _first_tensor(list(kwargs.values()))
        dev = t.device.type if t is not None else "cpu"
        fb = self._fallback.get(dev)
        if fb is not None:
            return getattr(fb, name)(*args, **kwargs)
        raise UnsupportedError(
            "rank %d: the rmacoll backend does not do %s (%s tensors): it moves "
            "all_to_all_single and all_to_all (and barrier). Use a group of another "
            "backend for it (dist.new_group(backend=\"gloo\")), or, on torch >= 2.0, "
            "init_process_group(backend=\"cpu:gloo,cuda:rmacoll\") so that the other "
            "device's backend serves it" % (self._rank, name, dev), rank=self._rank)
    op.__name__ = name
    op.__doc__ = "Not an rmacoll operation: UnsupportedError, or the device's other backend."
    return op


class ProcessGroupRmacoll(ProcessGroup):
    """A torch.distributed ProcessGroup whose all_to_all_single and
    all_to_all are rmacoll calls (module doc). Made by torch through the
    registered creator; also directly: ProcessGroupRmacoll(store, rank,
    size, timeout) (collective over the group; `store` must be the same
    store, or PrefixStore, on every rank).

    device_backends: {device type: backend name} of a device-split
    backend string ({"cpu": "gloo", "cuda": "rmacoll"}): operations on the
    tensors of a device whose backend is not rmacoll go to that backend
    (gloo is made here from the store, under its own prefix; another one
    must be given in `fallbacks`, {device type: backend object}).
    """

    def __init__(self, store, rank, size, timeout=None, device_backends=None,
                 fallbacks=None):
        super().__init__(rank, size)
        self._rank = rank
        self._size = size
        self._lock = threading.Lock()
        self._keep = None
        self.rmacoll_calls = 0  # calls made through rmacoll (not the fallbacks)
        self._fallback = {}
        device_backends = dict(device_backends or {})
        given = dict(fallbacks or {})
        for dev, name in device_backends.items():
            if name.lower() == NAME:
                continue
            if dev in given:
                self._fallback[dev] = given[dev]
            elif name.lower() == "gloo":
                sub = dist.PrefixStore("rmacoll-fallback/%s/" % dev, store)
                if timeout is None:
                    self._fallback[dev] = dist.ProcessGroupGloo(sub, rank, size)
                else:
                    self._fallback[dev] = dist.ProcessGroupGloo(sub, rank, size, timeout)
            else:
                raise InvalidArgumentError(
                    "rmacoll backend: the %s backend of %s tensors was not made before "
                    "rmacoll's (device-split backend string %s); list rmacoll last, e.g. "
                    "\"cpu:gloo,cuda:rmacoll\""
                    % (name, dev, ",".join("%s:%s" % kv for kv in device_backends.items())))
        self._comm = _bootstrap(store, rank, size)
        # rmacoll.all_to_all_single(group=this group) uses the same communicator,
        # rmacoll.destroy_group_communicators() closes it
        with _torch._lock:
            _torch._group_comms[self] = self._comm

    # ------------------------------------------------------------ identity
    def getBackendName(self):
        return NAME

    def __repr__(self):
        return "<ProcessGroupRmacoll rank %d of %d%s>" % (
            self._rank, self._size,
            "" if not self._fallback else " (other devices: %s)" % ", ".join(
                "%s %s" % (d, type(b).__name__) for d, b in self._fallback.items()))

    @property
    def communicator(self):
        """The rmacoll Communicator of this group."""
        return self._comm

    @property
    def device_fallbacks(self):
        """{device type: backend} serving this group's other devices."""
        return dict(self._fallback)

    def close(self):
        """Closes the communicator (collective over the group); later calls
        raise InvalidArgumentError. rmacoll.destroy_group_communicators()
        does the same for every group."""
        with _torch._lock:
            _torch._group_comms.pop(self, None)
        self._comm.close()

    # ---------------------------------------------------------- operations
    def alltoall_base(self, output, input, output_split_sizes=None, input_split_sizes=None,
                      opts=None):
        fb = self._fallback.get(output.device.type)
        if fb is not None:
            return fb.alltoall_base(output, input, output_split_sizes, input_split_sizes,
                                    *(() if opts is None else (opts,)))
        # torch passes [] for None; as None it lets a CUDA int64 input_split_sizes
        # tensor produce the received sizes (device split sizes, rmacoll.all_to_all_single)
        osz = None if _empty_list(output_split_sizes) else output_split_sizes
        isz = None if _empty_list(input_split_sizes) else input_split_sizes
        with self._lock:
            w = all_to_all_single(output, input, osz, isz, async_op=True, comm=self._comm)
            self.rmacoll_calls += 1
        return _work([output], w, output)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        dev = _first_tensor(output_tensors)
        fb = self._fallback.get(dev.device.type) if dev is not None else None
        if fb is not None:
            return fb.alltoall(output_tensors, input_tensors,
                               *(() if opts is None else (opts,)))
        with self._lock:
            ev, stream, keep = _all_to_all_list(self._comm, output_tensors, input_tensors)
            self.rmacoll_calls += 1
            # CUDA: the packed buffers stay referenced until the next list call
            self._keep = keep
        return Work(list(output_tensors), ev, stream)

    def barrier(self, opts=None):
        fb = self._fallback.get("cpu")
        if fb is not None:
            return fb.barrier(*(() if opts is None else (opts,)))
        n = self._size
        with self._lock:
            # every rank's receive needs every rank's send: no rank returns
            # before all have entered (host memory: follows earlier device calls)
            all_to_all_single(torch.empty(n, dtype=torch.uint8),
                              torch.zeros(n, dtype=torch.uint8), comm=self._comm)
            self.rmacoll_calls += 1
        return Work([])

    for _name in _OTHER_OPS:
        locals()[_name] = _unsupported_op(_name)
    del _name


def _empty_list(x):
    return isinstance(x, (list, tuple)) and len(x) == 0


def _work(result, w, where):
    """A Work from rmacoll's (w: rmacoll.Work with an event or none)."""
    ev = getattr(w, "_event", None)
    if ev is None:
        return Work(result)
    return Work(result, ev, torch.cuda.current_stream(where.device))


def _all_to_all_list(comm, outputs, inputs):
    """The list form: inputs[j] goes to rank j, outputs[i] receives rank
    i's; packed into one send and one receive buffer (one copy each way),
    one rmacoll call. Local problems fail every rank's call."""
    n = comm.size
    outputs = list(outputs)
    inputs = list(inputs)
    why = None
    if len(inputs) != n or len(outputs) != n:
        why = ("all_to_all needs %d input and %d output tensors (the group size), "
               "got %d and %d" % (n, n, len(inputs), len(outputs)))
    ref = None
    if why is None:
        for what, lst in (("output_tensor_list", outputs), ("input_tensor_list", inputs)):
            for j, t in enumerate(lst):
                if not isinstance(t, torch.Tensor):
                    why = "%s[%d] is a %s, not a tensor" % (what, j, type(t).__name__)
                    break
                if ref is None:
                    ref = t
                elif t.dtype != ref.dtype:
                    why = "%s[%d] has dtype %s but output_tensor_list[0] has %s" % (
                        what, j, t.dtype, ref.dtype)
                elif t.device != ref.device:
                    why = "%s[%d] is on %s but output_tensor_list[0] is on %s" % (
                        what, j, t.device, ref.device)
                if why is not None:
                    break
            if why is not None:
                break
    if why is not None:
        sh = None
        if ref is not None and ref.device.type == "cuda":
            sh = _stream_handle(ref)
        comm.fail_collectively(InvalidArgumentError, why, sh)
    dev = ref.device
    send = (torch.cat([t.reshape(-1) for t in inputs]) if inputs else
            torch.empty(0, dtype=ref.dtype, device=dev))
    recv = torch.empty(sum(t.numel() for t in outputs), dtype=ref.dtype, device=dev)
    all_to_all_single(recv, send, [t.numel() for t in outputs], [t.numel() for t in inputs],
                      comm=comm)
    off = 0
    for t in outputs:  # on the current stream, after the call (CUDA), or now
        k = t.numel()
        t.copy_(recv[off:off + k].view(t.shape))
        off += k
    if dev.type != "cuda":
        return None, None, None
    # the work is done when the copies out are: the event follows them
    stream = torch.cuda.current_stream(dev)
    ev = torch.cuda.Event()
    ev.record(stream)
    return ev, stream, (send, recv)


def _stream_handle(t):
    from ._comm import CUDA_STREAM_LEGACY
    return torch.cuda.current_stream(t.device).cuda_stream or CUDA_STREAM_LEGACY


def _bootstrap(store, rank, size):
    """The group's Communicator: rank 0's unique id through the store."""
    if rank == 0:
        try:
            uid = get_unique_id()
        except RmacollError as e:
            # the others raise it too rather than wait for an id that never comes
            store.set(_UID_KEY, b"error:%d:%s" % (e.status if e.status is not None else -1,
                                                  str(e).encode()))
            raise
        store.set(_UID_KEY, b"uid:" + bytes(uid))
    else:
        v = bytes(store.get(_UID_KEY))
        if v.startswith(b"error:"):
            code, _, msg = v[6:].partition(b":")
            raise error_for(int(code), "rank %d: group rank 0 could not make the rmacoll "
                            "unique id: %s" % (rank, msg.decode(errors="replace")), rank=rank)
        uid = UniqueId(v[4:])
    return Communicator(rank, size, uid)


def _device_backend_map():
    """{device: backend name} of the backend string the group being made
    was asked for, read from torch's _new_process_group_helper frame (the
    creator is not told it; torch 2.x's per-device form), or None."""
    f = sys._getframe(1)
    for _ in range(12):
        if f is None:
            return None
        if f.f_code.co_name == "_new_process_group_helper":
            cfg = f.f_locals.get("backend_config")
            if cfg is not None and hasattr(cfg, "get_device_backend_map"):
                return {str(d): str(b) for d, b in cfg.get_device_backend_map().items()}
            backend = f.f_locals.get("backend")
            if isinstance(backend, str) and ":" in backend:
                return dict(p.split(":", 1) for p in backend.lower().split(","))
            return None
        f = f.f_back
    return None


def _helper_backends(device_map):
    """Backends torch made for the other devices of this group before
    calling the creator ({device: backend object}), from the same frame."""
    got = {}
    f = sys._getframe(1)
    for _ in range(12):
        if f is None:
            break
        if f.f_code.co_name == "_new_process_group_helper":
            pg = f.f_locals.get("pg")
            getb = getattr(pg, "_get_backend", None)
            if getb is None:
                break
            for dev, name in device_map.items():
                if name.lower() == NAME:
                    continue
                try:
                    got[dev] = getb(torch.device(dev))
                except Exception:  # noqa: BLE001 - not made yet (rmacoll came first)
                    pass
            break
        f = f.f_back
    return got


def create(store, rank, world_size, timeout):
    """The creator registered with torch (Backend.register_backend)."""
    device_map = _device_backend_map()
    fallbacks = _helper_backends(device_map) if device_map else None
    return ProcessGroupRmacoll(store, rank, world_size, timeout, device_backends=device_map,
                               fallbacks=fallbacks)


def register(name=NAME):
    """Registers the backend under `name` (import does it for "rmacoll");
    a second call for a registered name does nothing."""
    B = dist.Backend
    if name.upper() in getattr(B, "_plugins", {}):
        return
    import inspect
    try:
        params = inspect.signature(B.register_backend).parameters
    except (TypeError, ValueError):
        params = {}
    if "devices" in params:  # torch >= 2.1: say which devices it serves
        B.register_backend(name, create, devices=["cpu", "cuda"])
    else:
        B.register_backend(name, create)


register()

__all__ = ["ProcessGroupRmacoll", "Work", "create", "register", "NAME"]
