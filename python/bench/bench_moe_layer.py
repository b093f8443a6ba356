#!/usr/bin/env python3
"""Per-step time of an MoE layer's exchanges with host-synchronised split
sizes, with device split sizes, and with device split sizes replayed in a
CUDA graph (issue 31 item 6).

Each rank sends R rows of --hidden elements per step (R = SIZE / row bytes,
SIZE the bytes each rank dispatches per step). The split sizes change every
step and every rank's receive total is R too: step s's count matrix is the
sum of R random permutation matrices (row r, column j: how many of the R
permutations send r to j), drawn from one seed every rank shares, made on
the host before timing and copied to the device (so no mode pays for
making them, and the capacity of every receive buffer is exactly R rows).
One step is the layer's communication and a stand-in expert:

  host    the MoE layer as most stacks write it today: the split sizes
          (CUDA int64) go to every rank with an equal-split exchange, both
          come to the host (.tolist(): a device-to-host synchronisation),
          dispatch with host split sizes, expert y = 2 x + 1 on the received
          rows, combine with the sizes swapped
  device  the split sizes stay on the device (issue 31): dispatch with
          input_split_sizes a CUDA tensor, out_splits= and status= filled
          on the stream, the expert on the whole receive buffer, combine
          with the received sizes given; no host synchronisation
  graph   the device step captured once in a CUDA graph (torch.cuda.graph)
          and replayed, the step's split sizes copied into the graph's
          input tensor on the stream before each replay

Every step's combine output must equal 2 x + 1 of the rows the rank sent
(values are small integers, exact in every dtype here); the first --check
steps of every mode and the last timed step are checked, and the status
words of the device modes must be 0. Timed: --steps steps back to back on
the current stream, one synchronisation at the end; a row gives the
slowest rank's microseconds per step (median over --rounds rounds).

Ranks are processes on this host (one GPU: give several ranks MPS, or they
time-slice; --nodes 2 puts them on two virtual nodes, RMACOLL_NODE_ID).
Device split sizes need the nvlink_kernel intra-node transport (set unless
RMACOLL_TRANSPORTS_INTRA_NODE is); across nodes they take the host-split
path unless RMACOLL_DEVICE_COUNTS_ACROSS_NODES=1 (docs/gpu.md), and the
row says which path ran. --device cpu runs the host mode only (CPU
tensors), which is how CI keeps this script working.

    python3 python/bench/bench_moe_layer.py --nprocs 2,4 --nodes 1,2 \\
        --sizes 8K,64K,1M,16M --device cuda
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # python/: the rmacoll package of this tree

from bench_all_to_all import parse_size  # noqa: E402 - one size parser for the benches

MODES = ("host", "device", "graph")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", default="2,4", help="rank counts, comma separated")
    p.add_argument("--nodes", default="1", help="virtual node counts, comma separated")
    p.add_argument("--sizes", default="8K,64K,1M,16M",
                   help="bytes each rank dispatches per step, comma separated")
    p.add_argument("--hidden", type=int, default=1024, help="elements per row")
    p.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    p.add_argument("--modes", default=",".join(MODES), help="comma separated: " + ", ".join(MODES))
    p.add_argument("--steps", type=int, default=50, help="timed steps per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--check", type=int, default=3, help="steps checked one by one first")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=int, default=300, help="seconds per rank set")
    p.add_argument("--json", default=None, help="write the rows here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    bad = [m for m in args.modes.split(",") if m not in MODES]
    if bad:
        p.error("--modes: unknown %s" % ", ".join(bad))
    return args


def count_matrices(torch, n, rows, steps, seed):
    """[steps, n, n] int64: step s's matrix, row r = the rows rank r sends
    to each rank; every row and every column sums to `rows`."""
    g = torch.Generator().manual_seed(seed)
    out = torch.empty((steps, n, n), dtype=torch.int64)
    for s in range(steps):
        perms = torch.argsort(torch.rand(rows, n, generator=g), dim=1)  # [rows, n]
        m = torch.zeros(n, n, dtype=torch.int64)
        # permutation k sends rank r to perms[k, r]
        m.index_put_((torch.arange(n).repeat(rows), perms.reshape(-1)),
                     torch.ones(rows * n, dtype=torch.int64), accumulate=True)
        out[s] = m
    return out


class Layer:
    """One rank's buffers and the three ways to run a step."""

    def __init__(self, torch, rmacoll, comm, rank, n, rows, args, dev):
        self.t, self.rc, self.comm, self.rank, self.n = torch, rmacoll, comm, rank, n
        self.rows = rows
        dt = getattr(torch, args.dtype)
        h = args.hidden
        # values (rank, row, column) mod 100: 2 x + 1 <= 199, exact in bf16
        base = (torch.arange(rows * h, dtype=torch.int64).view(rows, h) + 37 * rank) % 100
        self.send = base.to(dev, dt)
        self.want = (2 * base + 1).to(dev, dt)
        self.recv = torch.empty((rows, h), dtype=dt, device=dev)
        self.y = torch.empty_like(self.recv)
        self.back = torch.empty_like(self.send)
        self.dev = dev
        self.rcnt = torch.empty(n, dtype=torch.int64, device=dev)
        self.osz = torch.empty(n, dtype=torch.int64, device=dev)
        self.status = torch.zeros(2, dtype=torch.int32, device=dev)
        self.isz_g = torch.zeros(n, dtype=torch.int64, device=dev)
        self.graph = None

    def host_step(self, isz_dev):
        t, a2a = self.t, self.rc.all_to_all_single
        a2a(self.rcnt, isz_dev, comm=self.comm)            # everyone's split sizes
        isz, osz = isz_dev.tolist(), self.rcnt.tolist()    # device -> host, synchronises
        ns, nr = sum(isz), sum(osz)
        a2a(self.recv[:nr], self.send[:ns], osz, isz, comm=self.comm)
        t.add(t.mul(self.recv[:nr], 2, out=self.y[:nr]), 1, out=self.y[:nr])
        a2a(self.back[:ns], self.y[:nr], isz, osz, comm=self.comm)

    def device_step(self, isz_dev):
        t, a2a = self.t, self.rc.all_to_all_single
        a2a(self.recv, self.send, None, isz_dev, comm=self.comm, out_splits=self.osz,
            status=self.status[0:1])
        t.add(t.mul(self.recv, 2, out=self.y), 1, out=self.y)
        a2a(self.back, self.y, isz_dev, self.osz, comm=self.comm, status=self.status[1:2])

    def capture(self):
        t = self.t
        side = t.cuda.Stream()
        side.wait_stream(t.cuda.current_stream())
        with t.cuda.stream(side):           # warm the path outside the capture
            self.device_step(self.isz_g)
        t.cuda.current_stream().wait_stream(side)
        t.cuda.synchronize()
        self.graph = t.cuda.CUDAGraph()
        with t.cuda.graph(self.graph, stream=side):  # the warm-up's stream: no wait_stream
            self.device_step(self.isz_g)
        t.cuda.synchronize()

    def graph_step(self, isz_dev):
        self.isz_g.copy_(isz_dev)
        self.graph.replay()

    def check(self, mode, isz_dev):
        """None, or what is wrong with the step just run."""
        t = self.t
        if self.dev != "cpu":
            t.cuda.synchronize()
        ns = int(isz_dev.sum())
        if mode != "host":
            st = self.status.tolist()
            if st != [0, 0]:
                return "status words %s" % st
            self.rc.device_counts_check(comm=self.comm)
        if not t.equal(self.back[:ns], self.want[:ns]):
            bad = (self.back[:ns] != self.want[:ns]).nonzero()
            return "%d wrong elements in the combine output, first at %s" % (
                bad.shape[0], bad[0].tolist())
        return None


def worker(args):
    import torch

    import rmacoll

    rank = int(os.environ["BENCH_MOE_RANK"])
    n = int(os.environ["BENCH_MOE_NRANKS"])
    dev = "cpu"
    if args.device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        dev = "cuda"
    modes = args.modes.split(",") if args.device == "cuda" else ["host"]
    # a communicator per mode: the stream-triggered form across nodes takes
    # a communicator for itself (one stream, no other call: docs/gpu.md)
    uids = dict(zip(MODES, os.environ["BENCH_MOE_UIDS"].split(",")))
    comms = {m: rmacoll.Communicator(rank, n, rmacoll.UniqueId.from_hex(uids[m]))
             for m in modes}
    esize = torch.tensor([], dtype=getattr(torch, args.dtype)).element_size()
    rows_out = []
    for size in [parse_size(s) for s in args.sizes.split(",")]:
        rows = max(1, size // (args.hidden * esize))
        nstep = max(args.steps, args.check)
        mats = count_matrices(torch, n, rows, nstep, args.seed + size)
        isz_all = [mats[s, rank].to(dev) for s in range(nstep)]
        for mode in modes:
            layer = Layer(torch, rmacoll, comms[mode], rank, n, rows, args, dev)
            step = getattr(layer, mode + "_step")
            problem, times = None, []
            try:
                if mode == "graph":
                    layer.isz_g.copy_(isz_all[0])
                    layer.capture()
                for s in range(args.check):
                    layer.back.zero_()
                    step(isz_all[s])
                    problem = layer.check(mode, isz_all[s])
                    if problem:
                        break
                for _ in range(args.rounds if problem is None else 0):
                    if dev != "cpu":
                        torch.cuda.synchronize()
                    t0 = time.perf_counter_ns()
                    for s in range(args.steps):
                        step(isz_all[s])
                    if dev != "cpu":
                        torch.cuda.synchronize()
                    times.append((time.perf_counter_ns() - t0) / args.steps / 1000.0)
                    problem = layer.check(mode, isz_all[args.steps - 1])
                    if problem:
                        break
            except Exception as e:  # recorded: the row says what failed, and where
                where = "; ".join("%s:%d %s" % (os.path.basename(f.filename), f.lineno, f.name)
                                  for f in traceback.extract_tb(e.__traceback__)[-4:])
                problem = "%s: %s [%s]" % (type(e).__name__, str(e).splitlines()[0][:200], where)
                if dev != "cpu":
                    # a failed capture can leave its stream current
                    torch.cuda.set_stream(torch.cuda.default_stream())
            rows_out.append({"nranks": n, "size": size, "rows": rows, "mode": mode,
                             "us_per_step": statistics.median(times) if times else None,
                             "problem": problem})
            layer.graph = None
    for c in comms.values():
        c.close()
    print(json.dumps({"rank": rank, "rows": rows_out}))
    return 0 if all(r["problem"] is None for r in rows_out) else 1


def run(args, n, nodes):
    import rmacoll
    uids = ",".join(rmacoll.get_unique_id().hex() for _ in MODES)
    procs = []
    for r in range(n):
        env = dict(os.environ, BENCH_MOE_RANK=str(r), BENCH_MOE_NRANKS=str(n), BENCH_MOE_UIDS=uids,
                   RMACOLL_NODE_ID="vnode-%d" % (r * nodes // n))
        env.setdefault("FI_TCP_IFACE", "lo")
        if args.device == "cuda":
            env.setdefault("RMACOLL_TRANSPORTS_INTRA_NODE", "nvlink_kernel")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"]
                                      + sys.argv[1:], env=env, stdout=subprocess.PIPE, text=True))
    reports, rc = [], 0
    for p in procs:
        try:
            out, _ = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise SystemExit("%d ranks on %d nodes: timed out after %d s" % (n, nodes, args.timeout))
        rc = max(rc, p.returncode)
        lines = out.strip().splitlines()
        if lines:
            reports.append(json.loads(lines[-1]))
    if len(reports) != n:
        raise SystemExit("%d ranks on %d nodes: a rank failed (exit %d)" % (n, nodes, rc))
    return reports, rc


def main():
    args = parse_args()
    if args.worker:
        return worker(args)
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        print("torch is not importable from %s; nothing to measure" % sys.executable)
        return 77  # CTest: skipped
    print("# MoE layer exchanges per step (dispatch, expert 2x+1, combine), %s, %s, hidden %d, "
          "%d steps x %d rounds; us per step, slowest rank; ranks as processes%s" % (
              args.device, args.dtype, args.hidden, args.steps, args.rounds,
              "" if args.device == "cpu" else " on one GPU each in turn (MPS: %s)" % (
                  "on" if os.environ.get("CUDA_MPS_PIPE_DIRECTORY") else "unknown")))
    print("# RMACOLL_DEVICE_COUNTS_ACROSS_NODES=%s" %
          os.environ.get("RMACOLL_DEVICE_COUNTS_ACROSS_NODES", "(unset)"))
    print("%6s %5s %9s %6s %-7s %12s  %s" % ("nranks", "nodes", "size(B)", "rows", "mode",
                                              "us_per_step", "check"))
    out, worst = [], 0
    for nodes in [int(v) for v in args.nodes.split(",")]:
        for n in [int(v) for v in args.nprocs.split(",")]:
            if n < nodes:
                continue
            reports, rc = run(args, n, nodes)
            worst = max(worst, rc)
            keyed = {}
            for rep in reports:
                for row in rep["rows"]:
                    k = (row["size"], row["mode"])
                    old = keyed.get(k)
                    if old is None or row["problem"] or (
                            row["us_per_step"] or 0) > (old["us_per_step"] or 0):
                        if old is not None and old["problem"] and not row["problem"]:
                            continue
                        keyed[k] = dict(row, nodes=nodes)
            for (size, mode), row in keyed.items():
                out.append(row)
                us = row["us_per_step"]
                print("%6d %5d %9d %6d %-7s %12s  %s" % (
                    n, nodes, size, row["rows"], mode, "-" if us is None else "%.1f" % us,
                    row["problem"] or "exact"))
            sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main())
