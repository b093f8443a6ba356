#!/usr/bin/env python3
"""Per-call time of rmacoll.all_to_all_single against
torch.distributed.all_to_all_single on the same tensors.

Every rank sends SIZE bytes per call in total (1-d tensors of --dtype),
split uniformly or Zipf-skewed (MoE-like) over the ranks; receive splits
follow from the same matrix on every rank. Each backend runs --warmup
calls, then --iters calls back to back between two host clocks (CUDA:
torch.cuda.synchronize() before the first and after the last; a gloo
barrier before each timed loop). A row gives the slowest rank's time per
call (the collective's), and algbw = SIZE / time. Once per size the
outputs of rmacoll and the first baseline are compared byte for byte.

Backends: rmacoll (the tensors of --device), gloo (the same tensors when
gloo takes them, else CPU copies, said in the row), nccl (CUDA, only when
every rank has its own GPU: one GPU cannot hold two NCCL ranks).

Run:
    python3 python/bench/bench_all_to_all.py --nprocs 2 --device cuda
    python3 python/bench/bench_all_to_all.py --nprocs 2 --device cpu --dist zipf:1.2
    torchrun --nproc-per-node 2 python/bench/bench_all_to_all.py --device cuda --baselines gloo,nccl
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.dirname(HERE))  # python/: the rmacoll package of this tree


def parse_size(text):
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1] in mult:
        return int(float(text[:-1]) * mult[text[-1]])
    return int(text)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", type=int, default=0, help="spawn this many ranks here")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--sizes", default="4K,64K,1M,16M,128M",
                   help="bytes each rank sends per call, comma separated")
    p.add_argument("--dist", default="uniform", help="uniform | zipf:A")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--baselines", default="gloo,nccl",
                   help="comma separated: gloo, nccl (nccl skipped without a GPU per rank)")
    p.add_argument("--nodes", type=int, default=1,
                   help="with --nprocs: virtual nodes (RMACOLL_NODE_ID), ranks in blocks")
    p.add_argument("--json", default=None, help="write the rows here (rank 0)")
    return p.parse_args()


def spawn(args):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    procs = []
    for r in range(args.nprocs):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.nprocs), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.setdefault("FI_TCP_IFACE", "lo")
        env.setdefault("NCCL_NVLS_ENABLE", "0")
        if args.nodes > 1:
            env["RMACOLL_NODE_ID"] = "vnode-%d" % (r * args.nodes // args.nprocs)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] +
                                      sys.argv[1:] + ["--nprocs", "0"], env=env))
    return max(p.wait() for p in procs)


def split_matrix(n, elems, dist_name):
    """[n][n] elements from i to j; row i sums to elems."""
    if dist_name == "uniform":
        w = [[1.0] * n for _ in range(n)]
    elif dist_name.startswith("zipf:"):
        a = float(dist_name[5:])
        # rank i's k-th most loaded destination is (i + k) % n
        w = [[0.0] * n for _ in range(n)]
        for i in range(n):
            for k in range(n):
                w[i][(i + k) % n] = 1.0 / (k + 1) ** a
    else:
        raise SystemExit("--dist: uniform or zipf:A, not %r" % dist_name)
    m = []
    for i in range(n):
        tot = sum(w[i])
        row = [int(elems * x / tot) for x in w[i]]
        row[i] += elems - sum(row)
        m.append(row)
    return m


def main_rank(args):
    import torch
    import torch.distributed as dist

    import rmacoll

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    cuda = args.device == "cuda"
    if cuda:
        ndev = torch.cuda.device_count()
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % ndev)
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    dtype = getattr(torch, args.dtype)
    esize = torch.empty((), dtype=dtype).element_size()
    baselines = [b for b in args.baselines.split(",") if b]
    nccl_group = None
    if "nccl" in baselines:
        if cuda and torch.cuda.device_count() >= world and dist.is_nccl_available():
            nccl_group = dist.new_group(backend="nccl")
        else:
            if rank == 0:
                print("# nccl skipped: %s" % ("CPU tensors" if not cuda else
                                              "%d GPU(s) for %d ranks" %
                                              (torch.cuda.device_count(), world)))
            baselines.remove("nccl")

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def timed(fn):
        for _ in range(args.warmup):
            fn()
        sync()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            fn()
        sync()
        return (time.perf_counter() - t0) / args.iters

    rows = []
    for size in [parse_size(s) for s in args.sizes.split(",")]:
        elems = max(size // esize, world)
        m = split_matrix(world, elems, args.dist)
        isz = m[rank]
        osz = [m[i][rank] for i in range(world)]
        g = torch.Generator().manual_seed(rank)
        src = torch.randint(-100, 100, (elems,), generator=g).to(dtype)
        inp = src.to(device)
        out = torch.empty(sum(osz), dtype=dtype, device=device)
        result = {}
        t = timed(lambda: rmacoll.all_to_all_single(out, inp, osz, isz))
        result["rmacoll"] = (t, args.device)
        got = out.cpu()
        checked = None
        for b in baselines:
            if b == "gloo":
                # as bytes: gloo lacks some dtypes (bfloat16 in older torch); the
                # same bytes move. CUDA tensors when gloo takes them, else CPU copies
                bi, bo = [x * esize for x in isz], [x * esize for x in osz]
                gin, gout, where = inp.view(torch.uint8), torch.empty_like(out), args.device
                try:
                    dist.all_to_all_single(gout.view(torch.uint8), gin, bo, bi)
                except RuntimeError:
                    gin, gout, where = (inp.cpu().view(torch.uint8),
                                        torch.empty(out.shape, dtype=dtype), "cpu copies")
                gv = gout.view(torch.uint8)
                t = timed(lambda: dist.all_to_all_single(gv, gin, bo, bi))
            else:
                gout = torch.empty_like(out)
                where = "cuda"
                t = timed(lambda: dist.all_to_all_single(gout, inp, osz, isz, group=nccl_group))
            result[b] = (t, where)
            if checked is None:
                checked = torch.equal(gout.cpu().view(torch.uint8) if gout.numel() else gout.cpu(),
                                      got.view(torch.uint8) if got.numel() else got)
        every = [None] * world
        dist.all_gather_object(every, {k: v[0] for k, v in result.items()})
        all_ok = [None] * world
        dist.all_gather_object(all_ok, checked)
        if rank == 0:
            for k, (t, where) in result.items():
                tmax = max(e[k] for e in every)
                rows.append({"bytes": size, "dist": args.dist, "backend": k, "memory": where,
                             "us_per_call": tmax * 1e6, "algbw_GBps": size / tmax / 1e9,
                             "same_bytes": all(x is not False for x in all_ok)})
                print("%10d  %-10s %-8s %-11s %12.1f us  %8.3f GB/s  %s" % (
                    size, args.dist, k, where, tmax * 1e6, size / tmax / 1e9,
                    "" if k != "rmacoll" else ("checked" if all(all_ok) else
                                               ("NOT CHECKED" if None in all_ok else
                                                "WRONG DATA"))), flush=True)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"world": world, "device": args.device, "dtype": args.dtype,
                       "iters": args.iters, "rows": rows}, f, indent=1)
    bad = rank == 0 and any(r["same_bytes"] is False for r in rows)
    rmacoll.destroy_group_communicators()
    dist.destroy_process_group()
    return 2 if bad else 0


def main():
    args = parse_args()
    if args.nprocs > 0:
        print("# %d ranks on %d node(s), %s tensors of %s, %s splits, %d iterations after %d "
              "warm-up" % (args.nprocs, args.nodes, args.device, args.dtype, args.dist,
                           args.iters, args.warmup),
              flush=True)
        print("#    bytes  dist       backend  memory      time per call    algbw", flush=True)
        return spawn(args)
    return main_rank(args)


if __name__ == "__main__":
    sys.exit(main())
