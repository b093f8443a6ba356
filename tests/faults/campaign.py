#!/usr/bin/env python3
"""Fault campaign (issue 33 item 5): N runs of each fault kind at a random
point of a random call, over libfabric tcp;ofi_rxm, net and shm between
virtual nodes,
on host memory; per run it records the outcome on every rank and prints
the table.

  kill       the victim's process is killed (SIGKILL)
  stop       the victim's process is stopped (SIGSTOP); resumed once every
             survivor's call has returned
  close      every TCP socket of the victim is shut down (bootstrap and
             network connections); the process goes on (tcp and net only)
  transport  the victim's network fails (RMACOLL_TEST_FAULT=net:K, K
             random: the K-th hand-over of puts to the network)
  abort      the victim calls rmacoll_comm_abort from a second thread
  stall      the victim's own call into its network transport does not
             return (RMACOLL_TEST_FAULT=stall:K: after the K-th hand-over of
             puts its proxy thread stays inside its next heartbeat post,
             holding the transport's lock: a provider call that spins or
             blocks); the victim itself must then blame no other rank
             (checked with the survivors'), and no detection time is taken
             (the stall's start is inside the library)

Per run: every survivor must return an error; the rank it blames (parsed
from its message: "silent rank R", "rank R sent no heartbeat", "rank R
disconnected", "(dead rank R)", "rank R failed first", "peer R") must be the
victim, or none ("cannot tell"); the time from the fault to the survivor's
error; no byte outside the receive blocks changed (guards and gaps, every
rank); /dev/shm files left with the run's RMACOLL_SHM_TAG; file descriptors
and threads each rank still holds after rmacoll_comm_destroy beyond what it
held before; a run that does not end in time is a hang.

  python3 tests/faults/campaign.py --runs 200 [--kinds kill,stop,...]
      [--topologies 2x2,4x1] [--providers tcp,net,shm] [--json FILE]
Exit status 0 when every aim holds (100% errors, 0 wrong blames, 0 bytes
outside, 0 files / fds / threads left, no hang; with --max-detect-s S,
every detection within S seconds), 1 otherwise. PYTHONPATH must reach the
rmacoll package and RMACOLL_LIBRARY (or the package's search) the library.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "fault_worker.py")
KINDS = ("kill", "stop", "close", "transport", "abort", "stall")
PROVIDERS = {"tcp": "tcp;ofi_rxm", "net": "net", "shm": "shm"}

_BLAME = [re.compile(p) for p in (
    r"silent rank (\d+)", r"rank (\d+) sent no heartbeat", r"rank (\d+) disconnected",
    r"\(dead rank (\d+)\)",
    r"rank (\d+) failed first \(RMACOLL_ERR_(?!TRANSPORT)", r"call failed on rank (\d+)",
    r"network transport failed \(peer (\d+)")]


def blamed(msg):
    """The rank a survivor's message names as the failed one, or None
    (cannot tell). "rank A failed first (RMACOLL_ERR_TRANSPORT)" names no one:
    a failed connection has two ends, and A may be either."""
    for p in _BLAME:
        m = p.search(msg)
        if m is not None and int(m.group(1)) >= 0:
            return int(m.group(1))
    return None


def topology(spec):
    nodes, per = (int(x) for x in spec.split("x"))
    return [node for node in range(nodes) for _ in range(per)]


# A hung rank whose every stuck thread spins on a lock inside libfabric: its
# shm provider (1.17) keeps each region's lock in shared memory, and a peer
# killed while holding it leaves every later fi_writemsg / fi_cq_read on that
# region spinning for ever (seen 2 in 300 kill runs, shm 4x1); no caller can
# end that wait. Counted apart ("in libfabric's lock").
_PROVIDER_LOCK = re.compile(r"__pthread_spin_lock \(\)[^\n]*\n#1 [^\n]*libfabric")


def provider_lock_hang(rec):
    """The run hung, over shm, and every hung rank spins in libfabric's lock."""
    stacks = rec.get("hang_stacks")
    return (rec["provider"] == "shm" and bool(stacks)
            and all(_PROVIDER_LOCK.search(st) for st in stacks.values()))


def where(pid):
    """Every thread's stack of a process that did not end in time (gdb when
    installed, else the kernel's view of each thread), for the hang's record."""
    if shutil.which("gdb"):
        try:
            return subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex",
                                   "thread apply all bt 30"], capture_output=True, text=True,
                                  timeout=60).stdout[-20000:]
        except (OSError, subprocess.TimeoutExpired) as e:
            return "gdb failed: %s" % e
    out = []
    for t in sorted(os.listdir("/proc/%d/task" % pid)):
        try:
            with open("/proc/%d/task/%s/wchan" % (pid, t)) as f:
                out.append("thread %s: %s" % (t, f.read()))
        except OSError:
            pass
    return "\n".join(out)


def one_run(kind, node_of, provider, seed, args):
    """Runs one fault; returns the per-run record."""
    import rmacoll

    rng = random.Random(seed)
    n = len(node_of)
    victim = rng.randrange(n)
    at = rng.uniform(0.05, 0.6)
    if args.victim is not None:
        victim = args.victim % n
    tag = "fc%d_%d" % (os.getpid(), seed)
    fdir = tempfile.mkdtemp(prefix="rmacoll-fault-")
    base = dict(os.environ)
    base.update({
        "RMACOLL_TEST_UID": rmacoll.get_unique_id().hex(),
        "RMACOLL_TEST_NRANKS": str(n), "FAULT_KIND": kind, "FAULT_VICTIM": str(victim),
        "FAULT_AT": "%.3f" % at, "FAULT_DIR": fdir, "FAULT_SECONDS": str(args.seconds),
        "FAULT_BYTES": str(args.bytes), "RMACOLL_SHM_TAG": tag,
        "RMACOLL_OFI_PROVIDER": PROVIDERS[provider], "FI_TCP_IFACE": "lo",
        "RMACOLL_TIMEOUT_MS": str(args.timeout_ms), "RMACOLL_LOG_LEVEL": "error"})
    procs = []
    for r in range(n):
        env = dict(base, RMACOLL_TEST_RANK=str(r), RMACOLL_NODE_ID="vnode-%d" % node_of[r])
        if kind == "transport" and r == victim:
            env["RMACOLL_TEST_FAULT"] = "net:%d" % rng.randrange(5, 60)
        if kind == "stall" and r == victim:
            env["RMACOLL_TEST_FAULT"] = "stall:%d" % rng.randrange(5, 60)
        procs.append(subprocess.Popen([sys.executable, WORKER], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    deadline = time.monotonic() + args.seconds + 2 * args.timeout_ms / 1000 + 30
    outs, hang, stacks = [None] * n, False, {}
    for r, p in enumerate(procs):
        if r == victim:
            continue
        try:
            o, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
            outs[r] = o
        except subprocess.TimeoutExpired:
            hang = True
            stacks[r] = where(p.pid)
            sys.stderr.write("hang: rank %d (pid %d), its threads:\n%s\n" % (r, p.pid, stacks[r]))
    if kind == "stop":
        try:
            os.kill(procs[victim].pid, signal.SIGCONT)
        except OSError:
            pass
    try:
        o, _ = procs[victim].communicate(timeout=max(1, deadline - time.monotonic()) + 10)
        outs[victim] = o
    except subprocess.TimeoutExpired:
        hang = True
        stacks[victim] = where(procs[victim].pid)
        sys.stderr.write("hang: victim rank %d (pid %d), its threads:\n%s\n"
                         % (victim, procs[victim].pid, stacks[victim]))
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    t_fault = None
    try:
        with open(os.path.join(fdir, "fault")) as f:
            t_fault = float(f.read())
    except OSError:
        pass
    shutil.rmtree(fdir, ignore_errors=True)
    reps = []
    for o in outs:
        try:
            reps.append(json.loads(o.strip().splitlines()[-1]) if o else None)
        except (ValueError, IndexError):
            reps.append(None)
    if kind == "transport" and reps[victim] and reps[victim]["error"]:
        t_fault = reps[victim]["error"]["t"]
    left = [f for f in os.listdir("/dev/shm") if tag in f]
    # a killed rank cannot remove its own files; the survivors' destroy
    # removes its libfabric region when it has finished exiting, else the
    # next rmacoll_comm_create on the host does (the stale-region sweep):
    # counted apart, not as a leak of the survivors
    vpid = "-%d-" % procs[victim].pid
    victim_left = [f for f in left if kind == "kill" and vpid in f]
    left = [f for f in left if f not in victim_left]
    for f in left:
        try:
            os.unlink(os.path.join("/dev/shm", f))
        except OSError:
            pass
    rec = {"kind": kind, "provider": provider, "nranks": n, "nodes": len(set(node_of)),
           "victim": victim, "seed": seed, "hang": hang, "files_left": len(left),
           "files": left, "victim_files_left": len(victim_left), "victim_files": victim_left,
           "survivors": [], "hang_stacks": stacks}
    for r, rep in enumerate(reps):
        if rep is not None:
            rec.setdefault("outside_bad", 0)
            rec["outside_bad"] += 0 if rep.get("outside_ok", False) else 1
            rec.setdefault("fds_left", 0)
            rec["fds_left"] = max(rec["fds_left"], rep.get("fds_left", 0))
            rec.setdefault("threads_left", 0)
            rec["threads_left"] = max(rec["threads_left"], rep.get("threads_left", 0))
            rec.setdefault("wrong_data", 0)
            rec["wrong_data"] += 1 if "wrong_data" in rep else 0
        if r == victim:
            if kind == "stall" and rep is not None and rep["error"]:
                # a rank whose own transport call is stuck names no other rank
                b = blamed(rep["error"]["msg"])
                if b is not None and b != victim:
                    rec["victim_wrong"] = rep["error"]["msg"][:300]
            continue
        s = {"rank": r, "report": rep is not None}
        if rep is not None and rep["error"]:
            e = rep["error"]
            b = blamed(e["msg"])
            s.update(error=e["cls"], blamed=b, msg=e["msg"][:300],
                     detect_s=(e["t"] - t_fault) if t_fault is not None else None)
        rec["survivors"].append(s)
    return rec


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100.0 * (len(xs) - 1))))]


def summarise(recs, max_detect, allow=frozenset()):
    """The table rows (one per kind, provider and size) and whether the aims hold."""
    rows, ok = [], True
    groups = {}
    for r in recs:
        groups.setdefault((r["kind"], r["provider"], "%dx%d" % (r["nodes"], r["nranks"] // r["nodes"])), []).append(r)
    for key in sorted(groups):
        g = groups[key]
        # with --allow shm-lock, a run hung in libfabric's shm lock (its
        # survivors were killed, so their files stay) is reported, not failed
        lock = [r for r in g if provider_lock_hang(r)]
        judged = [r for r in g if not ("shm-lock" in allow and provider_lock_hang(r))]
        surv = [s for r in judged for s in r["survivors"]]
        errored = [s for s in surv if s.get("error")]
        victims = {id(s): r["victim"] for r in judged for s in r["survivors"]}
        wrong = [s for s in errored if s["blamed"] is not None and s["blamed"] != victims[id(s)]]
        wrong += [{"msg": "victim: " + r["victim_wrong"]} for r in judged if "victim_wrong" in r]
        untold = [s for s in errored if s["blamed"] is None]
        det = [s["detect_s"] for s in errored if s.get("detect_s") is not None]
        row = {"kind": key[0], "provider": key[1], "topology": key[2], "runs": len(g),
               "survivors": len(surv), "errored": len(errored), "wrong_blame": len(wrong),
               "cannot_tell": len(untold),
               "detect_p50_s": pct(det, 50), "detect_p99_s": pct(det, 99),
               "detect_max_s": max(det) if det else float("nan"),
               "outside_bad": sum(r.get("outside_bad", 0) for r in g),
               "wrong_data": sum(r.get("wrong_data", 0) for r in g),
               "files_left": sum(r["files_left"] for r in judged),
               "victim_files_left": sum(r.get("victim_files_left", 0) for r in g),
               "fds_left": max([r.get("fds_left", 0) for r in g] or [0]),
               "threads_left": max([r.get("threads_left", 0) for r in g] or [0]),
               "hangs": sum(1 for r in judged if r["hang"]),
               "lock_hangs": len(lock),
               "wrong_examples": [s["msg"] for s in wrong[:2]]}
        good = (row["errored"] == row["survivors"] and not wrong and row["outside_bad"] == 0
                and row["wrong_data"] == 0 and row["files_left"] == 0
                and (row["fds_left"] <= 0 or ("fds" in allow and key[1] == "tcp"))
                and row["threads_left"] <= 0 and row["hangs"] == 0 and
                (max_detect is None or not det or row["detect_max_s"] <= max_detect))
        row["ok"] = good
        ok &= good
        rows.append(row)
    return rows, ok


def print_table(rows):
    print("| fault | provider | nodes x ranks | runs | survivors with an error | wrong rank "
          "blamed | cannot tell | detect p50 / p99 / max (s) | bytes outside | files / fds / "
          "threads left | killed rank's files | hangs (+ in libfabric's shm lock) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s | %d | %d / %d | %d | %d | %.2f / %.2f / %.2f | %d | %d / %d / %d "
              "| %d | %d (+%d) |" % (r["kind"], r["provider"], r["topology"], r["runs"], r["errored"],
                               r["survivors"], r["wrong_blame"], r["cannot_tell"],
                               r["detect_p50_s"], r["detect_p99_s"], r["detect_max_s"],
                               r["outside_bad"], r["files_left"], r["fds_left"],
                               r["threads_left"], r["victim_files_left"], r["hangs"],
                               r["lock_hangs"]))
    for r in rows:
        for m in r["wrong_examples"]:
            print("wrong blame (%s, %s, %s): %s" % (r["kind"], r["provider"], r["topology"], m))
        if not r["ok"]:  # which row failed its aims, with every figure, for a CI log
            print("aims not met (%s, %s, %s): %s" % (r["kind"], r["provider"], r["topology"],
                                                    json.dumps(r, default=str)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="runs per kind, provider and topology")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--providers", default="tcp,net,shm")
    ap.add_argument("--topologies", default="2x2,4x1", help="NODESxRANKS, comma-separated")
    ap.add_argument("--seconds", type=float, default=20.0, help="longest a run keeps calling")
    ap.add_argument("--bytes", type=int, default=4096, help="bytes per pair per call")
    ap.add_argument("--timeout-ms", type=int, default=30000, help="RMACOLL_TIMEOUT_MS")
    ap.add_argument("--max-detect-s", type=float, default=None,
                    help="fail when a detection takes longer")
    ap.add_argument("--allow", default="",
                    help="aims reported but not enforced, comma-separated: shm-lock (a run "
                         "whose hung ranks all spin on a lock inside libfabric: its shm "
                         "provider's region lock held by the killed rank; needs gdb), fds (libfabric "
                         "1.17's tcp;ofi_rxm keeps a broken communicator's endpoint open, "
                         "docs/transport-ofi.md; provider tcp only: net and shm must "
                         "leave none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--victim", type=int, default=None,
                    help="the rank every run's fault hits (default: random per run)")
    ap.add_argument("--json", help="write every run's record here")
    args = ap.parse_args()
    import importlib.util
    missing = [m for m in ("numpy", "rmacoll") if importlib.util.find_spec(m) is None]
    if missing:
        print("fault campaign: skipped: no %s" % " or ".join(missing))
        return 77
    recs = []
    seed = args.seed * 100000
    for kind in args.kinds.split(","):
        if kind not in KINDS:
            ap.error("unknown fault kind %r (one of %s)" % (kind, ", ".join(KINDS)))
        for prov in args.providers.split(","):
            if prov not in PROVIDERS:
                ap.error("unknown provider %r (tcp, net or shm)" % prov)
            if kind == "close" and prov == "shm":
                continue  # shm's connections are no sockets: nothing to close
            for topo in args.topologies.split(","):
                for _ in range(args.runs):
                    seed += 1
                    rec = one_run(kind, topology(topo), prov, seed, args)
                    recs.append(rec)
                    sys.stderr.write("%s %s %s seed %d victim %d: %s\n" % (
                        kind, prov, topo, seed, rec["victim"],
                        ", ".join("r%d %s->%s %.2fs" % (s["rank"], s.get("error"),
                                                        s.get("blamed"),
                                                        s.get("detect_s") or -1)
                                  for s in rec["survivors"])))
    rows, ok = summarise(recs, args.max_detect_s, set(filter(None, args.allow.split(","))))
    print_table(rows)
    print("aims %s%s" % ("met" if ok else "NOT met",
                         " (not enforced: %s)" % args.allow if args.allow else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "runs": recs}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
