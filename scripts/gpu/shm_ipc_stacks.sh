#!/usr/bin/env bash
# On the GPU machine: where rmacoll over libfabric shm with CUDA IPC
# (ofi.hmem_device_only=1, issue 32) stalls. Builds libfabric with CUDA
# (third_party/ of the checkout) into /tmp/fi-cuda and the checkout into
# build-ab-new/ (when missing), scripts/gpu/stackdump.c as an LD_PRELOAD,
# runs rmacoll-perf (4 ranks as processes, 2 virtual nodes, registered
# device path, 16 and 64 MiB; MODES below), and 8 s and 16 s after its
# start, when it still runs, has every thread of every rank write its stack
# (SIGUSR2); frames in static functions are named with addr2line. One log:
# $OUT/shm_ipc_stacks.txt.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/gpu/common.sh"
gpu_begin /tmp/shm-ipc-stacks
cd "$top" || exit 1
. scripts/gpu/setup.sh /tmp/sysroot >/dev/null
fi=/tmp/fi-cuda
[ -x $fi/bin/fi_info ] || (LD_LIBRARY_PATH= timeout 240 bash third_party/build-libfabric-cuda.sh $fi \
  > /tmp/fi.log 2>&1) &
# always (incremental when build-ab-new/ is left from an earlier call)
timeout -k 5 120 cmake -S . -B build-ab-new -DCMAKE_CUDA_ARCHITECTURES=90 > /tmp/cfg.log 2>&1 &&
  timeout -k 5 300 cmake --build build-ab-new -j12 --target rmacoll rmacoll-perf > /tmp/build.log 2>&1 ||
  { tail -20 /tmp/cfg.log /tmp/build.log; exit 1; }
wait
[ -x $fi/bin/fi_info ] || { tail -20 /tmp/fi.log; echo "no libfabric with CUDA"; exit 1; }
gcc -O1 -g -shared -fPIC -o /tmp/stackdump.so scripts/gpu/stackdump.c -ldl || exit 1
# MODES: "donly1 donly0 staged" by default: the registered path with
# ofi.hmem_device_only on (CUDA IPC) and off (shm's host bounce), and the
# staged path; SIZES of -b/-e (default 16M 64M), DIST (default uniform),
# ITERS (default 5)
run_mode() { # $1 mode, $2 log
  local donly=0 path=hmem
  case $1 in donly1) donly=1;; staged) path=staged;; esac
  LD_PRELOAD=/tmp/stackdump.so LD_LIBRARY_PATH=$fi/lib:$LD_LIBRARY_PATH FI_LOG_LEVEL=warn FI_LOG_PROV=shm \
  RMACOLL_LOG_LEVEL=info RMACOLL_TIMEOUT_MS=20000 RMACOLL_HEARTBEAT_MS=${HB_MS:-5000} \
  RMACOLL_TRANSPORTS_INTER_NODE=ofi RMACOLL_OFI_PROVIDER=shm RMACOLL_OFI_HMEM_DEVICE_ONLY=$donly \
  RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=$path \
    timeout -k 5 90 ./build-ab-new/tools/rmacoll-perf --buffers cuda -np 4 --ppn 2 \
      -b ${SIZES_B:-16M} -e ${SIZES_E:-64M} -f 4 -n ${ITERS:-5} -w 2 --dist ${DIST:-uniform} > "$2" 2>&1
}
for mode in ${MODES:-donly1 donly0 staged}; do
  log=/tmp/shm_ipc_$mode.log
  run_mode $mode "$log" &
  ppid=$!
  for at in 8 16; do
    for i in $(seq 1 8); do sleep 1; kill -0 $ppid 2>/dev/null || break 2; done
    echo "== stacks at ${at} s" >> "$log"
    for p in $(pgrep -f "rmacoll-perf --buffers cuda"); do
      for t in $(ls /proc/$p/task 2>/dev/null); do kill -USR2 $t 2>/dev/null; sleep 0.05; done
    done
    sleep 1
  done
  wait $ppid; r=$?
  {
    echo "=== $mode (${DIST:-uniform}): rmacoll-perf rc $r"
    grep -vE "^stack " "$log" | grep -iE "error|stalled|timed out|own call|not returned|warm-up|staged|^ +[0-9]+ |^==" |
      sed -E 's/^[^ ]+:[0-9]+:[0-9]+ //' | awk '!seen[$0]++' | head -30 | cut -c1-300
    # the stacks, static frames named
    grep -E "^stack " "$log" | while read -r _ who fr sym rest; do
      if [ "$sym" = "?" ]; then
        obj=${rest%+0x*}; off=0x${rest##*+0x}
        name=$(addr2line -f -C -e "$obj" "$off" 2>/dev/null | head -1)
        echo "$who $fr ${name:-?} ($(basename "$obj")+$off)"
      else
        echo "$who $fr $sym $rest"
      fi
    done | grep -vE "stackdump|__restore_rt" | head -300
  } >> "$OUT/shm_ipc_stacks.txt" 2>&1
done
grep -vE "^[0-9]+/[0-9]+ #" "$OUT/shm_ipc_stacks.txt" | head -80
