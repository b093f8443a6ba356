#!/usr/bin/env bash
# On the GPU machine, after scripts/gpu/check.sh built build/: per-call
# latency of every device path (issue 14), ranks as threads of one process
# (no time-slicing, no MPS needed), 2 ranks (device and host signal
# words) and 4 ranks (device words), 8 KiB .. 512 KiB.
# Logs go to $OUT (or ./gpu-out). Usage: bash scripts/gpu/latency.sh
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$top/gpu-out}
mkdir -p "$out"
. "$top/scripts/gpu/setup.sh" /tmp/sysroot >/dev/null
export CUDA_DEVICE_MAX_CONNECTIONS=32
# signal words in device memory (the default), then in the host control
# window (RMACOLL_DEVICE_SIGNALS=0, as before issue 14's device words) for
# comparison; the last column of every row says which the calls used
for np in 2 4; do
  for words in device host; do
    [ $np = 4 ] && [ $words = host ] && continue
    if [ $words = host ]; then export RMACOLL_DEVICE_SIGNALS=0; else unset RMACOLL_DEVICE_SIGNALS; fi
    timeout 240 "$top/build/tools/rmacoll-latency" -np $np -b 8K -e 512K -f 8 -n 1000 -w 100 \
        --graph-calls 100 --path ce,nvlink_kernel,one_launch,graph_ce,graph_one_launch 2>&1 |
      grep -v "WARN config" | tee "$out/lat$np-$words.log"
  done
done
unset RMACOLL_DEVICE_SIGNALS
# rmacoll-perf's graph replay (-G, issue 14 item 4): 100 calls per graph,
# one launch per timed iteration, every iteration checked; ranks as
# processes (spawned), uniform counts
timeout 240 "$top/build/tools/rmacoll-perf" --buffers cuda -np 2 --dist uniform \
    -b 8K -e 512K -f 8 -n 20 -w 5 -m 100 -G 1 2>&1 | grep -v "WARN config" |
  tee "$out/perf-graph.log"
