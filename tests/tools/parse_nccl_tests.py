#!/usr/bin/env python3
"""Parse rmacoll-perf's text output the way parsers written for nccl-tests'
alltoall_perf output do, and fail if any of them would.

Three parsers' rules are applied (re-implemented here from their logic):
 - SuperBench's nccl-bw benchmark (microsoft/superbenchmark,
   cuda_nccl_bw_performance.py): the rows lie between the line containing
   "out-of-place" and the line containing "Out of bounds values"; the
   column header line holding "time" and "busbw" gives the indices, counted
   from the end of the line for out-of-place; a row starts with a number and
   its out-of-place time/algbw/busbw must be floats.
 - FlagPerf's scripts: `grep "# Avg bus bandwidth" | awk '{print $NF}'`
   must give a float.
 - nccl-tests' own parseRankInfo (src/util.cu) for the "# Using devices"
   lines: "#  Rank %d Group %d Pid %d on %s device %d [%s] %s".

SuperBench's rule needs all 13 fields in a row: rmacoll-perf prints them
with --in-place na (N/A in the in-place columns); its default leaves the
in-place variant blank as nccl-tests leaves a variant it does not measure
(32 spaces), which this rule refuses ("row has 9 fields"), as SuperBench
would misread it. nccl-tests' own format: tests/tools/nccl_tests_format.py.

Usage: rmacoll-perf ... | parse_nccl_tests.py [--min-rows N] [--ranks N]
Exit 0 and a summary on success; 1 and the reason otherwise.
"""
import re
import sys


def fail(msg):
    print("parse_nccl_tests: FAIL: " + msg)
    sys.exit(1)


def main():
    min_rows, ranks = 1, None
    args = sys.argv[1:]
    while args:
        a = args.pop(0)
        if a == "--min-rows":
            min_rows = int(args.pop(0))
        elif a == "--ranks":
            ranks = int(args.pop(0))
        else:
            fail("unknown argument " + a)
    text = sys.stdin.read()
    lines = text.splitlines()

    # SuperBench
    oop = [i for i, l in enumerate(lines) if "out-of-place" in l]
    oob = [i for i, l in enumerate(lines) if "Out of bounds values" in l]
    if not oop or not oob:
        fail("no 'out-of-place' header or no 'Out of bounds values' line")
    body = lines[oop[-1] + 1:oob[-1]]
    idx = None
    for l in body:
        if "time" in l and "busbw" in l:
            f = re.sub(r" +", " ", l[1:].strip(" ")).split(" ")
            size_i = f.index("size")
            idx = {k: f.index(k) - len(f) for k in ("time", "algbw", "busbw")}
            idx_in = {k: -1 - list(reversed(f)).index(k)
                      for k in ("time", "algbw", "busbw")}
            ncols = len(f)
            break
    if idx is None:
        fail("no column header with 'time' and 'busbw'")
    rows = []
    for l in body:
        f = re.sub(r" +", " ", l.strip(" ")).split(" ")
        if not f or not re.match(r"\d+", f[0]):
            continue
        if len(f) != ncols:
            fail("row has %d fields, header %d: %r" % (len(f), ncols, l))
        size = int(f[size_i])
        try:
            vals = {k: float(f[i]) for k, i in idx.items()}
        except ValueError:
            fail("out-of-place time/algbw/busbw not numbers: %r" % l)
        for k, i in idx_in.items():
            if f[i] != "N/A":
                float(f[i])
        rows.append((size, vals))
    if len(rows) < min_rows:
        fail("%d rows, expected at least %d" % (len(rows), min_rows))

    # FlagPerf
    avg = [l for l in lines if "# Avg bus bandwidth" in l]
    if len(avg) != 1:
        fail("expected one '# Avg bus bandwidth' line, got %d" % len(avg))
    avg_bw = float(avg[0].split()[-1])

    # nccl-tests' rank lines
    rank_re = re.compile(r"^#  Rank +(-?\d+) Group +(\d+) Pid +(\d+) on +(\S+) "
                         r"device +(-?\d+) \[([^\]]+)\] (.+)$")
    rank_lines = [rank_re.match(l) for l in lines if l.startswith("#  Rank")]
    if any(m is None for m in rank_lines):
        fail("a '#  Rank' line does not parse")
    if ranks is not None and len(rank_lines) != ranks:
        fail("%d rank lines, expected %d" % (len(rank_lines), ranks))
    if "# Using devices" not in lines:
        fail("no '# Using devices' line")

    ok = [l for l in lines if l.startswith("# Out of bounds values : 0 OK")]
    if not ok:
        fail("out of bounds values not '0 OK'")
    if not any(l.startswith("# Collective test concluded: ") for l in lines):
        fail("no '# Collective test concluded' line")
    print("parse_nccl_tests: ok: %d rows (%d..%d bytes), %d ranks, avg busbw %g"
          % (len(rows), rows[0][0], rows[-1][0], len(rank_lines), avg_bw))


if __name__ == "__main__":
    main()
