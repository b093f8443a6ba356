"""Runs ranks as processes for the Python tests (the counterpart of
tests/support/mprun.c): this process makes the unique id (its rendezvous
root runs here), starts one `python rank_worker.py SCENARIO` per rank with
the rank, the id and a virtual node (RMACOLL_NODE_ID) in its environment,
and collects every rank's JSON report. Bounded: a run that passes its
deadline is killed and reported as such. Loopback only.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)  # python/, holding the rmacoll package
WORKER = os.path.join(HERE, "rank_worker.py")


def rank_env(rank, nranks, node, extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env["PYTHONPATH"]
                                    if env.get("PYTHONPATH") else "")
    env.setdefault("FI_TCP_IFACE", "lo")
    env.setdefault("FI_SOCKETS_IFACE", "lo")
    env.setdefault("RMACOLL_TIMEOUT_MS", "20000")
    env["RMACOLL_NODE_ID"] = "vnode-%d" % node
    env["RMACOLL_TEST_RANK"] = str(rank)
    env["RMACOLL_TEST_NRANKS"] = str(nranks)
    env.update(extra or {})
    return env


def run(scenario, node_of, timeout=180, uid=True, extra_env=None, args=()):
    """Runs `scenario` on len(node_of) ranks, rank r on virtual node
    node_of[r]. Returns a list, per rank, of dicts: rc, report (the
    worker's JSON, or None), stderr. uid=False leaves the rendezvous to
    the workers (extra_env must then hold launcher variables)."""
    import rmacoll

    nranks = len(node_of)
    base = {}
    if uid:
        base["RMACOLL_TEST_UID"] = rmacoll.get_unique_id().hex()
    if extra_env is not None and not callable(extra_env):
        base.update(extra_env)
    procs = []
    for r in range(nranks):
        env = rank_env(r, nranks, node_of[r], base)
        if callable(extra_env):  # per-rank variables
            env.update(extra_env(r))
        procs.append(subprocess.Popen([sys.executable, WORKER, scenario] + list(args),
                                      env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    for r, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    q.kill()
            out, err = p.communicate()
            err = "killed after the %d s deadline\n%s" % (timeout, err)
        report = None
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                try:
                    report = json.loads(line)
                except ValueError:
                    pass
                break
        results.append({"rc": p.returncode, "report": report, "stderr": err, "rank": r})
    return results


def describe_failure(results):
    return "\n".join("rank %d: rc %s, report %s, stderr:\n%s"
                     % (x["rank"], x["rc"], x["report"], x["stderr"][-3000:])
                     for x in results)
