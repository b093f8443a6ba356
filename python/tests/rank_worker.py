"""One rank of a Python multi-process test (started by mprun.py).

Usage: rank_worker.py SCENARIO. The rank, the size and the unique id come
from RMACOLL_TEST_RANK / RMACOLL_TEST_NRANKS / RMACOLL_TEST_UID. Every
rank builds the same count matrix and every rank's input from shared
seeds, so each can compute its expected output with numpy; receive
buffers sit inside sentinel-filled guard bytes, compared byte for byte.
The last stdout line is a JSON report: {"rank", "size", "checks": [{name,
ok, detail, cls, msg}]}; the exit code is 0 only when every check passed.
"""

import json
import os
import shutil
import sys
import tempfile
import time
import traceback

import numpy as np

import rmacoll
from fakes import FakeCudaTensor

SENTINEL = 0xA5
GUARD = 64  # bytes of sentinel before and after every receive buffer

RANK = int(os.environ["RMACOLL_TEST_RANK"])
NRANKS = int(os.environ["RMACOLL_TEST_NRANKS"])
checks = []


def record(name, ok, detail="", **kw):
    d = {"name": name, "ok": bool(ok), "detail": detail}
    d.update(kw)
    checks.append(d)


class Guarded:
    """A receive array of `shape`/`dtype` inside sentinel guard bytes."""

    def __init__(self, shape, dtype):
        dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self.big = np.full(self.nbytes + 2 * GUARD, SENTINEL, dtype=np.uint8)
        self.array = self.big[GUARD:GUARD + self.nbytes].view(dtype).reshape(shape)

    def guards_intact(self):
        return (bool(np.all(self.big[:GUARD] == SENTINEL))
                and bool(np.all(self.big[GUARD + self.nbytes:] == SENTINEL)))

    def untouched(self):
        return bool(np.all(self.big == SENTINEL))

    def body(self):
        return self.big[GUARD:GUARD + self.nbytes].tobytes()


def count_matrix(seed, n, equal=None):
    """rows from i to j; about a third zero (all equal when `equal`)."""
    if equal is not None:
        return np.full((n, n), equal, dtype=np.int64)
    rng = np.random.default_rng([seed, 7])
    m = rng.integers(1, 6, size=(n, n))
    m[rng.random((n, n)) < 0.3] = 0
    return m.astype(np.int64)


def rank_input(seed, i, rows, row_shape, dtype):
    """Rank i's input: random bytes (any bit pattern, NaNs included)."""
    dtype = np.dtype(dtype)
    nbytes = rows * int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize
    raw = np.random.default_rng([seed, 1000 + i]).integers(0, 256, size=nbytes,
                                                           dtype=np.uint8)
    return raw.view(dtype).reshape((rows,) + tuple(row_shape))


def expected_output(m, seed, me, row_shape, dtype):
    parts = []
    for i in range(m.shape[0]):
        x = rank_input(seed, i, int(m[i].sum()), row_shape, dtype)
        off = int(m[i, :me].sum())
        parts.append(x[off:off + int(m[i, me])])
    return np.concatenate(parts, axis=0)


def splits_as(form, sizes):
    if form == "list":
        return [int(s) for s in sizes]
    if form == "tuple":
        return tuple(int(s) for s in sizes)
    if form == "numpy":
        return np.asarray(sizes, dtype=np.int64)
    if form == "none":
        return None
    raise ValueError(form)


def one_call(comm, seed, dtype, row_shape, form, equal=None):
    """all_to_all_single on one matrix; checks bytes and guards."""
    n, me = comm.size, comm.rank
    m = count_matrix(seed, n, equal)
    inp = rank_input(seed, me, int(m[me].sum()), row_shape, dtype)
    out = Guarded((int(m[:, me].sum()),) + tuple(row_shape), dtype)
    rmacoll.all_to_all_single(out.array, inp, splits_as(form, m[:, me]),
                              splits_as(form, m[me]), comm=comm)
    exp = expected_output(m, seed, me, row_shape, dtype)
    name = "a2a seed=%d %s rows%s %s%s" % (seed, np.dtype(dtype).name, tuple(row_shape),
                                            form, "" if equal is None else " equal")
    ok = out.body() == exp.tobytes() and out.guards_intact()
    detail = "" if ok else "got %r expected %r guards %s" % (
        out.array.reshape(-1)[:16], exp.reshape(-1)[:16], out.guards_intact())
    record(name, ok, detail)
    return ok


def scenario_data(comm):
    dtypes = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
              "float32", "float64", "bool", "int16", "uint16", "complex64", "complex128"]
    forms = ["list", "numpy", "tuple"]
    for k, dt in enumerate(dtypes):
        one_call(comm, 10 + k, dt, (3,), forms[k % 3])
    one_call(comm, 30, "int8", (), "list")             # 1-d tensors: a row is one element
    one_call(comm, 31, "float32", (2, 5), "numpy")     # rows of 10 elements
    one_call(comm, 32, "float64", (1024,), "list")     # 8 KiB rows
    one_call(comm, 33, "int32", (4,), "none", equal=3)  # None: equal splits
    one_call(comm, 34, "uint8", (7,), "list", equal=0)  # every block empty
    for s in range(3):                                  # back to back on one comm
        one_call(comm, 40 + s, "float32", (16,), "list")


def scenario_raw(comm):
    """Communicator.alltoallv with displacements that leave gaps (bf16 on
    uint16 storage) and Communicator.alltoall."""
    n, me = comm.size, comm.rank
    m = count_matrix(50, n) * 3
    gap = 2
    x = [np.random.default_rng([50, i]).integers(0, 1 << 16, size=int(m[i].sum()),
                                                  dtype=np.uint16) for i in range(n)]
    sc = m[me]
    sd = np.concatenate([[0], np.cumsum(sc)[:-1]])
    rc = m[:, me]
    rd = np.array([int(rc[:i].sum()) + gap * i for i in range(n)], dtype=np.int64)
    total = int(rc.sum()) + gap * n
    out = Guarded((total,), np.uint16)
    comm.alltoallv(x[me], sc, sd, out.array, rc, rd, dtype="bfloat16")
    exp = np.full(total, 0xA5A5, dtype=np.uint16)
    for i in range(n):
        off = int(m[i, :me].sum())
        exp[rd[i]:rd[i] + rc[i]] = x[i][off:off + int(m[i, me])]
    record("alltoallv bfloat16 with gaps", out.body() == exp.tobytes() and out.guards_intact())

    cnt = 5
    src = (np.arange(n * cnt, dtype=np.int64) + 1000 * me)
    out2 = Guarded((n * cnt,), np.int64)
    comm.alltoall(src, out2.array, cnt)
    exp2 = np.concatenate([np.arange(me * cnt, (me + 1) * cnt, dtype=np.int64) + 1000 * i
                           for i in range(n)])
    record("alltoall int64", out2.body() == exp2.tobytes() and out2.guards_intact())

    # in place (rmacoll.IN_PLACE): a symmetric count matrix, gapped blocks;
    # rank i's block for j holds i's data before and j's after
    sym = m + m.T
    c3 = sym[me]
    d3 = np.array([int(c3[:j].sum()) + gap * (j + 1) for j in range(n)], dtype=np.int64)
    tot3 = int(c3.sum()) + gap * (n + 1)

    def block(i, j):  # what rank i sends rank j
        return np.random.default_rng([51, i, j]).integers(0, 1 << 62, size=int(sym[i, j]),
                                                          dtype=np.int64)
    io = Guarded((tot3,), np.int64)
    exp3 = np.frombuffer(io.body(), dtype=np.int64).copy()
    for j in range(n):
        io.array[d3[j]:d3[j] + c3[j]] = block(me, j)
        exp3[d3[j]:d3[j] + c3[j]] = block(j, me)
    comm.alltoallv(rmacoll.IN_PLACE, None, None, io.array, c3, d3)
    record("alltoallv in place int64", io.body() == exp3.tobytes() and io.guards_intact())


def expect_error(name, fn, outs, cls, builtin=None, own_text=None, culprit=None):
    """Runs fn (a collective call); it must raise cls on this rank and write
    nothing into outs. culprit: the rank whose local problem it is; its
    message must hold own_text, every other rank's must name it."""
    try:
        fn()
    except rmacoll.RmacollError as e:
        msg = str(e)
        ok = type(e) is cls
        why = [] if ok else ["raised %s" % type(e).__name__]
        if builtin is not None and not isinstance(e, builtin):
            ok = False
            why.append("not a %s" % builtin.__name__)
        if e.rank != RANK:
            ok = False
            why.append("rank attribute %r" % e.rank)
        if culprit is not None:
            want = own_text if RANK == culprit else "rank %d" % culprit
            if want not in msg:
                ok = False
                why.append("message lacks %r" % want)
        # the text reads as the user's error: no status-name prefix, nothing
        # of the call the package makes to fail every rank
        if msg.startswith("RMACOLL_ERR_"):
            ok = False
            why.append("message starts with the status name")
        for internal in ("sendcounts is NULL", "unknown datatype"):
            if internal in msg:
                ok = False
                why.append("message shows %r" % internal)
        if not all(o.untouched() for o in outs):
            ok = False
            why.append("a receive buffer was written")
        record(name, ok, "; ".join(why), cls=type(e).__name__, msg=msg)
        return
    except Exception as e:  # noqa: BLE001 - reported as a failed check
        record(name, False, "raised a non-rmacoll %s: %s" % (type(e).__name__, e),
               cls=type(e).__name__)
        return
    record(name, False, "no exception", cls=None)


def scenario_errors(comm):
    n, me = comm.size, comm.rank
    m = count_matrix(60, n, equal=2)
    last = n - 1

    def good_input(dt="int32", rows=None):
        r = int(m[me].sum()) if rows is None else rows
        return rank_input(60, me, r, (3,), dt)

    def out_for(dt="int32", rows=None):
        return Guarded((int(m[:, me].sum()) if rows is None else rows, 3), dt)

    # 1. send count of rank 1 for rank 0 differs from rank 0's receive count
    o = out_for()
    isz = list(m[me])
    if me == 1:
        isz[0] += 1
    inp = good_input(rows=sum(isz))
    expect_error("mismatch", lambda: rmacoll.all_to_all_single(
        o.array, inp, list(m[:, me]), isz, comm=comm), [o], rmacoll.MismatchError, ValueError)

    # 2. one rank's output dtype differs from its input's
    o = out_for("float32" if me == last else "int32")
    inp = good_input()
    expect_error("dtype differs on one rank", lambda: rmacoll.all_to_all_single(
        o.array, inp, list(m[:, me]), list(m[me]), comm=comm), [o], rmacoll.DatatypeError,
        TypeError, "input has dtype int32 but output has dtype float32", last)

    # 3. a dtype rmacoll does not move, on every rank
    o = out_for("float128")
    inp = good_input("float128")
    # (every rank's own check fails: each says why itself)
    expect_error("unsupported dtype", lambda: rmacoll.all_to_all_single(
        o.array, inp, comm=comm), [o], rmacoll.DatatypeError, TypeError, "float128", me)

    # 4. one rank's input_split_sizes do not sum to its input's rows
    o = out_for()
    inp = good_input(rows=int(m[me].sum()) + (1 if me == 0 else 0))
    expect_error("split sum on one rank", lambda: rmacoll.all_to_all_single(
        o.array, inp, list(m[:, me]), list(m[me]), comm=comm), [o],
        rmacoll.InvalidArgumentError, ValueError,
        "input_split_sizes sum to %d rows but input has %d rows" % (m[0].sum(), m[0].sum() + 1),
        0)

    # 5. equal split of a dim 0 the group size does not divide, on one rank
    o = out_for(rows=int(m[:, me].sum()) + (1 if me == 1 else 0))
    inp = good_input()
    expect_error("equal split not divisible", lambda: rmacoll.all_to_all_single(
        o.array, inp, comm=comm), [o], rmacoll.InvalidArgumentError, ValueError,
        "not divisible by the group size %d" % n, 1)

    # 6. the wrong number of split sizes on one rank
    o = out_for()
    inp = good_input()
    osz = list(m[:, me])[:-1] if me == 0 else list(m[:, me])
    expect_error("wrong number of splits", lambda: rmacoll.all_to_all_single(
        o.array, inp, osz, list(m[me]), comm=comm), [o], rmacoll.InvalidArgumentError,
        ValueError, "output_split_sizes has %d entries, the group has %d ranks" % (n - 1, n), 0)

    # 7. a non-contiguous input on one rank
    o = out_for()
    wide = rank_input(60, me, 2 * int(m[me].sum()), (3,), "int32")
    inp = wide[::2] if me == 1 else good_input()
    expect_error("non-contiguous input", lambda: rmacoll.all_to_all_single(
        o.array, inp, list(m[:, me]), list(m[me]), comm=comm), [o],
        rmacoll.InvalidArgumentError, ValueError, "input is not contiguous", 1)

    # 8. a read-only output on one rank
    o = out_for()
    if me == 0:
        o.array.flags.writeable = False
    inp = good_input()
    expect_error("read-only output", lambda: rmacoll.all_to_all_single(
        o.array, inp, list(m[:, me]), list(m[me]), comm=comm), [o],
        rmacoll.InvalidArgumentError, ValueError, "output is read-only", 0)

    # 9. not an array at all, on one rank
    o = out_for()
    inp = good_input().tolist() if me == last else good_input()
    expect_error("input not an array", lambda: rmacoll.all_to_all_single(
        o.array, inp, list(m[:, me]), list(m[me]), comm=comm), [o],
        rmacoll.InvalidArgumentError, ValueError, "input is a list, not a tensor", last)

    # 10. errors the C library finds itself: NULL receive buffer on rank 0,
    # overlapping receive blocks on the last rank (raw alltoallv)
    c = [1] * n
    d = list(range(n))
    src = np.arange(n, dtype=np.float32)
    o = Guarded((n,), np.float32)
    expect_error("NULL recvbuf (library check)", lambda: comm.alltoallv(
        src, c, d, None if me == 0 else o.array, c, d), [o], rmacoll.NullBufferError,
        ValueError, "recvbuf is NULL", 0)
    o = Guarded((n,), np.float32)
    rd = [0] * n if me == last else d
    expect_error("overlapping receive blocks (library check)", lambda: comm.alltoallv(
        src, c, d, o.array, c, rd), [o], rmacoll.OverlapError, ValueError, "overlaps", last)

    # 11. device split sizes (a CUDA split tensor, a stand-in here) with host
    # buffers on one rank: the others are in an ordinary call and fail with it
    o = out_for()
    inp = good_input()
    isz = FakeCudaTensor((n,)) if me == last else list(m[me])
    osz = FakeCudaTensor((n,)) if me == last else list(m[:, me])
    expect_error("CUDA split tensor with host buffers", lambda: rmacoll.all_to_all_single(
        o.array, inp, osz, isz, comm=comm), [o], rmacoll.InvalidArgumentError,
        ValueError, "input_split_sizes is a CUDA tensor but input and output are in host "
        "memory", last)

    # the communicator is still usable after all of these
    one_call(comm, 61, "int32", (3,), "list")


def scenario_abort(comm):
    """Communicator.abort() on rank 1 between calls: rank 1's next call
    raises AbortedError, every other rank's raises PeerError naming rank 1
    with nothing written, get_async_error() says the same outside a call,
    and close() still returns on every rank."""
    n, me = comm.size, comm.rank
    one_call(comm, 80, "int32", (3,), "list")
    record("no async error before", comm.get_async_error() is None,
           repr(comm.get_async_error()))
    # a barrier outside rmacoll (files): rank 1 aborts only once every rank
    # has returned from the call above, so only the next call can fail
    bar = os.path.join(tempfile.gettempdir(),
                       "rmacoll-abort-" + os.environ["RMACOLL_TEST_UID"][:24])
    os.makedirs(bar, exist_ok=True)
    open(os.path.join(bar, str(me)), "w").close()
    if me == 1:
        deadline = time.monotonic() + 60
        while len(os.listdir(bar)) < n and time.monotonic() < deadline:
            time.sleep(0.005)
        comm.abort()
        comm.abort()  # twice: a no-op
    m = count_matrix(81, n)
    inp = rank_input(81, me, int(m[me].sum()), (2,), "int64")
    o = Guarded((int(m[:, me].sum()), 2), "int64")
    t0 = time.monotonic()
    expect_error("call after rank 1 aborted", lambda: rmacoll.all_to_all_single(
        o.array, inp, list(m[:, me]), list(m[me]), comm=comm), [o],
        rmacoll.AbortedError if me == 1 else rmacoll.PeerError, None,
        "aborted", 1)
    dt = time.monotonic() - t0
    record("failed within 1 s", dt < 1.0, "%.3f s" % dt)
    e = comm.get_async_error()
    want = rmacoll.AbortedError if me == 1 else rmacoll.PeerError
    record("async error after", type(e) is want and e.rank == me, repr(e))
    if me == 1:
        shutil.rmtree(bar, ignore_errors=True)


def file_barrier(name, n):
    """A barrier outside rmacoll (files in a folder named after the id)."""
    bar = os.path.join(tempfile.gettempdir(),
                       "rmacoll-%s-%s" % (name, os.environ["RMACOLL_TEST_UID"][:24]))
    os.makedirs(bar, exist_ok=True)
    open(os.path.join(bar, str(RANK)), "w").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(bar)) < n and time.monotonic() < deadline:
        time.sleep(0.005)
    return bar


def scenario_shrink(comm):
    """The last rank is killed (SIGKILL) after a call; every survivor's
    next call raises PeerError, Communicator.shrink() gives a communicator
    of the survivors (same order) that moves exact data; shrinking that
    healthy one gives one of the same size that works too."""
    import signal
    n, me = comm.size, comm.rank
    one_call(comm, 90, "int32", (3,), "list")
    bar = file_barrier("shrink", n)
    if me == n - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    m = count_matrix(91, n)
    inp = rank_input(91, me, int(m[me].sum()), (2,), "int64")
    o = Guarded((int(m[:, me].sum()), 2), "int64")
    expect_error("call after the last rank died", lambda: rmacoll.all_to_all_single(
        o.array, inp, list(m[:, me]), list(m[me]), comm=comm), [o], rmacoll.PeerError)
    t0 = time.monotonic()
    new = comm.shrink()
    dt = time.monotonic() - t0
    record("shrink: the survivors in order", (new.rank, new.size) == (me, n - 1),
           "rank %d of %d in %.3f s" % (new.rank, new.size, dt))
    with new:
        one_call(new, 92, "float32", (4,), "numpy")
        again = new.shrink()
        with again:
            record("shrink of a healthy communicator", (again.rank, again.size) ==
                   (me, n - 1), "rank %d of %d" % (again.rank, again.size))
            one_call(again, 93, "int64", (), "list")
    if me == 0:
        shutil.rmtree(bar, ignore_errors=True)


def scenario_from_env(_comm):
    comm = rmacoll.Communicator.from_env()
    record("from_env rank/size", comm.rank == RANK and comm.size == NRANKS,
           "got %d/%d" % (comm.rank, comm.size))
    one_call(comm, 70, "float32", (4,), "list")
    comm.close()


def scenario_reuse(comm):
    """all_to_all_single's prepared host call (_single._Prepared) never
    serves a stale argument block: calls back to back on one communicator
    whose split sizes change (a list changed in place too), whose buffers
    change dtype, shape or address, that go from None to lists and back;
    every output compared byte for byte with its guard bytes. Whether the
    prepared block was used (no describe()) is checked too, so the test
    sees the fast path it guards; local errors after a prepared call still
    fail every rank."""
    import rmacoll._single as single
    n, me = comm.size, comm.rank
    last = n - 1
    seen = {"describe": 0}
    real_describe = single.describe

    def counting(obj):
        seen["describe"] += 1
        return real_describe(obj)
    single.describe = counting

    def step(name, m, seed, dtype, row_shape, osz, isz, inp=None, out=None, fast=None,
             wrap=None):
        """One call with rows matrix m; inp/out: arrays to reuse (filled
        in place / reset to the sentinel) or None for new ones."""
        rows_in = int(m[me].sum())
        data = rank_input(seed, me, rows_in, row_shape, dtype)
        if inp is None:
            inp = data.copy()
        else:
            inp[...] = data
        if out is None:
            out = Guarded((int(m[:, me].sum()),) + tuple(row_shape), dtype)
        else:
            out.big[:] = SENTINEL
        before = seen["describe"]
        o, i = (out.array, inp) if wrap is None else (wrap(out.array), wrap(inp))
        rmacoll.all_to_all_single(o, i, osz, isz, comm=comm)
        exp = expected_output(m, seed, me, row_shape, dtype)
        ok = out.body() == exp.tobytes() and out.guards_intact()
        why = [] if ok else ["got %r expected %r guards %s" % (
            out.array.reshape(-1)[:8], exp.reshape(-1)[:8], out.guards_intact())]
        used = seen["describe"] == before
        if fast is not None and used != fast:
            ok = False
            why.append("prepared block %s" % ("used" if used else "not used"))
        record("reuse " + name, ok, "; ".join(why))
        return inp, out

    m1 = count_matrix(80, n) + 2  # every block at least two rows
    m2 = m1.copy()                # the same row and column sums, other blocks
    for i in range(n):
        m2[i, i] -= 1
        m2[i, (i + 1) % n] += 1
    lo, li = [int(v) for v in m1[:, me]], [int(v) for v in m1[me]]
    inp, out = step("first call", m1, 81, "float32", (4,), lo, li, fast=False)
    step("same arguments, new data", m1, 82, "float32", (4,), lo, li, inp, out, fast=True)
    lo[:] = [int(v) for v in m2[:, me]]  # the same list objects, changed in place
    li[:] = [int(v) for v in m2[me]]
    step("split lists changed in place", m2, 83, "float32", (4,), lo, li, inp, out,
         fast=(n == 1))
    step("equal split lists, new objects", m2, 84, "float32", (4,), list(lo), list(li),
         inp, out, fast=True)
    # one side only: with 3 ranks or more, rank 0's input splits stay and
    # its output splits change, rank 2's the other way round (rows 1 and 2
    # of the matrix trade one row between columns 0 and 1)
    m3 = m2.copy()
    if n >= 3:
        m3[1, 0] += 1
        m3[1, 1] -= 1
        m3[2, 0] -= 1
        m3[2, 1] += 1
    lo[:] = [int(v) for v in m3[:, me]]
    li[:] = [int(v) for v in m3[me]]
    step("one side's split list changed in place", m3, 95, "float32", (4,), lo, li, inp, out,
         fast=(n < 3 or me not in (0, 1, 2)))
    step("other dtype, same shape and item size", m3, 85, "int32", (4,), lo, li, fast=False)
    step("back to float32, same buffers", m3, 86, "float32", (4,), lo, li, inp, out,
         fast=False)
    step("float16 rows of 8 (same bytes per row)", m3, 87, "float16", (8,), lo, li,
         fast=False)
    step("new float16 buffers, same shapes", m3, 88, "float16", (8,), lo, li, fast=True)
    eq = count_matrix(0, n, equal=3)
    inp3, out3 = step("None splits", eq, 89, "float64", (2,), None, None, fast=False)
    step("None splits again", eq, 90, "float64", (2,), None, None, inp3, out3, fast=True)
    step("None -> lists of the same sizes", eq, 91, "float64", (2,), [3] * n, [3] * n,
         inp3, out3, fast=False)
    step("lists -> None", eq, 92, "float64", (2,), None, None, inp3, out3, fast=False)
    step("float lists equal to the ints", eq, 93, "float64", (2,), [3.0] * n, [3] * n,
         inp3, out3, fast=False)
    step("int lists after float lists", eq, 94, "float64", (2,), [3] * n, [3] * n,
         inp3, out3, fast=True)
    step("1-d, rows of one element", m1, 103, "uint8", (), [int(v) for v in m1[:, me]],
         [int(v) for v in m1[me]], fast=False)

    # local errors after a prepared call: the last rank's output is not
    # contiguous, then read-only, with the dtype and shape of the prepared
    # call; every rank fails, nothing is written
    lo, li = [int(v) for v in m1[:, me]], [int(v) for v in m1[me]]
    inp4, out4 = step("before the errors", m1, 96, "int32", (3,), lo, li, fast=False)
    step("prepared again", m1, 97, "int32", (3,), lo, li, inp4, out4, fast=True)
    rows_out = int(m1[:, me].sum())
    wide = Guarded((rows_out, 6), "int32")
    bad = wide.array[:, ::2] if me == last else out4.array
    out4.big[:] = SENTINEL
    expect_error("reuse: non-contiguous output after a prepared call",
                 lambda: rmacoll.all_to_all_single(bad, inp4, lo, li, comm=comm),
                 [wide, out4], rmacoll.InvalidArgumentError, ValueError,
                 "output is not contiguous", culprit=last)
    if me == last:
        out4.array.flags.writeable = False
    expect_error("reuse: read-only output after a prepared call",
                 lambda: rmacoll.all_to_all_single(out4.array, inp4, lo, li, comm=comm),
                 [out4], rmacoll.InvalidArgumentError, ValueError, "output is read-only",
                 culprit=last)
    out4.array.flags.writeable = True
    step("after the errors", m1, 98, "int32", (3,), lo, li, inp4, out4)

    # torch CPU tensors (the same block kind, keyed by device too)
    try:
        import torch
    except ImportError:
        torch = None
    names = ["torch float32", "torch float32 again", "torch bfloat16 same shape",
             "torch numpy after torch"]
    if torch is None:
        for nm in names:
            record("reuse " + nm, True, "skipped: no torch")
    else:
        def as_bf16(a):
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        ti, to = step(names[0], m1, 99, "float32", (4,), lo, li, fast=False,
                      wrap=torch.from_numpy)
        step(names[1], m1, 100, "float32", (4,), lo, li, ti, to, fast=True,
             wrap=torch.from_numpy)
        step(names[2], m1, 101, "uint16", (4,), lo, li, fast=False, wrap=as_bf16)
        step(names[3], m1, 102, "float32", (4,), lo, li, ti, to, fast=False)
    single.describe = real_describe

    # Communicator.alltoallv with its reused count arrays: counts that
    # change between calls, float counts (int() each, as before)
    for k, (mm, conv) in enumerate(((m1, int), (m2, int), (m1, float))):
        src = rank_input(110 + k, me, int(mm[me].sum()), (), "int64")
        o = Guarded((int(mm[:, me].sum()),), "int64")
        sc = [conv(v) for v in mm[me]]
        sd = [conv(v) for v in np.concatenate([[0], np.cumsum(mm[me])[:-1]])]
        rc = [conv(v) for v in mm[:, me]]
        rd = [conv(v) for v in np.concatenate([[0], np.cumsum(mm[:, me])[:-1]])]
        comm.alltoallv(src, sc, sd, o.array, rc, rd)
        exp = expected_output(mm, 110 + k, me, (), "int64")
        record("reuse alltoallv call %d" % k, o.body() == exp.tobytes() and o.guards_intact())


def memreg_call(comm, seed, out_big, inp_fn, row_shape=(64,), dtype="float32"):
    """all_to_all_single with the output inside out_big (a Guarded whose
    whole buffer may be registered) and the input from inp_fn(rows, dtype)
    (the caller's, maybe registered); checks bytes and guards. Returns the
    number of non-empty buffers of this rank (send, receive)."""
    n, me = comm.size, comm.rank
    m = count_matrix(seed, n)
    rows_in, rows_out = int(m[me].sum()), int(m[:, me].sum())
    inp = inp_fn(rows_in, row_shape, dtype)
    inp[...] = rank_input(seed, me, rows_in, row_shape, dtype)
    out_big.big[...] = SENTINEL
    out = out_big.big[GUARD:GUARD + rows_out * int(np.prod(row_shape)) * np.dtype(dtype).itemsize]
    out = out.view(dtype).reshape((rows_out,) + tuple(row_shape))
    rmacoll.all_to_all_single(out, inp, [int(x) for x in m[:, me]], [int(x) for x in m[me]],
                              comm=comm)
    exp = expected_output(m, seed, me, row_shape, dtype)
    end = GUARD + out.nbytes
    ok = (out.tobytes() == exp.tobytes() and bool(np.all(out_big.big[:GUARD] == SENTINEL))
          and bool(np.all(out_big.big[end:] == SENTINEL)))
    record("memreg a2a seed=%d" % seed, ok, "" if ok else "bytes or guards differ")
    return int(rows_in > 0) + int(rows_out > 0)


def stats_delta(comm, before):
    now = comm.stats()
    return (now["memreg_buffers"] - before["memreg_buffers"],
            now["call_registrations"] - before["call_registrations"])


def scenario_memreg(comm):
    """Communicator.register over two nodes: registered buffers borrow
    (memreg_buffers), unregistered ones register per call
    (call_registrations); bytes exact; handles, errors, TorchSegments'
    bookkeeping on host memory."""
    cap_rows = 64 * comm.size * 6  # rows of the largest output / input
    out_big = Guarded((cap_rows, 64), "float32")
    in_big = np.zeros((cap_rows, 64), dtype=np.float32)

    def inp_fresh(rows, shape, dt):
        return np.empty((rows,) + tuple(shape), dtype=dt)

    def inp_in_big(rows, shape, dt):
        return in_big[:rows]

    # without registration: every non-empty buffer registered per call
    before = comm.stats()
    nbuf = sum(memreg_call(comm, 200 + k, out_big, inp_fresh) for k in range(2))
    got = stats_delta(comm, before)
    record("memreg unregistered calls register per call", got == (0, nbuf),
           "delta (memreg_buffers, call_registrations) %r, want (0, %d)" % (got, nbuf))
    # registered: the array and an (address, nbytes) pair
    r_out = comm.register(out_big.big)
    r_in = comm.register((in_big.__array_interface__["data"][0], in_big.nbytes))
    st = comm.stats()
    want = out_big.big.nbytes + in_big.nbytes
    record("memreg stats count the handles", st["memreg_handles"] == 2
           and st["memreg_bytes"] == want,
           "handles %d bytes %d, want 2 %d" % (st["memreg_handles"], st["memreg_bytes"], want))
    before = comm.stats()
    nbuf = sum(memreg_call(comm, 210 + k, out_big, inp_in_big) for k in range(3))
    got = stats_delta(comm, before)
    record("memreg registered calls borrow", got == (nbuf, 0),
           "delta %r, want (%d, 0)" % (got, nbuf))
    # context manager; deregistered: per call again
    r_in.deregister()
    with r_out:
        record("memreg registration live in its with block", r_out.live, repr(r_out))
    record("memreg registration released by with", not r_out.live, repr(r_out))
    try:
        r_out.deregister()
        record("memreg double deregister raises", False, "no exception")
    except rmacoll.InvalidArgumentError as e:
        record("memreg double deregister raises", "rank %d" % comm.rank in str(e)
               and "not live" in str(e), str(e))
    before = comm.stats()
    nbuf = memreg_call(comm, 220, out_big, inp_in_big)
    got = stats_delta(comm, before)
    record("memreg deregistered calls register per call", got == (0, nbuf),
           "delta %r, want (0, %d)" % (got, nbuf))
    # torch tensors (CPU) when torch is there
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        t_in = torch.zeros((cap_rows, 64), dtype=torch.float32)
        with comm.register(t_in) as r:
            before = comm.stats()
            n_in = memreg_call(comm, 230, out_big,
                               lambda rows, shape, dt: t_in[:rows].numpy())
            got = stats_delta(comm, before)
            # the input borrows; the output (unregistered) registers per call
            m = count_matrix(230, comm.size)
            want = (int(m[comm.rank].sum() > 0), int(m[:, comm.rank].sum() > 0))
            record("memreg torch tensor borrows", got == want and r.nbytes == t_in.numel() * t_in.element_size()
                   and n_in == sum(want), "delta %r, want %r" % (got, want))
    else:
        record("memreg a2a seed=230", True, "skipped: no torch")
        record("memreg torch tensor borrows", True, "skipped: no torch")
    # errors: named, this rank only (local)
    for name, obj in (("empty", np.zeros(0, dtype=np.uint8)),
                      ("non-contiguous", np.zeros((8, 8), dtype=np.float32)[:, ::2]),
                      ("not a buffer", object())):
        try:
            comm.register(obj)
            record("memreg refuses %s" % name, False, "no exception")
        except rmacoll.InvalidArgumentError as e:
            record("memreg refuses %s" % name, "rank %d: register" % comm.rank in str(e),
                   str(e))
    # TorchSegments' bookkeeping with host "segments"
    segs = [np.zeros(4096, dtype=np.uint8) for _ in range(3)]
    shown = [segs[0], segs[1]]

    def snap():
        return [{"address": a.__array_interface__["data"][0], "total_size": a.nbytes,
                 "device": 0} for a in shown]

    base = comm.stats()["memreg_handles"]
    ts = rmacoll.TorchSegments(comm, snapshot=snap)
    ok = len(ts.segments) == 2 and comm.stats()["memreg_handles"] == base + 2
    again = ts.update()
    shown.append(segs[2])
    added = ts.update()
    shown.pop(0)
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ts.update()
    ok = ok and again == 0 and added == 1 and len(ts.segments) == 2 and len(w) == 1
    # a segment that grew in place (expandable_segments): re-registered, no warning
    grown = segs[1].__array_interface__["data"][0]
    shown[0] = segs[1][:2048]  # same start, another size
    with warnings.catch_warnings(record=True) as w2:
        warnings.simplefilter("always")
        ts.update()
    ok = ok and len(w2) == 0 and (grown, 2048) in ts.segments and len(ts.segments) == 2
    ts.close()
    ok = ok and comm.stats()["memreg_handles"] == base
    record("memreg TorchSegments registers each segment once", ok,
           "again %r added %r segments %r warnings %r" % (again, added, ts.segments,
                                                          [str(x.message) for x in w]))
    # one left registered: close() (the destroy) releases it
    comm.register(out_big.big)


SCENARIOS = {
    "data": scenario_data,
    "raw": scenario_raw,
    "errors": scenario_errors,
    "from_env": scenario_from_env,
    "abort": scenario_abort,
    "reuse": scenario_reuse,
    "memreg": scenario_memreg,
    "shrink": scenario_shrink,
}


def main():
    scenario = sys.argv[1]
    status = 0
    try:
        if scenario == "from_env":
            SCENARIOS[scenario](None)
        else:
            uid = rmacoll.UniqueId.from_hex(os.environ["RMACOLL_TEST_UID"])
            with rmacoll.Communicator(RANK, NRANKS, uid) as comm:
                SCENARIOS[scenario](comm)
    except Exception:  # noqa: BLE001 - reported, exit code says so
        traceback.print_exc()
        record("scenario %s ran to the end" % scenario, False, traceback.format_exc()[-2000:])
        status = 1
    if not all(c["ok"] for c in checks):
        status = 1
    sys.stdout.write(json.dumps({"rank": RANK, "size": NRANKS, "checks": checks}) + "\n")
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
