#!/usr/bin/env bash
# On the GPU machine (issue 30 item 2): small device-memory calls through
# the relay over the emulated GPUDirect NIC (plugins/emunic, 48.5 GB/s,
# 3 us), 4 virtual nodes x 4 ranks as processes on the one GPU (MPS when it
# starts), relay on: how the relay's forwards are submitted --
#   ce/1      copy engine, one forward step at a time (merge_max_puts 1)
#   ce/256    copy engine, ready forwards merged into one submission
#   auto/256  merged, and submissions of puts <= nvlink_kernel_threshold
#             as nvlink_kernel launches (transports.intra_node auto)
# Every byte checked by rmacoll-perf. Also scripts/gpu/ce_batch_bench.cu
# (what k copies cost each way). Results in $OUT (default /tmp/relay-small).
#   bash scripts/gpu/relay_small.sh [BUILD_DIR=build-emunic]
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/relay-small}; mkdir -p "$OUT"
b=${1:-build-emunic}
cd "$top" || exit 1
. scripts/gpu/setup.sh /tmp/sysroot >/dev/null
if [ ! -x "$b/tools/rmacoll-perf" ] || [ ! -f "$b/plugins/emunic/librmacoll_emunic.so" ]; then
  timeout -k 5 60 cmake -S . -B "$b" -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_BUILD_EMUNIC=ON \
    > "$OUT/cmake.log" 2>&1 &&
  timeout -k 5 300 cmake --build "$b" -j"$(nproc)" --target rmacoll-perf rmacoll_emunic \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
plugin=$top/$b/plugins/emunic/librmacoll_emunic.so
( timeout -k 5 120 nvcc -O2 -arch=sm_90 -o "$OUT/ce_batch_bench" scripts/gpu/ce_batch_bench.cu &&
  timeout -k 5 120 "$OUT/ce_batch_bench" "${CEB_REPS:-50}" > "$OUT/ce_batch_bench.txt" 2>&1 ) ||
  echo "ce_batch_bench failed"
cat "$OUT/ce_batch_bench.txt"
mps=no
if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/rs-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/rs-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if timeout -k 5 20 nvidia-cuda-mps-control -d; then
    mps=yes; trap 'echo quit | timeout -k 5 10 nvidia-cuda-mps-control' EXIT
  fi
fi
echo "ranks are processes, MPS: $mps"
for v in "ce 1" "ce 256" "auto 256"; do set -- $v
  tag=$1-$2
  echo "==== intra_node $1, merge_max_puts $2"
  RMACOLL_TIMEOUT_MS=20000 RMACOLL_TRANSPORTS_INTER_NODE=plugin:$plugin \
  RMACOLL_EMUNIC_RATE=48.5e9 RMACOLL_EMUNIC_LATENCY_US=3 RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=hmem \
  RMACOLL_TRANSPORTS_INTRA_NODE=$1 RMACOLL_MERGE_MAX_PUTS=$2 \
    timeout -k 5 ${RS_TIMEOUT:-90} "$top/$b/tools/rmacoll-perf" --buffers cuda -np 16 --ppn 4 \
      --dist "${RS_DIST:-uniform}" --relay on -b "${RS_MIN:-16K}" -e "${RS_MAX:-4M}" -f 4 -n 20 -w 3 \
      > "$OUT/perf_$tag.log" 2>&1
  echo "rc $?"; grep -E "^ *#|^ +[0-9]+ " "$OUT/perf_$tag.log" | tail -8
done
