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

Ranks are threads of one process with --device cuda (the default there:
one GPU holds every rank, each on a stream of its own, no time-slicing;
the device-count kernel refuses two processes on one GPU, and
all_to_all_single then falls back to host split sizes), processes with
--device cpu (--ranks-as chooses); Python's own work of the ranks runs
one thread at a time (the GIL; the library's calls and CUDA's release
it). --nodes 2 puts them on two virtual nodes (node keys).
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
    p.add_argument("--ranks-as", choices=("threads", "processes"), default=None,
                   help="threads of one process (default with cuda: one GPU holds "
                        "them all, and the device-count kernel refuses two processes "
                        "on one GPU) or processes (default with cpu)")
    p.add_argument("--modes", default=",".join(MODES), help="comma separated: " + ", ".join(MODES))
    p.add_argument("--steps", type=int, default=50, help="timed steps per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--check", type=int, default=3, help="steps checked one by one first")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=int, default=300, help="seconds per rank set")
    p.add_argument("--json", default=None, help="write the rows here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.ranks_as is None:
        args.ranks_as = "threads" if args.device == "cuda" else "processes"
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

    def __init__(self, torch, rmacoll, comm, rank, n, rows, args, dev, barrier):
        self.t, self.rc, self.comm, self.rank, self.n = torch, rmacoll, comm, rank, n
        self.barrier = barrier  # ranks as threads: threading.Barrier, else None
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

    def sync(self):
        """This rank's stream done (never the whole device: with ranks as
        threads the peers' calls may be in flight and wait for this rank)."""
        if self.dev != "cpu":
            self.t.cuda.current_stream().synchronize()

    def meet(self):
        self.sync()
        if self.barrier is not None:
            self.barrier.wait()

    def capture(self):
        """The device step captured on this rank's stream (thread-local mode:
        the other ranks' threads capture at the same time), after one
        uncaptured run of it."""
        t = self.t
        self.meet()
        self.device_step(self.isz_g)
        self.meet()
        self.graph = t.cuda.CUDAGraph()
        try:
            self.graph.capture_begin(capture_error_mode="thread_local")
        except TypeError:  # torch < 2.0: no capture_error_mode
            self.graph.capture_begin()
        try:
            self.device_step(self.isz_g)
        finally:
            self.graph.capture_end()
        self.meet()

    def graph_step(self, isz_dev):
        self.isz_g.copy_(isz_dev)
        self.graph.replay()

    def check(self, mode, isz_dev):
        """None, or what is wrong with the step just run."""
        t = self.t
        self.sync()
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


def rank_body(args, rank, n, nodes, uids, barrier):
    """One rank's rows (a process, or a thread with barrier given)."""
    import torch

    import rmacoll

    dev = "cpu"
    if args.device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        # a stream of its own: capture needs one, and ranks as threads must
        # not share one (a rank's kernel waits for its peers' calls)
        torch.cuda.set_stream(torch.cuda.Stream())
        dev = "cuda"
    modes = args.modes.split(",") if args.device == "cuda" else ["host"]
    node_key = "bench-moe-vnode-%d" % (rank * nodes // n)
    # a communicator per mode: the stream-triggered form across nodes takes
    # a communicator for itself (one stream, no other call: docs/gpu.md)
    comms = {m: rmacoll.Communicator(rank, n, rmacoll.UniqueId.from_hex(uids[m]),
                                     node_key=node_key) for m in modes}
    esize = torch.tensor([], dtype=getattr(torch, args.dtype)).element_size()
    rows_out = []
    for size in [parse_size(s) for s in args.sizes.split(",")]:
        rows = max(1, size // (args.hidden * esize))
        nstep = max(args.steps, args.check)
        mats = count_matrices(torch, n, rows, nstep, args.seed + size)
        isz_all = [mats[s, rank].to(dev) for s in range(nstep)]
        for mode in modes:
            layer = Layer(torch, rmacoll, comms[mode], rank, n, rows, args, dev, barrier)
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
                    layer.meet()
                    t0 = time.perf_counter_ns()
                    for s in range(args.steps):
                        step(isz_all[s])
                    layer.sync()
                    times.append((time.perf_counter_ns() - t0) / args.steps / 1000.0)
                    problem = layer.check(mode, isz_all[args.steps - 1])
                    if problem:
                        break
            except Exception as e:  # recorded: the row says what failed, and where
                where = "; ".join("%s:%d %s" % (os.path.basename(f.filename), f.lineno, f.name)
                                  for f in traceback.extract_tb(e.__traceback__)[-4:])
                problem = "%s: %s [%s]" % (type(e).__name__, str(e).splitlines()[0][:200], where)
            rows_out.append({"nranks": n, "size": size, "rows": rows, "mode": mode,
                             "us_per_step": statistics.median(times) if times else None,
                             "problem": problem})
            layer.graph = None
    for c in comms.values():
        c.close()
    return rows_out


def worker(args):
    n = int(os.environ["BENCH_MOE_NRANKS"])
    nodes = int(os.environ["BENCH_MOE_NODES"])
    uids = dict(zip(MODES, os.environ["BENCH_MOE_UIDS"].split(",")))
    if args.ranks_as == "processes":
        rank = int(os.environ["BENCH_MOE_RANK"])
        reports = [{"rank": rank, "rows": rank_body(args, rank, n, nodes, uids, None)}]
    else:
        import threading
        barrier = threading.Barrier(n, timeout=max(30, args.timeout - 30))
        reports = [None] * n

        def body(r):
            try:
                reports[r] = {"rank": r, "rows": rank_body(args, r, n, nodes, uids, barrier)}
            except Exception as e:
                barrier.abort()
                reports[r] = {"rank": r, "rows": [], "error": "%s: %s" % (type(e).__name__, e)}
        threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    print(json.dumps({"reports": reports}))
    bad = any(rep.get("error") or any(r["problem"] for r in rep["rows"]) for rep in reports)
    return 1 if bad else 0


def run(args, n, nodes):
    """The rank set's reports and worst exit code."""
    import rmacoll
    uids = ",".join(rmacoll.get_unique_id().hex() for _ in MODES)
    env = dict(os.environ, BENCH_MOE_NRANKS=str(n), BENCH_MOE_NODES=str(nodes),
               BENCH_MOE_UIDS=uids)
    env.setdefault("FI_TCP_IFACE", "lo")
    if args.device == "cuda":
        env.setdefault("RMACOLL_TRANSPORTS_INTRA_NODE", "nvlink_kernel")
        # ranks as threads: each stream on a hardware queue of its own (a
        # stream wait blocks the streams that share its queue: with the
        # default 8, 4 ranks across 2 nodes hung on 2026-12-07)
        env.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker"] + sys.argv[1:]
    if args.ranks_as == "processes":
        procs = [subprocess.Popen(cmd, env=dict(env, BENCH_MOE_RANK=str(r)),
                                  stdout=subprocess.PIPE, text=True) for r in range(n)]
    else:
        procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)]
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
            reports.extend(json.loads(lines[-1])["reports"])
    if len(reports) != n:
        raise SystemExit("%d ranks on %d nodes: a rank failed (exit %d)" % (n, nodes, rc))
    for rep in reports:
        if rep.get("error"):
            print("rank %d failed: %s" % (rep["rank"], rep["error"]))
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
          "%d steps x %d rounds; us per step, slowest rank; ranks as %s" % (
              args.device, args.dtype, args.hidden, args.steps, args.rounds, args.ranks_as))
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
