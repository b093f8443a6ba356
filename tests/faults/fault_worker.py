"""One rank of a fault-campaign run (tests/faults/campaign.py).

Environment (set by the driver): RMACOLL_TEST_UID, RMACOLL_TEST_RANK,
RMACOLL_TEST_NRANKS, RMACOLL_NODE_ID, and FAULT_KIND (kill, stop, close,
transport, abort), FAULT_VICTIM, FAULT_AT (seconds after the first call
returned), FAULT_DIR (a folder the ranks share), FAULT_SECONDS (how long
to keep calling at most), FAULT_BYTES (bytes per pair).

Every rank calls rmacoll's alltoallv back to back (host memory, int32,
gapped receive blocks inside guard bytes, every successful call checked
exactly) until a call fails or FAULT_SECONDS pass. The victim does its
fault from a second thread FAULT_AT seconds in, after writing the time
into FAULT_DIR/fault (transport: RMACOLL_TEST_FAULT, set by the driver,
makes its network fail; the time of its own failure stands for the
fault's). Each rank then destroys its communicator and prints one JSON
line: the error (class, message, wall time), the calls made, whether any
byte outside the receive blocks changed, and the file descriptors and
threads it holds beyond what it held before the communicator.
"""

import json
import os
import signal
import socket
import sys
import threading
import time

import numpy as np

import rmacoll

SENTINEL = 0xA5
GUARD = 64
GAP = 3  # int32 elements between receive blocks


def fds():
    return len(os.listdir("/proc/self/fd"))


def threads():
    return len(os.listdir("/proc/self/task"))


def close_sockets():
    """Shuts every TCP socket of this process down (both ways): the
    bootstrap connection and the network transport's, as a cable pull or a
    killed connection would; the process itself goes on."""
    n = 0
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            d = os.dup(fd)
        except OSError:
            continue
        try:
            s = socket.socket(fileno=d)
        except OSError:  # not a socket: the dup is this loop's to close
            os.close(d)
            continue
        try:
            if s.family in (socket.AF_INET, socket.AF_INET6) and s.type == socket.SOCK_STREAM:
                s.shutdown(socket.SHUT_RDWR)
                n += 1
        except OSError:
            pass
        finally:
            s.close()
    return n


def fault(kind, comm, stamp):
    with open(stamp + ".tmp", "w") as f:
        f.write(repr(time.time()))
    os.rename(stamp + ".tmp", stamp)
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif kind == "close":
        close_sockets()
    elif kind == "abort":
        comm.abort()


def main():
    rank = int(os.environ["RMACOLL_TEST_RANK"])
    n = int(os.environ["RMACOLL_TEST_NRANKS"])
    kind = os.environ["FAULT_KIND"]
    victim = int(os.environ["FAULT_VICTIM"])
    at = float(os.environ["FAULT_AT"])
    seconds = float(os.environ.get("FAULT_SECONDS", "60"))
    per_pair = int(os.environ.get("FAULT_BYTES", "4096")) // 4
    stamp = os.path.join(os.environ["FAULT_DIR"], "fault")
    out = {"rank": rank, "victim": rank == victim, "calls": 0, "error": None}
    fd0, th0 = fds(), threads()

    uid = rmacoll.UniqueId.from_hex(os.environ["RMACOLL_TEST_UID"])
    comm = rmacoll.Communicator(rank, n, uid)
    cnt = np.full(n, per_pair, dtype=np.int64)
    sd = np.arange(n, dtype=np.int64) * per_pair
    rd = np.arange(n, dtype=np.int64) * (per_pair + GAP) + GAP
    rbytes = int(rd[-1] + per_pair + GAP) * 4
    big = np.full(rbytes + 2 * GUARD, SENTINEL, dtype=np.uint8)
    recv = big[GUARD:GUARD + rbytes].view(np.int32)
    send = np.empty(n * per_pair, dtype=np.int32)
    blocks = np.zeros(len(big), dtype=bool)  # the receive blocks' bytes
    for j in range(n):
        lo = GUARD + int(rd[j]) * 4
        blocks[lo:lo + per_pair * 4] = True
    outside_ok = True
    t_end = time.monotonic() + seconds
    armed = rank == victim and kind not in ("transport", "stall")
    call = 0
    while time.monotonic() < t_end:
        call += 1
        for j in range(n):  # block for j: (call, me, j, index)
            send[j * per_pair:(j + 1) * per_pair] = (
                (call * 131 + rank * 17 + j) * 1000003 + np.arange(per_pair)) & 0x7FFFFFFF
        big[:] = SENTINEL
        try:
            comm.alltoallv(send, cnt, sd, recv, cnt, rd)
        except rmacoll.RmacollError as e:
            out["error"] = {"cls": type(e).__name__, "msg": str(e), "t": time.time(),
                            "call": call}
            outside_ok = bool(np.all(big[~blocks] == SENTINEL))
            break
        outside_ok = bool(np.all(big[~blocks] == SENTINEL))
        for i in range(n):
            want = ((call * 131 + i * 17 + rank) * 1000003 + np.arange(per_pair)) & 0x7FFFFFFF
            if not np.array_equal(recv[int(rd[i]):int(rd[i]) + per_pair], want):
                out["wrong_data"] = call
        if not outside_ok:
            break
        out["calls"] = call
        if armed:
            armed = False
            threading.Timer(at, fault, (kind, comm, stamp)).start()
    out["outside_ok"] = outside_ok
    t0 = time.monotonic()
    try:
        comm.close()
        out["close"] = "ok"
    except rmacoll.RmacollError as e:
        out["close"] = "%s: %s" % (type(e).__name__, e)
    out["close_s"] = time.monotonic() - t0
    for t in threading.enumerate():
        if t is not threading.current_thread() and isinstance(t, threading.Timer):
            t.join(5)
    # the bootstrap root thread (in the rank that made the unique id) is
    # detached and leaves once every rank has said goodbye, so a stopped
    # rank resumed late keeps it a moment past this rank's destroy: what is
    # still there after 5 s is left behind (its socket goes with it)
    settle = time.monotonic() + 5
    while threads() > th0 and time.monotonic() < settle:
        time.sleep(0.05)
    out["fds_left"] = fds() - fd0
    out["threads_left"] = threads() - th0
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
