#!/usr/bin/env bash
# On the GPU machine (16 cores, Open MPI 4.1.6): issue 30's host-memory
# scale runs, two trees side by side. 16 ranks as processes, one core each,
# virtual nodes over ofi tcp on lo; the MPI baseline is Open MPI over TCP
# (MPI_BTL=tcp,self) on multi-node shapes and over its shared memory on
# 1 x 16. Each shape runs scripts/compare_mpi.sh for OLD then NEW (each
# with its own MPI runs, back to back), so both trees meet the same machine.
#   [PERCALL="2x8 4x4 8x2 16x1"] bash scripts/gpu/scale16.sh OLD_TREE NEW_TREE "2x8 4x4" [MIN MAX STEP REPS]
# OLD_TREE "-": the new tree only (against MPI), when the old one's figures
# are on record already.
# PERCALL: also the time per call at 1 KiB per pair on those shapes (below).
# Shapes: NODESxPPN with NODES*PPN = 16; "1x16" runs against MPI shm.
# Builds (Release, CUDA and PMIx off) go to /tmp/sc-{old,new}, made afresh
# each run (SC_KEEP=1 reuses them); results to
# $OUT (default /tmp/scale16-out), summary in $OUT/summary.txt.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
trees="old new"; old=-
if [ "$1" = - ]; then trees=new; else old=$(cd "$1" && pwd); fi
new=$(cd "$2" && pwd); shapes=$3
MIN=${4:-1K}; MAX=${5:-4M}; STEP=${6:-16}; REPS=${7:-2}
OUT=${OUT:-/tmp/scale16-out}; mkdir -p "$OUT"
. "$top/scripts/gpu/setup.sh" /tmp/sysroot >/dev/null
# Open MPI's own PMIx / libevent / hwloc, not the unpacked Debian copies
lib=/tmp/sysroot/usr/lib/x86_64-linux-gnu
rm -f "$lib"/libpmix* "$lib"/libevent* "$lib"/libhwloc* "$lib"/libmunge*
for t in $trees; do
  src=$old; [ $t = new ] && src=$new
  # a build dir left by an earlier run may hold another tree's binaries (the
  # machine's /tmp can outlive a session): rebuilt unless SC_KEEP=1
  if [ "${SC_KEEP:-0}" = 1 ] && [ -x /tmp/sc-$t/tools/rmacoll-mpi-perf ]; then continue; fi
  rm -rf /tmp/sc-$t
  ( timeout -k 5 200 cmake -S "$src" -B /tmp/sc-$t -DCMAKE_BUILD_TYPE=Release \
      -DRMACOLL_ENABLE_CUDA=OFF -DRMACOLL_ENABLE_NCCL=OFF -DRMACOLL_ENABLE_PMIX=OFF \
      -DRMACOLL_BUILD_TESTS=OFF -DRMACOLL_BUILD_EMUNIC=OFF >/dev/null &&
    timeout -k 5 300 cmake --build /tmp/sc-$t -j"$(nproc)" >/dev/null ) > "$OUT/build-$t.log" 2>&1 ||
    { echo "build $t failed"; tail -30 "$OUT/build-$t.log"; exit 1; }
done
for s in $shapes; do
  btl=tcp,self; [ "${s%x*}" = 1 ] && btl=""
  for t in $trees; do
    echo "== $s $t (MPI_BTL=${btl:-default: shared memory})"
    NP=16 TOPOLOGIES=$s MPI_BTL=$btl MIN=$MIN MAX=$MAX STEP=$STEP REPS=$REPS \
      ITERS_BYTES=64M ITERS_MAX=2000 OUT="$OUT/$s-$t" \
      timeout -k 5 400 bash "$top/scripts/compare_mpi.sh" /tmp/sc-$t 2>&1 |
      grep -v "^$" | tee "$OUT/$s-$t.txt"
  done
done 2>&1 | tee -a "$OUT/summary.txt"
# Time per call against the number of nodes at 1 KiB per pair (uniform, 16
# ranks: 16 KiB per rank), both trees and Open MPI over TCP, alternated,
# REPS times; the out-of-place time column (us, max over ranks) of each run.
if [ -n "${PERCALL:-}" ]; then
  echo "== per call, 1 KiB per pair (uniform, -b 16K), us: shape tree rep time"
  for rep in $(seq "$REPS"); do
    for s in $PERCALL; do
      ppn=${s#*x}
      for t in $trees; do
        us=$(timeout -k 5 120 /tmp/sc-$t/tools/rmacoll-perf -np 16 --ppn "$ppn" -b 16K -e 16K \
               --dist uniform -n 2000 -w 200 -c 0 -a 3 -q 2>&1 | awk '$1 == 16384 { print $6 }')
        echo "percall $s $t $rep ${us:-failed}"
      done
      mpirun -np 16 --bind-to none --allow-run-as-root --mca btl tcp,self \
        /tmp/sc-new/tools/rmacoll-mpi-perf -b 16K -e 16K --dist uniform -n 2000 -w 200 -c 0 -a 3 -q \
        2>/dev/null | awk -v s="$s" -v r="$rep" '$1 == 16384 { print "percall", s, "mpi-tcp", r, $6 }'
    done
  done 2>&1 | tee -a "$OUT/summary.txt"
fi
