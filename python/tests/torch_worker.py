"""One rank of the torch GPU tests (started by test_torch_gpu.py).

torch.distributed runs on gloo (one GPU cannot hold two NCCL ranks); the
rmacoll communicator of the default group is made by all_to_all_single on
first use (unique id broadcast over gloo). Every check compares CUDA
tensors written by rmacoll.all_to_all_single, inside sentinel guard bytes,
with torch.distributed.all_to_all_single over gloo on CPU copies of the
same bytes (a uint8 view, so any dtype compares bit for bit).

Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (as torchrun).
Last stdout line: JSON {"rank", "checks": [{name, ok, detail, cls}]}.
"""

import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import rmacoll  # noqa: E402

SENTINEL = 0xA5
GUARD = 256
checks = []


def record(name, ok, detail="", **kw):
    d = {"name": name, "ok": bool(ok), "detail": detail}
    d.update(kw)
    checks.append(d)


def matrix(seed, n, equal=None):
    if equal is not None:
        return [[equal] * n for _ in range(n)]
    g = torch.Generator().manual_seed(seed)
    m = torch.randint(1, 9, (n, n), generator=g)
    m[torch.rand((n, n), generator=g) < 0.3] = 0
    return m.tolist()


def rows_elems(row_shape):
    e = 1
    for d in row_shape:
        e *= d
    return e


def rank_input(seed, i, rows, row_shape, dtype):
    """Rank i's input on the CPU: random bytes of `dtype` (NaNs included)."""
    esize = torch.empty((), dtype=dtype).element_size()
    g = torch.Generator().manual_seed(seed * 1000 + i)
    raw = torch.randint(0, 256, (rows * rows_elems(row_shape) * esize,), dtype=torch.uint8,
                        generator=g)
    return raw.view(dtype).reshape((rows,) + tuple(row_shape))


class Guarded:
    """A CUDA receive tensor inside sentinel guard bytes."""

    def __init__(self, rows, row_shape, dtype, device):
        esize = torch.empty((), dtype=dtype).element_size()
        self.nbytes = rows * rows_elems(row_shape) * esize
        self.big = torch.full((self.nbytes + 2 * GUARD,), SENTINEL, dtype=torch.uint8,
                              device=device)
        self.tensor = self.big[GUARD:GUARD + self.nbytes].view(dtype).view(
            (rows,) + tuple(row_shape))

    def host(self):
        return self.big.cpu()

    def body_and_guards(self):
        h = self.host()
        guards = bool((h[:GUARD] == SENTINEL).all()) and bool((h[GUARD + self.nbytes:] ==
                                                                SENTINEL).all())
        return h[GUARD:GUARD + self.nbytes], guards

    def untouched(self):
        return bool((self.host() == SENTINEL).all())


def gloo_reference(inp_cpu, m, me, row_shape, dtype):
    """torch.distributed.all_to_all_single (gloo) on uint8 views of the rows."""
    n = len(m)
    esize = torch.empty((), dtype=dtype).element_size()
    rb = rows_elems(row_shape) * esize
    x = inp_cpu.reshape(inp_cpu.shape[0], rows_elems(row_shape)).view(torch.uint8)
    x = x.reshape(inp_cpu.shape[0], rb).contiguous()
    out_rows = sum(m[i][me] for i in range(n))
    y = torch.empty((out_rows, rb), dtype=torch.uint8)
    dist.all_to_all_single(y, x, [m[i][me] for i in range(n)], list(m[me]))
    return y.reshape(-1)


def splits_as(form, sizes, device):
    if form == "list":
        return list(sizes)
    if form == "cpu_tensor":
        return torch.tensor(sizes, dtype=torch.int64)
    if form == "cuda_tensor":
        return torch.tensor(sizes, dtype=torch.int64, device=device)
    if form == "none":
        return None
    raise ValueError(form)


def one_call(seed, dtype, row_shape, form, device, equal=None, stream=None, check=True):
    """rmacoll.all_to_all_single on CUDA tensors vs gloo on CPU copies.
    Returns a function that checks (after a later synchronize)."""
    n, me = dist.get_world_size(), dist.get_rank()
    m = matrix(seed, n, equal)
    inp_cpu = rank_input(seed, me, sum(m[me]), row_shape, dtype)
    out = Guarded(sum(m[i][me] for i in range(n)), row_shape, dtype, device)
    ctx = torch.cuda.stream(stream) if stream is not None else _null()
    with ctx:
        inp = inp_cpu.to(device, non_blocking=False)
        rmacoll.all_to_all_single(out.tensor, inp, splits_as(form, [m[i][me] for i in range(n)],
                                                             device),
                                  splits_as(form, m[me], device))
    ref = gloo_reference(inp_cpu, m, me, row_shape, dtype)
    name = "seed=%d %s rows%s splits=%s%s%s" % (seed, str(dtype).replace("torch.", ""),
                                                 tuple(row_shape), form,
                                                 "" if equal is None else " equal",
                                                 "" if stream is None else " side-stream")

    def verify():
        sync(device)
        body, guards = out.body_and_guards()
        ok = guards and torch.equal(body, ref)
        record(name, ok, "" if ok else "guards %s, first bytes %s vs %s"
               % (guards, body[:16].tolist(), ref[:16].tolist()))
    if check:
        verify()
        return None
    return verify


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def scenario_gpu(device):
    n, me = dist.get_world_size(), dist.get_rank()
    dtypes = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64,
              torch.int32, torch.uint8, torch.int8]
    # (CUDA split tensors are device split sizes now: scenario_device_splits)
    forms = ["list", "cpu_tensor"]
    for k, dt in enumerate(dtypes):
        one_call(100 + k, dt, (16,), forms[k % 2], device)
    one_call(120, torch.bfloat16, (4, 8), "list", device)          # rows of 32 elements
    one_call(121, torch.float32, (), "list", device)               # 1-d tensors
    one_call(122, torch.bfloat16, (4096,), "list", device)         # 8 KiB rows
    one_call(123, torch.float32, (64,), "none", device, equal=5)   # None: equal splits
    one_call(124, torch.float32, (64,), "list", device, equal=0)   # all blocks empty

    # a side stream: the call goes on torch.cuda.current_stream()
    s = torch.cuda.Stream(device=device)
    one_call(130, torch.bfloat16, (128,), "list", device, stream=s)

    # back to back without a host sync in between, then one check each
    pending = [one_call(140 + j, torch.float16, (256,), "list", device, check=False)
               for j in range(3)]
    for v in pending:
        v()

    # the prepared block (issue 34 item 4): the same shapes and split lists
    # again, new data each call, written on the current stream right before it
    m = matrix(200, n)
    osz, isz = [m[i][me] for i in range(n)], list(m[me])
    out = Guarded(sum(osz), (64,), torch.float32, device)
    inp = torch.empty((sum(isz), 64), dtype=torch.float32, device=device)
    for j in range(4):
        inp_cpu = rank_input(200 + j, me, sum(isz), (64,), torch.float32)
        inp.copy_(inp_cpu.pin_memory(), non_blocking=True)
        rmacoll.all_to_all_single(out.tensor, inp, osz, isz)
        ref = gloo_reference(inp_cpu, m, me, (64,), torch.float32)
        sync(device)
        body, guards = out.body_and_guards()
        record("prepared block, call %d" % j, guards and torch.equal(body, ref))
    # a prepared call queued behind a busy current stream, then the same call
    # on a side stream (a new stream: the full path, ordered after the
    # first), then again on the current stream: the last call's data stays
    ins = [rank_input(210 + j, me, sum(isz), (64,), torch.float32) for j in range(3)]
    dev_ins = [x.to(device) for x in ins]
    side = torch.cuda.Stream(device=device)
    torch.cuda.synchronize(device)
    for j in range(3):
        if j == 1:
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                torch.cuda._sleep(20000000)
                rmacoll.all_to_all_single(out.tensor, dev_ins[j], osz, isz)
        else:
            torch.cuda._sleep(20000000)
            rmacoll.all_to_all_single(out.tensor, dev_ins[j], osz, isz)
    ref = gloo_reference(ins[2], m, me, (64,), torch.float32)
    sync(device)
    body, guards = out.body_and_guards()
    record("prepared block across streams: calls stay ordered",
           guards and torch.equal(body, ref))

    # stream order: the input is written on the current stream right before the call
    m = matrix(150, n)
    inp_cpu = rank_input(150, me, sum(m[me]), (512,), torch.float32)
    pinned = inp_cpu.pin_memory()
    out = Guarded(sum(m[i][me] for i in range(n)), (512,), torch.float32, device)
    inp = torch.full(inp_cpu.shape, float("nan"), dtype=torch.float32, device=device)
    torch.cuda.synchronize()
    torch.cuda._sleep(20000000)  # keep the stream busy so the copy below is still queued
    inp.copy_(pinned, non_blocking=True)
    rmacoll.all_to_all_single(out.tensor, inp, [m[i][me] for i in range(n)], list(m[me]))
    ref = gloo_reference(inp_cpu, m, me, (512,), torch.float32)
    sync(device)
    body, guards = out.body_and_guards()
    record("stream order (async copy then call)", guards and torch.equal(body, ref))

    # async_op returns a Work
    m = matrix(160, n)
    inp_cpu = rank_input(160, me, sum(m[me]), (32,), torch.int32)
    out = Guarded(sum(m[i][me] for i in range(n)), (32,), torch.int32, device)
    w = rmacoll.all_to_all_single(out.tensor, inp_cpu.to(device), [m[i][me] for i in range(n)],
                                  list(m[me]), async_op=True)
    w.wait()
    ref = gloo_reference(inp_cpu, m, me, (32,), torch.int32)
    torch.cuda.synchronize()
    body, guards = out.body_and_guards()
    record("async_op Work", w is not None and guards and torch.equal(body, ref))

    # a host call right after a device call on the same communicator
    pend = one_call(170, torch.float32, (1024,), "list", device, check=False)
    m = matrix(171, n)
    hin = rank_input(171, me, sum(m[me]), (8,), torch.float64)
    hout = torch.full((sum(m[i][me] for i in range(n)), 8), -7.0, dtype=torch.float64)
    rmacoll.all_to_all_single(hout, hin, [m[i][me] for i in range(n)], list(m[me]))
    ref = gloo_reference(hin, m, me, (8,), torch.float64)
    record("CPU tensors after a CUDA call", torch.equal(
        hout.reshape(hout.shape[0], 8).view(torch.uint8).reshape(-1), ref))
    pend()

    # errors on CUDA tensors: every rank raises, nothing written
    m = matrix(180, n, equal=2)
    out = Guarded(2 * n, (8,), torch.float32 if me != 1 else torch.float16, device)
    inp = torch.ones((2 * n, 8), dtype=torch.float32, device=device)
    expect(lambda: rmacoll.all_to_all_single(out.tensor, inp), out, rmacoll.DatatypeError,
           "dtype differs on rank 1 (cuda)", device)
    out = Guarded(2 * n, (8,), torch.float32, device)
    inp = torch.ones((2 * n, 8), dtype=torch.float32, device="cpu" if me == 0 else device)
    expect(lambda: rmacoll.all_to_all_single(out.tensor, inp), out,
           rmacoll.InvalidArgumentError, "input on the CPU on rank 0", device)
    out = Guarded(2 * n, (8,), torch.float32, device)
    inp = torch.ones((2 * n, 8), dtype=torch.float32, device=device)
    isz = [2] * n
    if me == 1:
        isz[0], isz[-1] = 3, isz[-1] - 1 if n > 1 else isz[-1]
    expect(lambda: rmacoll.all_to_all_single(out.tensor, inp, None, isz), out,
           rmacoll.MismatchError, "count mismatch (cuda)", device)
    one_call(190, torch.bfloat16, (16,), "list", device)  # still usable


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def expect(fn, out, cls, name, device):
    try:
        fn()
    except rmacoll.RmacollError as e:
        sync(device)
        ok = type(e) is cls and out.untouched()
        record(name, ok, "" if ok else "raised %s, untouched %s: %s"
               % (type(e).__name__, out.untouched(), e), cls=type(e).__name__)
        return
    except Exception as e:  # noqa: BLE001
        record(name, False, "non-rmacoll %s: %s" % (type(e).__name__, e),
               cls=type(e).__name__)
        return
    record(name, False, "no exception")


def row_bytes(row_shape, dtype):
    return rows_elems(row_shape) * torch.empty((), dtype=dtype).element_size()


class _no_sync:
    """torch raises on any host synchronisation inside (set_sync_debug_mode)."""

    def __enter__(self):
        if hasattr(torch.cuda, "set_sync_debug_mode"):
            torch.cuda.set_sync_debug_mode("error")
        return self

    def __exit__(self, *a):
        if hasattr(torch.cuda, "set_sync_debug_mode"):
            torch.cuda.set_sync_debug_mode("default")
        return False


def device_case(name, seed, m, row_shape, dtype, device, extra_in=3, extra_out=5):
    """One dispatch (output_split_sizes None: produced), the same with the
    split sizes given, and the combine back, all with CUDA split tensors;
    each checked byte for byte against rmacoll's host-split path and gloo,
    the output rows past the received ones (sentinel) untouched."""
    n, me = dist.get_world_size(), dist.get_rank()
    send_rows = sum(m[me])
    osz = [m[i][me] for i in range(n)]
    recv_rows = sum(osz)
    rb = row_bytes(row_shape, dtype)
    # more input rows than are sent (not read) and more output rows than arrive
    inp_cpu = rank_input(seed, me, send_rows + extra_in, row_shape, dtype)
    inp = inp_cpu.to(device)
    isz = torch.tensor(m[me], dtype=torch.int64, device=device)
    # the reference: host split sizes (rmacoll) and gloo
    href = Guarded(recv_rows, row_shape, dtype, device)
    rmacoll.all_to_all_single(href.tensor, inp[:send_rows], osz, list(m[me]))
    ref = gloo_reference(inp_cpu[:send_rows], m, me, row_shape, dtype)
    sync(device)
    hbody, hguards = href.body_and_guards()
    record("%s: host-split reference" % name, hguards and torch.equal(hbody, ref))

    def check_out(what, out, splits=None, st=None):
        h = out.host()
        body = h[GUARD:GUARD + recv_rows * rb]
        ok = torch.equal(body, ref) and bool((h[:GUARD] == SENTINEL).all()) and \
            bool((h[GUARD + recv_rows * rb:] == SENTINEL).all())  # tail + guard
        detail = "" if ok else "bytes or sentinel tail differ"
        if splits is not None and splits.tolist() != osz:
            ok, detail = False, "out_splits %s, expected %s" % (splits.tolist(), osz)
        if st is not None and st.tolist() != [0]:
            ok, detail = False, "status %s" % st.tolist()
        record("%s: %s" % (name, what), ok, detail)

    # dispatch: output_split_sizes produced, no host sync in the call
    out = Guarded(recv_rows + extra_out, row_shape, dtype, device)
    out_splits = torch.full((n,), -1, dtype=torch.int64, device=device)
    status = torch.full((1,), -1, dtype=torch.int32, device=device)
    torch.cuda.synchronize(device)
    with _no_sync():
        rmacoll.all_to_all_single(out.tensor, inp, None, isz, out_splits=out_splits,
                                  status=status)
    sync(device)
    check_out("produce", out, out_splits, status)
    rmacoll.device_counts_check()

    # the same with the split sizes given (checked on the device)
    out2 = Guarded(recv_rows + extra_out, row_shape, dtype, device)
    st2 = torch.full((1,), -1, dtype=torch.int32, device=device)
    with _no_sync():
        rmacoll.all_to_all_single(out2.tensor, inp, out_splits, isz, status=st2)
    sync(device)
    check_out("given", out2, None, st2)

    # combine: the dispatch's output and out_splits back; the given sizes
    # are the dispatch's input split sizes; returns the sent rows exactly
    back = Guarded(send_rows + extra_in, row_shape, dtype, device)
    st3 = torch.full((1,), -1, dtype=torch.int32, device=device)
    with _no_sync():
        rmacoll.all_to_all_single(back.tensor, out.tensor, isz, out_splits, status=st3)
    sync(device)
    h = back.host()
    sent = inp_cpu[:send_rows].reshape(-1).view(torch.uint8) if send_rows else \
        torch.empty(0, dtype=torch.uint8)
    ok = torch.equal(h[GUARD:GUARD + send_rows * rb], sent) and \
        bool((h[GUARD + send_rows * rb:] == SENTINEL).all()) and st3.tolist() == [0]
    record("%s: combine returns the input" % name, ok)
    rmacoll.device_counts_check()


def expect_device_error(name, run, outs, code, cls, device, splits=None, want_splits=None):
    """A call whose split sizes fail on the device: its status word is
    `code` on every rank, nothing written, device_counts_check raises cls
    (then nothing more), and (dispatch) out_splits still holds the sizes."""
    status = torch.full((1,), -1, dtype=torch.int32, device=device)
    try:
        run(status)
    except Exception as e:  # noqa: BLE001 - the host call must succeed
        record(name, False, "the call raised %s: %s" % (type(e).__name__, e))
        return
    sync(device)
    why = []
    if status.tolist() != [code]:
        why.append("status %s, expected %d" % (status.tolist(), code))
    if not all(o.untouched() for o in outs):
        why.append("an output was written")
    if splits is not None and splits.tolist() != want_splits:
        why.append("out_splits %s, expected %s" % (splits.tolist(), want_splits))
    raised = None
    try:
        rmacoll.device_counts_check()
    except rmacoll.RmacollError as e:
        raised = e
    if type(raised) is not cls:
        why.append("device_counts_check raised %r" % (raised,))
    try:
        rmacoll.device_counts_check()  # reported once
    except rmacoll.RmacollError as e:
        why.append("a second check raised %r" % e)
    record(name, not why, "; ".join(why), cls=type(raised).__name__)


def scenario_device_splits(device):
    """Device split sizes: CUDA int64 split tensors (rmacoll_alltoallv_device_counts;
    needs a GPU per rank and RMACOLL_TRANSPORTS_INTRA_NODE=nvlink_kernel,
    which test_torch_gpu.py sets)."""
    n, me = dist.get_world_size(), dist.get_rank()
    g = torch.Generator().manual_seed(400)
    # zeros in random places, all zero, all to one rank, a rank that sends nothing
    cases = [("random", matrix(401, n)), ("random 2", matrix(402, n)),
             ("all zero", matrix(0, n, equal=0)),
             ("all to rank 0", [[int(torch.randint(1, 9, (1,), generator=g))] +
                                [0] * (n - 1) for _ in range(n)]),
             ("all to the last rank", [[0] * (n - 1) + [7] for _ in range(n)]),
             ("rank 0 sends nothing", [[0] * n] + matrix(403, n)[1:])]
    shapes = [((16,), torch.bfloat16), ((), torch.float32), ((3, 5), torch.int8),
              ((1024,), torch.float64)]
    for k, (cname, m) in enumerate(cases):
        row_shape, dt = shapes[k % len(shapes)]
        device_case("%s %s rows%s" % (cname, str(dt).replace("torch.", ""), tuple(row_shape)),
                    410 + k, m, row_shape, dt, device)
    for row_shape, dt in shapes:
        device_case("random %s rows%s" % (str(dt).replace("torch.", ""), tuple(row_shape)),
                    430, matrix(431, n), row_shape, dt, device, extra_in=0, extra_out=0)

    # errors found on the device: the same status on every rank, nothing written
    m = matrix(440, n, equal=2)
    inp = torch.ones((2 * n, 8), dtype=torch.float32, device=device)
    isz = torch.tensor(m[me], dtype=torch.int64, device=device)
    bad = [2] * n
    if me == 0:
        bad[n - 1] = 3
    out = Guarded(4 * n, (8,), torch.float32, device)
    expect_device_error("given split sizes differ on rank 0", lambda st: rmacoll.all_to_all_single(
        out.tensor, inp, torch.tensor(bad, device=device), isz, status=st), [out],
        6, rmacoll.MismatchError, device)
    out = Guarded(2 * n - (1 if me == 0 else 0), (8,), torch.float32, device)
    osp = torch.full((n,), -1, dtype=torch.int64, device=device)
    expect_device_error("output one row short on rank 0", lambda st: rmacoll.all_to_all_single(
        out.tensor, inp, None, isz, out_splits=osp, status=st), [out], 3,
        rmacoll.CountOverflowError, device, osp, [2] * n)
    out = Guarded(4 * n, (8,), torch.float32, device)
    neg = torch.tensor([2] * (n - 1) + [-1 if me == n - 1 else 2], device=device)
    expect_device_error("a negative split on the last rank", lambda st: rmacoll.all_to_all_single(
        out.tensor, inp, None, neg, status=st), [out], 3, rmacoll.CountOverflowError, device)
    # still usable
    device_case("after the errors", 450, matrix(451, n), (8,), torch.float32, device)


def scenario_cpu(device):
    """CPU tensors through a torch.distributed (gloo) group, against gloo."""
    n, me = dist.get_world_size(), dist.get_rank()
    dtypes = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64,
              torch.int32, torch.uint8, torch.int8]
    forms = ["list", "cpu_tensor", "none"]
    for k, dt in enumerate(dtypes):
        one_call(300 + k, dt, (16,), forms[k % 3], device,
                 equal=4 if forms[k % 3] == "none" else None)
    one_call(320, torch.bfloat16, (4, 8), "list", device)
    one_call(321, torch.float32, (), "list", device)
    one_call(322, torch.float32, (64,), "list", device, equal=0)
    w = rmacoll.all_to_all_single(torch.empty(0), torch.empty(0), [0] * n, [0] * n,
                                  async_op=True)
    record("async_op Work on the CPU", w.is_completed() and w.wait())
    # the group's communicator is made once and reused
    record("one communicator per group",
           rmacoll._torch.communicator_for_group() is rmacoll._torch.communicator_for_group())
    # an explicit group: a second communicator over the same ranks
    g = dist.new_group(list(range(n)))
    m = matrix(330, n)
    inp = rank_input(330, me, sum(m[me]), (8,), torch.float32)
    out = torch.full((sum(m[i][me] for i in range(n)), 8), -1.0)
    rmacoll.all_to_all_single(out, inp, [m[i][me] for i in range(n)], list(m[me]), group=g)
    ref = gloo_reference(inp, m, me, (8,), torch.float32)
    record("explicit group", torch.equal(out.view(torch.uint8).reshape(-1), ref))
    rmacoll.destroy_group_communicators(g)
    # errors through the group's communicator
    out = Guarded(2 * n, (8,), torch.float32 if me != 1 else torch.int32, device)
    inp = torch.ones((2 * n, 8), dtype=torch.float32)
    expect(lambda: rmacoll.all_to_all_single(out.tensor, inp), out, rmacoll.DatatypeError,
           "dtype differs on rank 1 (cpu)", device)
    out = Guarded(2 * n, (8,), torch.float32, device)
    inp = torch.ones((2 * n + (1 if me == 0 else 0), 8), dtype=torch.float32)
    expect(lambda: rmacoll.all_to_all_single(out.tensor, inp), out,
           rmacoll.InvalidArgumentError, "dim 0 not divisible on rank 0 (cpu)", device)
    out = Guarded(2 * n, (8,), torch.float32, device)
    inp = torch.ones((2 * n, 8), dtype=torch.bool)
    expect(lambda: rmacoll.all_to_all_single(out.tensor, inp), out, rmacoll.DatatypeError,
           "bool input (cpu)", device)
    one_call(340, torch.int64, (3,), "list", device)  # still usable


def scenario_nccl_bootstrap(device):
    """rmacoll communicator from the NCCL group's own communicator (needs a
    GPU per rank). UnsupportedError (no _comm_ptr, or librmacoll without
    NCCL) is reported as not available, not as a pass."""
    g = dist.new_group(backend="nccl")
    try:
        comm = rmacoll.Communicator.from_torch_group(g, bootstrap="nccl")
    except rmacoll.UnsupportedError as e:
        record("nccl bootstrap", True, "not available: %s" % e, unavailable=True)
        return
    n, me = comm.size, comm.rank
    m = matrix(200, n)
    inp_cpu = rank_input(200, me, sum(m[me]), (64,), torch.bfloat16)
    out = Guarded(sum(m[i][me] for i in range(n)), (64,), torch.bfloat16, device)
    rmacoll.all_to_all_single(out.tensor, inp_cpu.to(device), [m[i][me] for i in range(n)],
                              list(m[me]), comm=comm)
    ref = gloo_reference(inp_cpu, m, me, (64,), torch.bfloat16)
    torch.cuda.synchronize()
    body, guards = out.body_and_guards()
    record("nccl bootstrap", guards and torch.equal(body, ref))
    comm.close()


def scenario_gpu_memreg(device):
    """rmacoll.TorchSegments on the caching allocator: every segment
    registered once (memreg_handles), calls on tensors inside them exact;
    across nodes on the registered path (device_path 2) every call buffer
    borrows (memreg_buffers + 2 per call, staged_bytes unchanged), on the
    staged path or one node the registrations are only tracked
    (memreg_buffers unchanged). Written without a GPU: not run yet."""
    from rmacoll import _torch
    n, me = dist.get_world_size(), dist.get_rank()
    # the group's communicator, made by a first call
    one_call(300, torch.float32, (32,), "list", device)
    comm = _torch.existing_communicator()
    inp_big = torch.zeros((4096, 64), dtype=torch.float32, device=device)
    outs = [Guarded(8 * n, (64,), torch.float32, device) for _ in range(2)]
    torch.cuda.synchronize()
    segs = rmacoll.TorchSegments(comm, device=device.index)
    st0 = comm.stats()
    record("memreg segments registered once", len(segs.segments) > 0
           and st0["memreg_handles"] == len(segs.segments) and segs.update() == 0,
           "segments %r, handles %d" % (segs.segments, st0["memreg_handles"]))
    for k, out in enumerate(outs):
        m = matrix(310 + k, n, equal=8)
        inp_cpu = rank_input(310 + k, me, sum(m[me]), (64,), torch.float32)
        inp = inp_big[:sum(m[me])]
        inp.copy_(inp_cpu)
        out.big.fill_(SENTINEL)
        rmacoll.all_to_all_single(out.tensor, inp, [m[i][me] for i in range(n)], list(m[me]),
                                  comm=comm)
        ref = gloo_reference(inp_cpu, m, me, (64,), torch.float32)
        torch.cuda.synchronize()
        body, guards = out.body_and_guards()
        record("memreg call %d exact" % k, guards and torch.equal(body, ref))
    st1 = comm.stats()
    borrowed = st1["memreg_buffers"] - st0["memreg_buffers"]
    staged = st1["staged_bytes"] - st0["staged_bytes"]
    if st1["device_path"] == 2:
        ok, want = borrowed == 4 and staged == 0, "4 borrowed, 0 staged"
    else:
        ok, want = borrowed == 0, "0 borrowed (tracked only)"
    record("memreg counters (device_path %d)" % st1["device_path"], ok,
           "borrowed %d staged %d, want %s" % (borrowed, staged, want))
    del outs, inp_big
    segs.empty_cache()
    segs.close()
    record("memreg segments deregistered", comm.stats()["memreg_handles"] == 0,
           str(comm.stats()))


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    scenario = sys.argv[1]
    status = 0
    try:
        if scenario == "cpu":
            device = torch.device("cpu")
        else:
            ndev = torch.cuda.device_count()
            torch.cuda.set_device(rank % ndev)
            device = torch.device("cuda", rank % ndev)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        try:
            if scenario == "cpu":
                scenario_cpu(device)
            elif scenario == "gpu":
                scenario_gpu(device)
            elif scenario == "device_splits":
                scenario_device_splits(device)
            elif scenario == "gpu_memreg":
                scenario_gpu_memreg(device)
            elif scenario == "nccl_bootstrap":
                scenario_nccl_bootstrap(device)
            else:
                raise ValueError(scenario)
            rmacoll.destroy_group_communicators()
        finally:
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        record("scenario ran to the end", False, traceback.format_exc()[-2000:])
        status = 1
    if not all(c["ok"] for c in checks):
        status = 1
    sys.stdout.write(json.dumps({"rank": rank, "checks": checks}) + "\n")
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
