#!/usr/bin/env python3
"""Python's per-call cost over C (issue 34 item 4): rmacoll_alltoallv
called from a C loop and the same call through the Python package, on one
communicator and the same host buffers, in one run.

Ranks are processes on this host (one virtual node), host memory, float32
blocks; SIZE is the bytes each rank sends per call in total (SIZE / N per
peer). In every rank process, for every size, each path makes --warmup
untimed calls and then --iters timed calls, and the paths take turns for
--rounds rounds (so load on the machine falls on all of them alike):

  c             rmacoll_alltoallv from C (python/bench/c_loop.c, built as
                build/python/librmacoll_bench_loop.so), each call timed with
                CLOCK_MONOTONIC; the counts are prepared int64 arrays
  numpy         rmacoll.all_to_all_single(out, inp, splits, splits, comm=c)
                on numpy arrays, split sizes as Python lists
  numpy-None    the same with split sizes None (equal splits)
  numpy-vary    split sizes that change every call (even N only): the
                cached arguments cannot be reused (the C loop does not vary)
  alltoallv     Communicator.alltoallv(inp, counts, displs, out, ...) with
                Python lists
  torch         all_to_all_single on torch CPU tensors (when torch imports)

With --device cuda the buffers are torch CUDA tensors on GPU 0 (ranks as
processes share it: time-sliced unless MPS runs) and the rows are:

  c             rmacoll_alltoallv from C on the same tensors' memory,
                enqueued on torch's current stream
                (rmacoll_bench_c_loop_stream)
  ctypes        the library's rmacoll_alltoallv called from Python through
                ctypes with the same prepared arrays, pointers and stream
                (no package code: the floor of any ctypes binding)
  torch-cuda    all_to_all_single on the CUDA tensors (split sizes as
                Python lists)

and each rank prints to stderr how many torch-cuda calls reused the
prepared argument block, and rank 0 what each step of that reuse costs
alone on these tensors (ns per step, a loop of 20000).

Each call's enqueue is timed alone; the stream is then synchronised,
untimed, on both paths (cudaStreamSynchronize of the libcudart torch
loaded, found in /proc/self/maps), so the difference is Python's host
cost per device call.

Each Python call is timed with time.perf_counter_ns (CLOCK_MONOTONIC). A
row gives the median and the 10th percentile of the per-call
microseconds of the slowest rank (the collective's), and their
differences to the C row of the same size and rank count (over_c_med,
over_c_p10). With one rank the call involves no peer, so the difference
is Python's own cost; with several, a rank that loses its core to
another process makes its peers wait, which a loaded machine shows as a
median far above the 10th percentile on every path, C's included. The
receive buffer is checked after each path.

Run (from the source tree, after cmake --build build):
    /usr/bin/python3 python/bench/bench_overhead.py --nprocs 1,2 --sizes 1K,16K,256K
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)  # python/: the rmacoll package of this tree
REPO = os.path.dirname(PKG_ROOT)
sys.path.insert(0, PKG_ROOT)

from bench_all_to_all import parse_size  # noqa: E402 - one size parser for the benches


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", default="1,2", help="rank counts, comma separated")
    p.add_argument("--sizes", default="1K,16K,256K",
                   help="bytes each rank sends per call, comma separated")
    p.add_argument("--iters", type=int, default=2000, help="timed calls per path and round")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--no-torch", action="store_true", help="skip the torch row")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: torch CUDA tensors, the c and torch-cuda rows only")
    p.add_argument("--loop-lib", default=os.environ.get("BENCH_OVERHEAD_LOOP"),
                   help="librmacoll_bench_loop.so (default: build/python/ of this tree)")
    p.add_argument("--json", default=None, help="write the rows here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args()


# ------------------------------------------------------------------ worker
def worker(args):
    import ctypes

    import numpy as np

    import rmacoll

    rank = int(os.environ["BENCH_OVERHEAD_RANK"])
    n = int(os.environ["BENCH_OVERHEAD_NRANKS"])
    comm = rmacoll.Communicator(rank, n, rmacoll.UniqueId.from_hex(os.environ["BENCH_OVERHEAD_UID"]))
    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            torch = None
    loop_path = args.loop_lib or os.path.join(REPO, "build", "python",
                                              "librmacoll_bench_loop.so")
    cl = ctypes.CDLL(loop_path)
    i64p = ctypes.POINTER(ctypes.c_int64)
    cl.rmacoll_bench_c_loop.restype = ctypes.c_int
    cl.rmacoll_bench_c_loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, i64p, i64p,
                                        ctypes.c_void_p, i64p, i64p, ctypes.c_int,
                                        ctypes.c_void_p, ctypes.c_int, i64p]
    fn = ctypes.cast(comm._lib.rmacoll_alltoallv, ctypes.c_void_p).value
    pc = time.perf_counter_ns
    if args.device == "cuda":
        rows = cuda_rows(args, comm, rank, n, cl, fn)
        comm.close()
        print(json.dumps({"rank": rank, "rows": rows}))
        return 0
    rows = []
    for size in [parse_size(s) for s in args.sizes.split(",")]:
        b = max(1, size // 4 // n)  # float32 elements per peer
        x = (np.arange(n * b, dtype=np.float32) + rank * 1e6)
        y = np.zeros(n * b, dtype=np.float32)
        expect = np.concatenate([np.arange(rank * b, (rank + 1) * b, dtype=np.float32)
                                 + i * 1e6 for i in range(n)])
        counts = [b] * n
        displs = [j * b for j in range(n)]
        A = ctypes.c_int64 * n
        sc, sd = A(*counts), A(*displs)
        ns = (ctypes.c_int64 * max(args.iters, args.warmup))()
        dt = int(rmacoll.DataType.FLOAT32)

        def c_path(k, record):
            st = cl.rmacoll_bench_c_loop(fn, x.ctypes.data, sc, sd, y.ctypes.data, sc, sd,
                                         dt, comm._h, k, ns)
            if st != 0:
                raise RuntimeError("rmacoll_alltoallv: status %d" % st)
            if record is not None:
                record.extend(ns[:k])

        def py_loop(call):
            def run(k, record):
                if record is None:
                    for _ in range(k):
                        call()
                    return
                for _ in range(k):
                    t0 = pc()
                    call()
                    record.append(pc() - t0)
            return run

        a2a = rmacoll.all_to_all_single
        paths = [("c", c_path, y, expect),
                 ("numpy", py_loop(lambda: a2a(y, x, counts, counts, comm=comm)), y, expect),
                 ("numpy-None", py_loop(lambda: a2a(y, x, comm=comm)), y, expect)]
        if n % 2 == 0 and b >= 2:
            # rank i sends b+1 or b-1 rows to j ((i + j) even or odd), then
            # the reverse: symmetric, so every row sums to n*b
            def vary_split(i, flip):
                return [b + (1 if ((i + j) % 2 == 0) != flip else -1) for j in range(n)]
            va = [vary_split(rank, False), vary_split(rank, True)]
            vx = (np.arange(n * b, dtype=np.float32) + rank * 1e6)
            vy = np.zeros(n * b, dtype=np.float32)
            state = [0]

            def vary():
                s = va[state[0]]
                state[0] ^= 1
                a2a(vy, vx, s, s, comm=comm)
            paths.append(("numpy-vary", py_loop(vary), None, None))
        paths.append(("alltoallv", py_loop(lambda: comm.alltoallv(x, counts, displs, y, counts,
                                                                  displs)), y, expect))
        if torch is not None:
            tx, ty = torch.from_numpy(x.copy()), torch.zeros(n * b, dtype=torch.float32)
            paths.append(("torch", py_loop(lambda: a2a(ty, tx, counts, counts, comm=comm)),
                          ty, expect))
        times = {name: [] for name, *_ in paths}
        for _ in range(args.rounds):
            for name, run, out, exp in paths:
                if out is not None:
                    out[:] = 0
                run(args.warmup, None)
                run(args.iters, times[name])
                if out is not None:
                    got = out.numpy() if hasattr(out, "numpy") else out
                    if not np.array_equal(got, exp):
                        raise RuntimeError("%s: wrong output at size %d" % (name, size))
        for name, *_ in paths:
            rows.append({"nranks": n, "size": size, "path": name,
                         "median_us": statistics.median(times[name]) / 1000.0,
                         "p10_us": sorted(times[name])[len(times[name]) // 10] / 1000.0})
    comm.close()
    print(json.dumps({"rank": rank, "rows": rows}))
    return 0


def cudart_sync(ctypes):
    """cudaStreamSynchronize of the libcudart this process loaded (torch's)."""
    with open("/proc/self/maps") as f:
        libs = sorted({ln.split()[-1] for ln in f if "libcudart" in ln and "/" in ln})
    for path in libs + ["libcudart.so"]:
        try:
            fn = ctypes.CDLL(path).cudaStreamSynchronize
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p]
        return fn
    raise SystemExit("no libcudart with cudaStreamSynchronize in this process")


def cuda_rows(args, comm, rank, n, cl, fn):
    """--device cuda: the c and torch-cuda rows (see the module's text)."""
    import ctypes

    import torch

    import rmacoll
    from rmacoll._comm import CUDA_STREAM_LEGACY

    torch.cuda.set_device(0)
    i64p = ctypes.POINTER(ctypes.c_int64)
    sync = cudart_sync(ctypes)
    cl.rmacoll_bench_c_loop_stream.restype = ctypes.c_int
    cl.rmacoll_bench_c_loop_stream.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p, i64p, i64p, ctypes.c_void_p, i64p, i64p,
        ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, i64p]
    stream = torch.cuda.current_stream()
    sh = stream.cuda_stream or CUDA_STREAM_LEGACY
    sync_ptr = ctypes.cast(sync, ctypes.c_void_p).value
    pc = time.perf_counter_ns
    rows = []
    for size in [parse_size(s) for s in args.sizes.split(",")]:
        b = max(1, size // 4 // n)
        tx = (torch.arange(n * b, dtype=torch.float32) + rank * 1e6).cuda()
        ty = torch.zeros(n * b, dtype=torch.float32, device="cuda")
        expect = torch.cat([torch.arange(rank * b, (rank + 1) * b, dtype=torch.float32)
                            + i * 1e6 for i in range(n)])
        counts = [b] * n
        A = ctypes.c_int64 * n
        sc, sd = A(*counts), A(*[j * b for j in range(n)])
        ns = (ctypes.c_int64 * max(args.iters, args.warmup))()
        dt = int(rmacoll.DataType.FLOAT32)
        torch.cuda.synchronize()

        def c_path(k, record):
            st = cl.rmacoll_bench_c_loop_stream(fn, tx.data_ptr(), sc, sd, ty.data_ptr(), sc,
                                                sd, dt, comm._h, sh, sync_ptr, k, ns)
            if st != 0:
                raise RuntimeError("rmacoll_alltoallv on the stream: status %d" % st)
            if record is not None:
                record.extend(ns[:k])

        lib_a2a = comm._lib.rmacoll_alltoallv

        def ctypes_path(k, record):
            xp, yp, h = tx.data_ptr(), ty.data_ptr(), comm._h
            for _ in range(k):
                t0 = pc()
                st = lib_a2a(xp, sc, sd, yp, sc, sd, dt, h, sh)
                t1 = pc()
                stream.synchronize()
                if st != 0:
                    raise RuntimeError("rmacoll_alltoallv through ctypes: status %d" % st)
                if record is not None:
                    record.append(t1 - t0)

        def torch_path(k, record):
            a2a = rmacoll.all_to_all_single
            for _ in range(k):
                t0 = pc()
                a2a(ty, tx, counts, counts, comm=comm)
                t1 = pc()
                stream.synchronize()
                if record is not None:
                    record.append(t1 - t0)

        paths = [("c", c_path), ("ctypes", ctypes_path), ("torch-cuda", torch_path)]
        prepared_report(rank, size, comm, tx, ty, counts, torch_path)
        times = {name: [] for name, _ in paths}
        for _ in range(args.rounds):
            for name, run in paths:
                ty.zero_()
                run(args.warmup, None)
                run(args.iters, times[name])
                torch.cuda.synchronize()
                if not torch.equal(ty.cpu(), expect):
                    raise RuntimeError("%s: wrong output at size %d" % (name, size))
        for name, _ in paths:
            rows.append({"nranks": n, "size": size, "path": name,
                         "median_us": statistics.median(times[name]) / 1000.0,
                         "p10_us": sorted(times[name])[len(times[name]) // 10] / 1000.0})
    return rows


def prepared_report(rank, size, comm, tx, ty, counts, torch_path):
    """stderr: how many all_to_all_single calls on these CUDA tensors the
    prepared block (rmacoll._single._Prepared.call) took, and (rank 0)
    what each step of that call costs alone, ns per step."""
    import torch

    from rmacoll import _single
    orig = _single._Prepared.call
    took = [0, 0]

    def counting(self, *a):
        r = orig(self, *a)
        took[r is None] += 1
        return r
    _single._Prepared.call = counting
    try:
        torch_path(200, None)
    finally:
        _single._Prepared.call = orig
    print("rank %d, %d B: the prepared block took %d of %d calls" % (
        rank, size, took[0], sum(took)), file=sys.stderr)
    if rank != 0:
        return
    pc = time.perf_counter_ns
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    steps = [
        ("torch.cuda.current_device()", lambda: torch.cuda.current_device()),
        ("torch._C._cuda_getDevice()", lambda: torch._C._cuda_getDevice()),
        ("_cuda_getCurrentRawStream(0)", (lambda: raw(0)) if raw else (lambda: None)),
        ("(dtype, shape, device) x 2", lambda: (ty.dtype, ty.shape, ty.device,
                                                tx.dtype, tx.shape, tx.device)),
        ("is_contiguous() x 2", lambda: ty.is_contiguous() and tx.is_contiguous()),
        ("data_ptr() x 2", lambda: (ty.data_ptr(), tx.data_ptr())),
        ("_profiling()", _single._profiling),
        ("split lists ==", lambda: counts == list(counts)),
        ("lambda: None", lambda: None),
    ]
    for name, f in steps:
        k = 20000
        t0 = pc()
        for _ in range(k):
            f()
        print("  %-30s %7.0f ns" % (name, (pc() - t0) / k), file=sys.stderr)


# ------------------------------------------------------------------ driver
def run_ranks(args, n):
    import rmacoll
    uid = rmacoll.get_unique_id().hex()
    procs = []
    for r in range(n):
        env = dict(os.environ, BENCH_OVERHEAD_RANK=str(r), BENCH_OVERHEAD_NRANKS=str(n),
                   BENCH_OVERHEAD_UID=uid, RMACOLL_NODE_ID="vnode-0")
        env.setdefault("FI_TCP_IFACE", "lo")
        env.setdefault("FI_SOCKETS_IFACE", "lo")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"]
                                      + sys.argv[1:], env=env, stdout=subprocess.PIPE,
                                      text=True))
    reports = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit("a rank failed (exit %d)" % p.returncode)
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def main():
    args = parse_args()
    if args.worker:
        return worker(args)
    if importlib.util.find_spec("numpy") is None:  # the workers' arrays
        print("numpy is not importable from %s; nothing to measure" % sys.executable)
        return 77  # CTest: skipped
    out = []
    print("# rmacoll Python per-call cost over C; %s, float32, ranks as processes "
          "on one node; %d rounds x %d calls per path; us per call, median of the "
          "slowest rank" % ("host memory" if args.device == "cpu" else
                            "CUDA tensors (enqueue timed, stream synchronised untimed)",
                            args.rounds, args.iters))
    print("%6s %9s %-11s %10s %10s %10s %10s" % ("nranks", "size(B)", "path", "median_us",
                                                 "p10_us", "over_c_med", "over_c_p10"))
    for n in [int(v) for v in args.nprocs.split(",")]:
        reports = run_ranks(args, n)
        keyed = {}
        for rep in reports:
            for row in rep["rows"]:
                k = (row["size"], row["path"])
                if k not in keyed or row["median_us"] > keyed[k]["median_us"]:
                    keyed[k] = row
        for (size, path), row in keyed.items():
            c = keyed[(size, "c")]
            row["over_c_us"] = row["median_us"] - c["median_us"]
            row["over_c_p10_us"] = row["p10_us"] - c["p10_us"]
            out.append(row)
            print("%6d %9d %-11s %10.2f %10.2f %10s %10s" % (
                n, size, path, row["median_us"], row["p10_us"],
                "" if path == "c" else "%+.2f" % row["over_c_us"],
                "" if path == "c" else "%+.2f" % row["over_c_p10_us"]))
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
