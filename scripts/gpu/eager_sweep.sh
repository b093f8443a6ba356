#!/usr/bin/env bash
# On the GPU machine (16 cores, Open MPI 4.1.6): where the eager path of host
# calls across nodes stops paying (issue 30's 4 MiB cells). With the default
# eager_max_bytes of 1 MiB, a sender's blocks for another node travel inside
# its metadata record whenever they total <= 1 MiB: at 4 MiB per rank that
# is every cell of 4 x 4, 8 x 2 and 16 x 1, and none of 2 x 8 (the only
# shape then near the bare-socket time). For each shape and each value of
# RMACOLL_EAGER_MAX_BYTES, rmacoll-perf (16 ranks as processes, uniform,
# out-of-place time per call, max over ranks, us), alternated REPS times,
# then Open MPI over TCP at the same sizes once per rep.
#   [SHAPES="4x4 8x2 16x1"] [EAGERS="1M 256K 64K 16K 0"] [MIN=64K MAX=16M]
#   [DIST=uniform] [REPS=2] bash scripts/gpu/eager_sweep.sh
# Builds (Release, CUDA off) into /tmp/sc-eager; results under $OUT
# (default /tmp/eager-sweep), one line per run: shape eager rep size:us ...
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/gpu/common.sh"
gpu_begin /tmp/eager-sweep
SHAPES=${SHAPES:-4x4 8x2 16x1}; EAGERS=${EAGERS:-1M 256K 64K 16K 0}
MIN=${MIN:-64K}; MAX=${MAX:-16M}; DIST=${DIST:-uniform}; REPS=${REPS:-2}
. "$top/scripts/gpu/setup.sh" /tmp/sysroot >/dev/null
lib=/tmp/sysroot/usr/lib/x86_64-linux-gnu
rm -f "$lib"/libpmix* "$lib"/libevent* "$lib"/libhwloc* "$lib"/libmunge*
b=/tmp/sc-eager
if [ ! -x $b/tools/rmacoll-mpi-perf ]; then
  step "build"
  ( timeout -k 5 200 cmake -S "$top" -B $b -DCMAKE_BUILD_TYPE=Release \
      -DRMACOLL_ENABLE_CUDA=OFF -DRMACOLL_ENABLE_NCCL=OFF -DRMACOLL_ENABLE_PMIX=OFF \
      -DRMACOLL_BUILD_TESTS=OFF -DRMACOLL_BUILD_EMUNIC=OFF >/dev/null &&
    timeout -k 5 300 cmake --build $b -j"$(nproc)" >/dev/null ) > "$OUT/build.log" 2>&1 ||
    { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
fi
times() { awk '$1 ~ /^[0-9]+$/ && NF > 8 { printf "%s:%s%s ", $1, $6, ($9 != 0 ? "(WRONG " $9 ")" : "") }'; }
step "sweep ($DIST, $MIN..$MAX x4)"
for rep in $(seq "$REPS"); do
  for s in $SHAPES; do
    ppn=${s#*x}
    for e in $EAGERS; do
      t=$(RMACOLL_EAGER_MAX_BYTES=$e FI_TCP_IFACE=lo timeout -k 5 120 $b/tools/rmacoll-perf \
            -np 16 --ppn "$ppn" -b "$MIN" -e "$MAX" -f 4 --dist "$DIST" -n 20 -w 3 -c 1 2>&1 | times)
      echo "$s eager=$e rep $rep: ${t:-failed}"
    done
    t=$(timeout -k 5 120 mpirun -np 16 --bind-to none --allow-run-as-root --mca btl tcp,self \
          $b/tools/rmacoll-mpi-perf -b "$MIN" -e "$MAX" -f 4 --dist "$DIST" -n 20 -w 3 -c 1 \
          2>/dev/null | times)
    echo "$s mpi-tcp rep $rep: ${t:-failed}"
  done
done 2>&1 | tee "$OUT/eager_sweep.txt"
step "done"
