"""One rank of the torch.distributed backend tests (test_torch_backend.py
starts it under torchrun: python -m torch.distributed.run --standalone).

The default group is init_process_group(backend="rmacoll") (or, with
--device cuda on torch >= 2.0, "cpu:gloo,cuda:rmacoll"); the reference
is a gloo group of the same ranks (dist.new_group(backend="gloo")) moving
the same bytes as uint8 rows, so every dtype compares bit for bit (NaN
payloads included). Outputs sit inside sentinel guard bytes that must
stay untouched.

Report: TORCH_BACKEND_REPORT_DIR/rank<R>.json, {"rank", "world", "checks":
[{name, ok, detail, cls}]}; the driver requires every check ok and the
same check names and exception classes on every rank.
"""

import argparse
import json
import os
import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import rmacoll  # noqa: E402
import rmacoll.torch_backend as tb  # noqa: E402  (registers "rmacoll")

SENTINEL = 0xA5
GUARD = 256
checks = []
# the dtypes rmacoll moves (_buffers.DataType) that this torch has
DTYPES = [getattr(torch, n) for n in ("int8", "uint8", "int16", "int32", "uint32", "int64",
                                      "uint64", "bool", "float16", "bfloat16", "float32",
                                      "float64", "complex64", "complex128", "float8_e4m3fn",
                                      "float8_e5m2")
          if isinstance(getattr(torch, n, None), torch.dtype)]


def record(name, ok, detail="", **kw):
    d = {"name": name, "ok": bool(ok), "detail": detail}
    d.update(kw)
    checks.append(d)


def matrix(seed, n, zero_frac=0.3):
    g = torch.Generator().manual_seed(seed)
    m = torch.randint(1, 6, (n, n), generator=g)
    m[torch.rand((n, n), generator=g) < zero_frac] = 0
    return m.tolist()


def elems(shape):
    e = 1
    for d in shape:
        e *= d
    return e


def rank_input(seed, r, rows, row_shape, dtype, device):
    """Random bytes of `dtype` (NaNs and all), the same on every run."""
    esize = torch.empty((), dtype=dtype).element_size()
    g = torch.Generator().manual_seed(seed * 1000 + r)
    raw = torch.randint(0, 256, (rows * elems(row_shape) * esize,), dtype=torch.uint8,
                        generator=g)
    return raw.view(dtype).reshape((rows,) + tuple(row_shape)).to(device)


def guarded(rows, row_shape, dtype, device):
    """(output tensor, whole byte buffer) with GUARD sentinel bytes each side."""
    esize = torch.empty((), dtype=dtype).element_size()
    nbytes = rows * elems(row_shape) * esize
    buf = torch.full((nbytes + 2 * GUARD,), SENTINEL, dtype=torch.uint8, device=device)
    out = buf[GUARD:GUARD + nbytes].view(dtype).reshape((rows,) + tuple(row_shape))
    return out, buf


def flat_u8(t):
    """t's bytes, on the CPU."""
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)


def gloo_ref(gloo, inp, isz, osz, out_rows):
    """What all_to_all_single must write, moved by gloo as uint8 rows."""
    row_bytes = elems(inp.shape[1:]) * inp.element_size()
    src = flat_u8(inp).reshape(inp.shape[0], row_bytes)
    dst = torch.empty((out_rows, row_bytes), dtype=torch.uint8)
    dist.all_to_all_single(dst, src, osz, isz, group=gloo)
    return dst.reshape(-1)


def check_guarded(name, buf, ref):
    got = buf.cpu()
    body = got[GUARD:GUARD + ref.numel()]
    ok = torch.equal(body, ref)
    g1, g2 = got[:GUARD], got[GUARD + ref.numel():]
    guards = bool((g1 == SENTINEL).all()) and bool((g2 == SENTINEL).all())
    detail = ""
    if not ok:
        bad = (body != ref).nonzero()
        detail = "%d bytes differ, first at %d" % (bad.numel(), int(bad[0]) if bad.numel() else -1)
    elif not guards:
        detail = "a guard byte was written"
    record(name, ok and guards, detail)


def one_call(name, seed, m, row_shape, dtype, device, gloo, group=None, splits="list",
             async_op=False):
    r = dist.get_rank(group)
    n = dist.get_world_size(group)
    isz = list(m[r])
    osz = [m[i][r] for i in range(n)]
    inp = rank_input(seed, r, sum(isz), row_shape, dtype, device)
    out, buf = guarded(sum(osz), row_shape, dtype, device)
    if splits == "none":
        args = (None, None)
    elif splits == "empty_lists":
        args = ([], [])
    elif splits == "tensors":
        args = (torch.tensor(osz), torch.tensor(isz))
    else:
        args = (osz, isz)
    w = dist.all_to_all_single(out, inp, args[0], args[1], group=group, async_op=async_op)
    if async_op:
        ok = isinstance(w, dist.Work) and isinstance(w, tb.Work)
        w.wait()
        res = w.result()
        fut = w.get_future()
        ok = ok and res[0] is out and fut.wait()[0] is out
        if device == "cpu":
            ok = ok and w.is_completed()
        else:
            w.synchronize()
            ok = ok and w.is_completed()
        record(name + " work", ok, "Work: wait/result/get_future/is_completed")
    ref = gloo_ref(gloo, inp, isz, osz, sum(osz))
    check_guarded(name, buf, ref)


def expect_error(name, fn, cls, text=None):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - recorded
        ok = isinstance(e, cls) and (text is None or text in str(e))
        record(name, ok, "%s: %s" % (type(e).__name__, str(e)[:400]), cls=type(e).__name__)
        return
    record(name, False, "no exception", cls=None)


def run(device, form):
    t0 = time.time()
    backend = "rmacoll" if form == "rmacoll" else form
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=120))
    r, n = dist.get_rank(), dist.get_world_size()
    world = dist.group.WORLD
    record("init_process_group(%r)" % backend,
           isinstance(world, tb.ProcessGroupRmacoll) and dist.get_backend() in (backend, "rmacoll")
           and (form == "rmacoll" or "cpu" in world.device_fallbacks),
           "%r, get_backend %r, %.1f s" % (world, dist.get_backend(), time.time() - t0))
    gloo = dist.new_group(backend="gloo")

    # every dtype, uneven splits with zeros (empty blocks), row shapes
    shapes = [(), (3,), (2, 2)]
    for k, dt in enumerate(DTYPES):
        one_call("uneven %s rows%s" % (str(dt)[6:], shapes[k % 3]), 10 + k, matrix(10 + k, n),
                 shapes[k % 3], dt, device, gloo)
    # a rank that sends nothing, a rank that receives nothing, nothing at all
    m = matrix(40, n, zero_frac=0.0)
    for j in range(n):
        m[0][j] = 0          # rank 0 sends nothing
        m[j][n - 1] = 0      # rank n-1 receives nothing
    one_call("empty: rank 0 sends none, rank n-1 receives none", 40, m, (3,), torch.float32,
             device, gloo)
    one_call("empty: no rows at all", 41, [[0] * n for _ in range(n)], (2,), torch.bfloat16,
             device, gloo)
    # equal splits: None, [] (torch's None), split tensors
    one_call("None splits (equal)", 42, [[3] * n for _ in range(n)], (2,), torch.float16,
             device, gloo, splits="none")
    one_call("[] splits (equal)", 43, [[2] * n for _ in range(n)], (), torch.int64, device,
             gloo, splits="empty_lists")
    one_call("split sizes as CPU tensors", 44, matrix(44, n), (), torch.int32, device, gloo,
             splits="tensors")
    one_call("async_op", 45, matrix(45, n), (4,), torch.float32, device, gloo, async_op=True)
    # three calls back to back, then the references
    for k in range(3):
        one_call("back to back %d" % k, 50 + k, matrix(50 + k, n), (5,), torch.uint8, device,
                 gloo)

    # complex: torch views it as real (float32 pairs) before the group sees it
    isz = [(r + j) % 3 for j in range(n)]
    osz = [(i + r) % 3 for i in range(n)]
    g = torch.Generator().manual_seed(60 + r)
    inp = torch.randn(sum(isz), 2, dtype=torch.complex64, generator=g).to(device)
    out = torch.empty(sum(osz), 2, dtype=torch.complex64, device=device)
    dist.all_to_all_single(out, inp, osz, isz)
    ref = torch.empty(sum(osz), 2, dtype=torch.complex64)
    dist.all_to_all_single(ref, inp.cpu(), osz, isz, group=gloo)
    record("complex64 (as float32 pairs)",
           torch.equal(flat_u8(out), flat_u8(ref)))

    # the list form: per-pair sizes, row shapes, a non-contiguous input
    for k, dt in enumerate((torch.float32, torch.bfloat16, torch.int8)):
        m = matrix(70 + k, n)
        g = torch.Generator().manual_seed(70 + k + 100 * r)
        ins = []
        for j in range(n):
            raw = torch.randint(0, 256, (m[r][j] * 3 * torch.empty((), dtype=dt).element_size(),),
                                dtype=torch.uint8, generator=g)
            t = raw.view(dt).reshape(m[r][j], 3)
            if j == 0 and k == 0:
                t = t.t().contiguous().t()  # same values, column-major storage
            ins.append(t.to(device))
        outs = [torch.full((m[i][r], 3), 7, dtype=dt, device=device) for i in range(n)]
        dist.all_to_all(outs, ins)
        # reference: gloo's all_to_all_single on the concatenated bytes
        es = torch.empty((), dtype=dt).element_size()
        send_b = torch.cat([t.cpu().reshape(-1) for t in ins]).view(torch.uint8)
        ref_b = torch.empty(sum(m[i][r] for i in range(n)) * 3 * es, dtype=torch.uint8)
        dist.all_to_all_single(ref_b, send_b, [m[i][r] * 3 * es for i in range(n)],
                               [m[r][j] * 3 * es for j in range(n)], group=gloo)
        got_b = torch.cat([o.cpu().reshape(-1) for o in outs]).view(torch.uint8)
        record("all_to_all list %s" % str(dt)[6:], torch.equal(got_b, ref_b))
    # the list form, async
    ins = [torch.full((j + 1, 2), float(r), device=device) for j in range(n)]
    outs = [torch.empty(r + 1, 2, device=device) for _ in range(n)]
    w = dist.all_to_all(outs, ins, async_op=True)
    w.wait()
    if device == "cuda":
        torch.cuda.current_stream().synchronize()
    record("all_to_all list async", isinstance(w, tb.Work) and w.result()[0] is outs[0] and
           all(bool((outs[i] == float(i)).all()) for i in range(n)))

    if device == "cuda":
        # the current stream: input written on a side stream behind a sleep
        # kernel, the call on that stream, the output read on the default
        # stream after Work.wait(): no host synchronisation anywhere
        m = matrix(65, n)
        src = rank_input(65, r, sum(m[r]), (4,), torch.float32, "cpu")
        osz = [m[i][r] for i in range(n)]
        side = torch.cuda.Stream()
        inp = torch.empty(src.shape, dtype=src.dtype, device=device)
        out = torch.empty((sum(osz), 4), dtype=src.dtype, device=device)
        pinned = src.pin_memory()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(50 * 1000 * 1000)
            inp.copy_(pinned, non_blocking=True)
            w = dist.all_to_all_single(out, inp, osz, m[r], async_op=True)
        w.wait()  # the default stream now waits for the call
        got = out.clone()  # on the default stream
        torch.cuda.synchronize()
        ref = gloo_ref(gloo, src, m[r], osz, sum(osz))
        record("CUDA: side stream, Work.wait orders the default stream",
               torch.equal(flat_u8(got), ref) and w.is_completed())

    # barrier (a one-byte alltoall on the CPU form)
    dist.barrier()
    record("barrier", True)

    # rmacoll.all_to_all_single(group=None) uses the backend's communicator
    record("rmacoll.all_to_all_single shares the group's communicator",
           rmacoll._torch.communicator_for_group(None) is world.communicator)
    m = matrix(77, n)
    inp = rank_input(77, r, sum(m[r]), (2,), torch.bfloat16, device)
    osz = [m[i][r] for i in range(n)]
    out = torch.empty((sum(osz), 2), dtype=torch.bfloat16, device=device)
    calls = world.rmacoll_calls
    rmacoll.all_to_all_single(out, inp, osz, m[r])  # group=None: the backend's communicator
    if device == "cuda":
        torch.cuda.synchronize()
    record("rmacoll.all_to_all_single(group=None) on the backend group",
           torch.equal(flat_u8(out), gloo_ref(gloo, inp, m[r], osz, sum(osz)))
           and world.rmacoll_calls == calls)
    expect_error("Communicator.from_torch_group(backend group)",
                 lambda: rmacoll.Communicator.from_torch_group(), rmacoll.UnsupportedError,
                 "group.communicator")

    # a subgroup on rmacoll (its own store prefix, creator called again)
    if n >= 3:
        members = list(range(1, n))
        sub = dist.new_group(members, backend="rmacoll")
        subg = dist.new_group(members, backend="gloo")
        if r in members:
            k = len(members)
            one_call("subgroup ranks %s" % members, 80, matrix(80, k), (2,), torch.float64,
                     device, subg, group=sub)
        else:
            record("subgroup ranks %s" % members, True, "not a member")

    # errors: every rank raises, then the communicator still works
    ok_m = [[2] * n for _ in range(n)]

    def bad_input_split():
        inp = torch.zeros(2 * n, dtype=torch.float32, device=device)
        out = torch.zeros(2 * n, dtype=torch.float32, device=device)
        isz = [2] * n
        if r == n - 1:
            isz[0] = 1  # sums to 2n-1 rows, input has 2n
        dist.all_to_all_single(out, inp, [2] * n, isz)
    expect_error("wrong-size input_split_sizes on the last rank", bad_input_split,
                 rmacoll.InvalidArgumentError,
                 "input_split_sizes sum to" if r == n - 1 else "call failed on rank %d" % (n - 1))

    def short_output():
        inp = torch.zeros(2 * n, device=device)
        out = torch.zeros(2 * n - (1 if r == 0 else 0), device=device)
        dist.all_to_all_single(out, inp, [2] * n, [2] * n)
    expect_error("output one row short on rank 0", short_output, rmacoll.InvalidArgumentError,
                 "output_split_sizes sum to" if r == 0 else "call failed on rank 0")

    def wrong_split_count():
        inp = torch.zeros(2 * n, device=device)
        out = torch.zeros(2 * n, device=device)
        sz = [2] * n if r != 0 else [2 * n - 2, 2] + [0] * (n - 1)
        dist.all_to_all_single(out, inp, [2] * n, sz)
    expect_error("n+1 input_split_sizes on rank 0", wrong_split_count,
                 rmacoll.InvalidArgumentError)

    def mismatch():
        # rank 0 sends 1 row to itself and 3 to rank 1, each expects 2
        isz = [2] * n
        osz = [2] * n
        if r == 0:
            isz = [1, 3] + [2] * (n - 2)
        inp = torch.zeros(sum(isz), device=device)
        out = torch.zeros(sum(osz), device=device)
        dist.all_to_all_single(out, inp, osz, isz)
    expect_error("count mismatch (rank 0 sends 1 and 3 rows, 2 expected)", mismatch, rmacoll.MismatchError)

    def list_count():
        k = n + 1 if r == 1 else n
        dist.all_to_all([torch.zeros(1, device=device) for _ in range(k)],
                        [torch.zeros(1, device=device) for _ in range(k)])
    expect_error("all_to_all: n+1 tensors on rank 1", list_count, rmacoll.InvalidArgumentError,
                 "all_to_all needs" if r == 1 else "call failed on rank 1")

    # (every dense torch dtype is one rmacoll moves now, and torch.distributed
    # hands complex tensors over as their real view: no dtype error to test)

    if device == "cpu":
        # torch passes [] for output_split_sizes=None; the backend hands None on, so a
        # CUDA input_split_sizes tensor selects device split sizes (a stand-in here:
        # refused for host tensors, on every rank, before any device work)
        from fakes import FakeCudaTensor

        def device_splits_host_data():
            sz = FakeCudaTensor((n,)) if r == 0 else [2] * n
            dist.all_to_all_single(torch.zeros(2 * n), torch.zeros(2 * n), None, sz)
        expect_error("a CUDA split tensor with CPU tensors on rank 0", device_splits_host_data,
                     rmacoll.InvalidArgumentError,
                     "input and output are in host memory" if r == 0 else
                     "call failed on rank 0")

    one_call("usable after the errors", 90, ok_m, (), torch.int64, device, gloo)

    if form == "rmacoll":
        t = torch.ones(4, device=device)
        expect_error("all_reduce is not rmacoll's", lambda: dist.all_reduce(t),
                     rmacoll.UnsupportedError, "does not do allreduce")
        expect_error("broadcast is not rmacoll's", lambda: dist.broadcast(t, 0),
                     rmacoll.UnsupportedError, "does not do broadcast")
        expect_error("all_gather is not rmacoll's",
                     lambda: dist.all_gather([torch.empty(4, device=device)
                                              for _ in range(n)], t),
                     rmacoll.UnsupportedError, "does not do allgather")

    else:
        # device-split form (torch >= 2.0): CPU tensors go to the other backend
        t = torch.full((3,), float(r + 1))
        dist.all_reduce(t)
        record("%s: all_reduce of CPU tensors by gloo" % form,
               bool((t == float(n * (n + 1) // 2)).all()), str(t.tolist()))
        expect_error("%s: all_reduce of CUDA tensors is not rmacoll's" % form,
                     lambda: dist.all_reduce(torch.ones(2, device=device)),
                     rmacoll.UnsupportedError, "does not do allreduce")

    # the device-split form's routing, built by hand (torch 1.13 has no
    # "cpu:gloo,cuda:rmacoll" strings): CPU tensors go to gloo, not rmacoll
    store = dist.distributed_c10d._get_default_store()
    pg = tb.ProcessGroupRmacoll(dist.PrefixStore("fallback-test/", store), r, n,
                                timedelta(seconds=60),
                                device_backends={"cpu": "gloo", "cuda": "rmacoll"})
    t = torch.full((3,), float(r + 1))
    dist.all_reduce(t, group=pg)
    s = float(n * (n + 1) // 2)
    m = matrix(95, n)
    inp = rank_input(95, r, sum(m[r]), (2,), torch.float32, "cpu")
    out = torch.empty(sum(m[i][r] for i in range(n)), 2)
    dist.all_to_all_single(out, inp, [m[i][r] for i in range(n)], m[r], group=pg)
    ref = gloo_ref(gloo, inp, m[r], [m[i][r] for i in range(n)], out.shape[0])
    record("device map {cpu: gloo, cuda: rmacoll}: CPU ops go to gloo",
           bool((t == s).all()) and torch.equal(flat_u8(out), ref)
           and pg.rmacoll_calls == 0 and "cpu" in pg.device_fallbacks,
           "allreduce %s, rmacoll calls %d" % (t.tolist(), pg.rmacoll_calls))
    pg.close()

    # group rank 0 cannot make the unique id: every rank raises its error
    def bad_uid():
        saved = os.environ.get("RMACOLL_BOOTSTRAP_ADDR")
        if r == 0:
            os.environ["RMACOLL_BOOTSTRAP_ADDR"] = "192.0.2.1:1"  # not this host's (TEST-NET-1)
        try:
            tb.ProcessGroupRmacoll(dist.PrefixStore("bad-uid-test/", store), r, n)
        finally:
            if r == 0:
                if saved is None:
                    del os.environ["RMACOLL_BOOTSTRAP_ADDR"]
                else:
                    os.environ["RMACOLL_BOOTSTRAP_ADDR"] = saved
    expect_error("group rank 0 cannot make the unique id", bad_uid, rmacoll.BootstrapError,
                 None if r == 0 else "group rank 0 could not make the rmacoll unique id")

    # torch 2.x's _new_process_group_helper for "cpu:gloo,cuda:rmacoll", as the
    # creator reads it (a stand-in frame: its backend_config, and its pg holding
    # the gloo backend torch made for "cpu" before calling rmacoll's creator)
    class _Cfg:
        def get_device_backend_map(self):
            return {"cpu": "gloo", "cuda": "rmacoll"}

    class _Assembling:  # the ProcessGroup torch is filling, device by device
        def __init__(self, backends):
            self.backends = backends

        def _get_backend(self, device):
            return self.backends[device.type]

    helper_gloo = dist.ProcessGroupGloo(dist.PrefixStore("helper-test/cpu/", store), r, n)

    def _new_process_group_helper():
        backend_config = _Cfg()  # noqa: F841 - read from the frame
        pg = _Assembling({"cpu": helper_gloo})  # noqa: F841 - read from the frame
        return tb.create(dist.PrefixStore("helper-test/", store), r, n, timedelta(seconds=60))
    pg = _new_process_group_helper()
    t = torch.full((2,), float(r + 1))
    dist.all_reduce(t, group=pg)
    record("creator in a stand-in of torch 2.x's helper frame: cpu served by torch's gloo",
           pg.device_fallbacks.get("cpu") is helper_gloo and bool((t == s).all())
           and pg.rmacoll_calls == 0, repr(pg))
    pg.close()

    # closing: collective; later calls say the communicator is closed
    rmacoll.destroy_group_communicators()
    # (tensors on `device`: with "cpu:gloo,cuda:rmacoll" a CPU tensor is
    # gloo's, which goes on working; the torch 2.11 run on the GPU machine
    # tested CPU tensors there and found no exception)
    expect_error("a call after destroy_group_communicators",
                 lambda: dist.all_to_all_single(torch.empty(n, device=device),
                                                torch.empty(n, device=device)),
                 rmacoll.InvalidArgumentError, "closed")
    expect_error("rmacoll.all_to_all_single after destroy_group_communicators",
                 lambda: rmacoll.all_to_all_single(torch.empty(n), torch.empty(n)),
                 rmacoll.InvalidArgumentError, "closed")
    dist.destroy_process_group()
    record("total", True, "%.1f s" % (time.time() - t0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--form", default="rmacoll",
                    help="backend string: rmacoll, or cpu:gloo,cuda:rmacoll (torch >= 2.0)")
    a = ap.parse_args()
    rank = int(os.environ["RANK"])
    try:
        run(a.device, a.form)
    except Exception:  # noqa: BLE001 - reported
        record("exception", False, traceback.format_exc())
    path = os.path.join(os.environ["TORCH_BACKEND_REPORT_DIR"], "rank%d.json" % rank)
    with open(path, "w") as f:
        json.dump({"rank": rank, "world": int(os.environ["WORLD_SIZE"]), "checks": checks}, f)
    failed = [c for c in checks if not c["ok"]]
    for c in failed:
        print("rank %d FAIL %s: %s" % (rank, c["name"], c["detail"]), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
