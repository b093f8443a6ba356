#!/usr/bin/env bash
# On the GPU machine (16 cores, Open MPI 4.1.6), one call: issue 30's large
# cells against the loopback TCP ceiling. For each shape NODESxPPN of 16
# ranks, scripts/gpu/tcp_a2a.c moves the alltoall's TCP bytes with bare
# sockets (the pairs across virtual nodes, as rmacoll's network transport
# carries them; and every pair, as Open MPI's TCP BTL does), then
# scripts/gpu/scale16.sh runs rmacoll and Open MPI side by side at the same
# sizes, uniform traffic (every pair the same bytes, so the TCP share of
# each library is exact: (N - PPN) / (N - 1) of MPI's).
#   [SIZES="4M 64M"] [SHAPES="2x8 4x4 8x2 16x1"] bash scripts/gpu/tcp_ceiling.sh
# Results under $OUT (default /tmp/tcp-ceiling).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/gpu/common.sh"
gpu_begin /tmp/tcp-ceiling
SIZES=${SIZES:-4M 64M}; SHAPES=${SHAPES:-2x8 4x4 8x2 16x1}
bytes() { numfmt --from=iec "$1"; }
gcc -O2 -o "$OUT/tcp_a2a" "$top/scripts/gpu/tcp_a2a.c" || exit 1
step "1. bare TCP alltoall, 16 ranks (per rank: SIZE in all; per pair: SIZE / 16)"
for size in $SIZES; do
  pair=$(( $(bytes "$size") / 16 )); iters=20; [ "$pair" -ge 1048576 ] && iters=7
  for s in $SHAPES; do
    ppn=${s#*x}
    echo "size $size shape $s (cross-node pairs): $(timeout 120 "$OUT/tcp_a2a" 16 "$ppn" $pair $iters)"
  done
  echo "size $size every pair (MPI's TCP BTL): $(timeout 120 "$OUT/tcp_a2a" 16 1 $pair $iters)"
done 2>&1 | tee "$OUT/tcp_a2a.txt"
step "2. rmacoll and Open MPI over TCP, uniform"
lo=${SIZES%% *}; hi=${SIZES##* }
DIST=uniform OUT=/tmp/tcp-ceiling-s16 timeout -k 5 420 bash "$top/scripts/gpu/scale16.sh" - "$top" \
  "$SHAPES" "$lo" "$hi" 16 1 2>&1 | grep -vE "^# (JSON|ratio|topology)" | tee "$OUT/s16.txt" | tail -40
step "3. rmacoll alone, uniform, relay on and off, time per call (us, out of place)"
for s in ${RELAY_SHAPES:-4x4 8x2}; do
  for relay in on off; do
    for rep in 1 2; do
      t=$(FI_TCP_IFACE=lo timeout -k 5 120 /tmp/sc-new/tools/rmacoll-perf -np 16 --ppn ${s#*x} \
            -b $lo -e $hi -f 16 --dist uniform --relay $relay -n 20 -w 3 -c 1 2>&1 |
          awk '$1 ~ /^[0-9]+$/ && NF > 8 { printf "%s:%s ", $1, $6 }')
      echo "$s relay $relay rep $rep: $t"
    done
  done
done | tee "$OUT/relay.txt"
step "done"
