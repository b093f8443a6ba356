#!/usr/bin/env python3
"""stream_trace_check.py - reads the lines RMACOLL_TRACE_STREAM=1 makes the
CUDA transports print (stderr of a run; other lines are skipped) and reports
what can make a stream wait forever:

  - a wait whose value no traced write to that word reaches (a word is
    (owner rank, index, device-resident or not); a write names its target
    rank, a wait its own rank, so this holds across processes too);
  - a copy whose destination overlaps a rank's device-resident signal words
    (addresses are compared as printed: valid for ranks that are threads of
    one process, where every rank prints the same address for an array);
  - an import whose address is not the exporter's base + offset although
    the exporter is this process (same=1).

Several communicators in one log (a test creating them again and again):
each rank's words are counted per communicator, the k-th one a rank
creates (its transports' k-th "dwords peer=0" lines) matching every other
rank's k-th one, as for ranks created together.

Only the split stream path is traced (ce, nvlink_kernel's kernel per
queue): run without RMACOLL_NVL_ONE_LAUNCH=1, whose kernel polls and
signals inside one launch.

Usage: stream_trace_check.py [LOG ...]   (stdin without arguments)
Exit status: 0 nothing found, 1 something reported.
"""
import collections
import re
import sys

LINE = re.compile(r"rmacoll-trace: (\S+) r=(\d+) (\w+)(.*)$")
KV = re.compile(r"(\w+)=(\S+)")


def num(v):
    return int(v, 16) if v.startswith("0x") else int(v)


def main(argv):
    files = [open(p, errors="replace") for p in argv[1:]] or [sys.stdin]
    writes = collections.defaultdict(list)   # word -> [(value, writer)]
    waits = []                               # (rank, word, value, seq)
    copies = []                              # (rank, peer, dst, bytes, seq)
    arrays = collections.defaultdict(dict)   # communicator -> owner -> (base, n)
    last = collections.defaultdict(lambda: collections.deque(maxlen=6))
    gen = collections.Counter()              # (transport, rank) -> communicators
    problems = 0
    seq = 0
    for f in files:
        for raw in f:
            m = LINE.search(raw)
            if not m:
                continue
            seq += 1
            name, rank, op, rest = m.group(1), int(m.group(2)), m.group(3), m.group(4)
            kv = dict(KV.findall(rest))
            last[rank].append("%s %s%s" % (name, op, rest))
            if op == "dwords" and kv.get("peer") == "0":
                gen[(name, rank)] += 1
            # the rank's communicator: each of its transports counts them
            # (ce and nvlink_kernel share the words: one writes, the
            # other may wait)
            g = max(v for (t, r), v in gen.items() if r == rank) if any(
                r == rank for _, r in gen) else 0
            if op == "write":
                word = (g, int(kv["peer"]), int(kv["idx"]), int(kv["dev"]))
                writes[word].append((num(kv["val"]), rank))
            elif op == "wait":
                word = (g, rank, int(kv["idx"]), int(kv["dev"]))
                waits.append((rank, word, num(kv["geq"]), seq))
            elif op == "copy":
                copies.append((rank, g, int(kv["peer"]), num(kv["dst"]),
                               num(kv["bytes"])))
            elif op == "dwords":
                base, n = num(kv["base"]), int(kv["n"])
                if base:
                    arrays[g][int(kv["peer"])] = (base, n)
            elif op == "import" and kv.get("same") == "1":
                want = num(kv["base"]) + num(kv["off"])
                if num(kv["addr"]) != want:
                    problems += 1
                    print("rank %d: import of rank %s's allocation at %s gave 0x%x, not 0x%x"
                          % (rank, kv["peer"], kv["base"], num(kv["addr"]), want))
    for rank, word, value, _ in waits:
        got = max((v for v, _ in writes.get(word, [])), default=None)
        if got is None or got < value:
            problems += 1
            print("rank %d (communicator %d): waits for word %d of rank %d (%s) >= %d; "
                  "highest write: %s"
                  % (rank, word[0], word[2], word[1], "device" if word[3] else "host", value,
                     "none" if got is None else "%d by rank(s) %s" % (
                         got, sorted({w for v, w in writes[word] if v == got}))))
    for rank, comm, peer, dst, nbytes in copies:
        for owner, (base, n) in arrays[comm].items():
            if dst < base + 8 * n and base < dst + nbytes:
                problems += 1
                print("rank %d: a %d-byte copy to rank %d at 0x%x lands in rank %d's "
                      "device signal words [0x%x, 0x%x)"
                      % (rank, nbytes, peer, dst, owner, base, base + 8 * n))
    if problems:
        print("last traced operations per rank:")
        for rank in sorted(last):
            for op in last[rank]:
                print("  rank %d: %s" % (rank, op))
    else:
        print("%d waits, %d words written, %d copies: every wait has a write that "
              "reaches it, no copy lands in signal words" % (len(waits), len(writes),
                                                             len(copies)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
