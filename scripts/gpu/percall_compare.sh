#!/usr/bin/env bash
# On the GPU machine: per-call time of two trees side by side (issue 29's
# "no measurable change" check), alternated OLD, NEW, OLD, NEW, ... so that
# drift of the machine hits both alike.
#   - rmacoll-latency: device paths, 2 ranks as threads of one process
#     (no time-slicing), 8 KiB .. 64 KiB per rank;
#   - rmacoll-perf: host memory, 2 virtual nodes x 2 ranks as processes over
#     ofi tcp on lo, zipf:1.2, 1 KiB .. 1 MiB per rank.
# Usage: bash scripts/gpu/percall_compare.sh OLD_TREE NEW_TREE [REPS=3]
# Both trees are built Release (CUDA on, tests off) under /tmp/pc-{old,new}.
# Logs and a summary go to $OUT (default /tmp/percall-out).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
old=$(cd "$1" && pwd); new=$(cd "$2" && pwd); reps=${3:-3}
OUT=${OUT:-/tmp/percall-out}; mkdir -p "$OUT"
. "$top/scripts/gpu/setup.sh" /tmp/sysroot >/dev/null
export CUDA_DEVICE_MAX_CONNECTIONS=32
for t in old new; do
  src=$old; [ $t = new ] && src=$new
  ( timeout -k 5 200 cmake -S "$src" -B /tmp/pc-$t -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_BUILD_TESTS=OFF >/dev/null &&
    timeout -k 5 300 cmake --build /tmp/pc-$t -j"$(nproc)" >/dev/null ) > "$OUT/build-$t.log" 2>&1 ||
    { echo "build $t failed"; tail -30 "$OUT/build-$t.log"; exit 1; }
done
for r in $(seq "$reps"); do
  for t in old new; do
    b=/tmp/pc-$t/tools
    timeout -k 5 60 "$b/rmacoll-latency" -np 2 -b 8K -e 64K -f 8 -n 2000 -w 200 \
      --path ce,one_launch 2>&1 | grep -v WARN | sed "s/^/lat $t $r: /" | tee -a "$OUT/lat.log"
    timeout -k 5 90 "$b/rmacoll-perf" -np 4 --ppn 2 -b 1K -e 1M -f 32 -n 500 -w 50 \
      --no-check 2>&1 | grep -E '^ +[0-9]' | sed "s/^/host $t $r: /" | tee -a "$OUT/host.log"
  done
done
echo "== summary: median per size and path (us)" | tee "$OUT/summary.txt"
python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt"
import sys, re, statistics, collections
out = sys.argv[1]
d = collections.defaultdict(list)
for line in open(f"{out}/host.log"):
    m = re.match(r"host (\w+) \d+: +(\d+) +\d+ +\S+ +\S+ +\S+ +([\d.]+)", line)
    if m: d[("host 2x2", m.group(2), m.group(1))].append(float(m.group(3)))
for line in open(f"{out}/lat.log"):
    m = re.match(r"lat (\w+) \d+: (.*)", line)
    if not m: continue
    f = m.group(2).split()
    # path size per-peer pipelined synced ...: the pipelined column
    if len(f) >= 5 and f[1].isdigit():
        try: d[("dev " + f[0], f[1], m.group(1))].append(float(f[3]))
        except ValueError: pass
keys = sorted({k[:2] for k in d}, key=lambda k: (k[0], int(k[1])))
print(f"{'what':14} {'bytes':>9} {'old':>9} {'new':>9} {'new/old':>8}")
for k in keys:
    o, n = d.get(k + ("old",)), d.get(k + ("new",))
    if o and n:
        mo, mn = statistics.median(o), statistics.median(n)
        print(f"{k[0]:14} {k[1]:>9} {mo:9.2f} {mn:9.2f} {mn/mo:8.3f}")
PY
