"""Checks an installed rmacoll wheel from the interpreter that runs it (a venv
with the wheel installed): the package is the installed copy, it loads the
librmacoll bundled in it (rmacoll/lib/) with neither RMACOLL_LIBRARY nor
LD_LIBRARY_PATH set, and 2 processes make an exact alltoallv, on one node
(ce) and on two virtual nodes (ofi over loopback). Standard library only
(array, subprocess), so a plain `python3 -m venv` without system site
packages runs it.

Usage: venv/bin/python wheel_check.py   (run from outside the source tree)
Exit 0 and "wheel ok" on success. Used by .ci/run and check_install.sh.
"""

import array
import os
import subprocess
import sys

NRANKS = 2
SENTINEL = -7  # every receive element no block lands on keeps it
GAP = 2        # elements of sentinel between receive blocks, and before the first


def count(i, j):
    """int32 elements rank i sends rank j (uneven; one block empty)."""
    return 0 if (i, j) == (1, 1) else 3 + 5 * i + 2 * j


def value(i, j, k):
    return 1000000 * (i + 1) + 1000 * j + k


def layout(me):
    """(send, sendcounts, sdispls, recvcounts, rdispls, expected recv)."""
    send, scounts, sdispls = array.array("i"), [], []
    for j in range(NRANKS):
        sdispls.append(len(send))
        scounts.append(count(me, j))
        send.extend(value(me, j, k) for k in range(count(me, j)))
    rcounts, rdispls, expect = [], [], array.array("i", [SENTINEL] * GAP)
    for i in range(NRANKS):
        rdispls.append(len(expect))
        rcounts.append(count(i, me))
        expect.extend(value(i, me, k) for k in range(count(i, me)))
        expect.extend([SENTINEL] * GAP)
    return send, scounts, sdispls, rcounts, rdispls, expect


def check_installed():
    import rmacoll
    for var in ("RMACOLL_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH"):
        assert not os.environ.get(var), "%s is set; the check must run without it" % var
    pkg = os.path.dirname(os.path.abspath(rmacoll.__file__))
    assert pkg.startswith(os.path.realpath(sys.prefix) + os.sep) or \
        pkg.startswith(sys.prefix + os.sep), ("not the installed copy", pkg, sys.prefix)
    path = rmacoll.library_path()
    assert path == os.path.join(pkg, "lib", "librmacoll.so"), path
    # the process maps exactly that librmacoll, no other copy
    with open("/proc/self/maps") as f:
        mapped = {line.split()[-1] for line in f
                  if os.path.basename(line.split()[-1]).startswith("librmacoll.so")}
    assert mapped == {os.path.realpath(path)}, mapped
    return rmacoll, path


def rank_main(rank, uid_hex):
    rmacoll, _ = check_installed()
    send, scounts, sdispls, rcounts, rdispls, expect = layout(rank)
    before = send.tobytes()
    recv = array.array("i", [SENTINEL] * len(expect))
    with rmacoll.Communicator(rank, NRANKS, bytes.fromhex(uid_hex)) as c:
        for _ in range(2):  # twice: the second call reuses what the first set up
            for k in range(len(recv)):
                recv[k] = SENTINEL
            c.alltoallv(send.buffer_info()[0], scounts, sdispls,
                        recv.buffer_info()[0], rcounts, rdispls, "int32")
            assert recv.tobytes() == expect.tobytes(), \
                "rank %d: got %s, expected %s" % (rank, list(recv), list(expect))
            assert send.tobytes() == before, "rank %d: send buffer changed" % rank
    print("rank %d ok (%d int32 received)" % (rank, sum(rcounts)))


def run_pair(rmacoll, nodes, label):
    uid = bytes(rmacoll.get_unique_id()).hex()
    procs = []
    for r in range(NRANKS):
        env = dict(os.environ)
        env.setdefault("FI_TCP_IFACE", "lo")
        env.setdefault("FI_SOCKETS_IFACE", "lo")
        env.setdefault("RMACOLL_TIMEOUT_MS", "20000")
        if nodes is not None:
            env["RMACOLL_NODE_ID"] = nodes[r]
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__),
                                       "--rank", str(r), uid], env=env))
    rcs = []
    for p in procs:
        try:
            rcs.append(p.wait(timeout=120))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            rcs.append("killed after 120 s")
    if rcs != [0] * NRANKS:
        raise SystemExit("wheel check failed (%s): exit codes %s" % (label, rcs))
    print("2 ranks, %s: exact" % label)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), sys.argv[3])
        return
    rmacoll, path = check_installed()
    print("rmacoll", rmacoll.__file__, "library", path)
    run_pair(rmacoll, None, "one node")
    run_pair(rmacoll, ["vnode-0", "vnode-1"], "two virtual nodes")
    print("wheel ok")


if __name__ == "__main__":
    main()
