#!/usr/bin/env bash
# On the GPU machine, one call (under 10 minutes):
#  1. builds the checkout (build-ab-new/) and, when .ab-old/ holds older
#     copies of some files (same paths as in the tree), a copy of the
#     checkout with them swapped in (build-ab-old/);
#  2. test_gpu_devcounts (the device-count kernel, ranks as threads) and
#     test_gpu_devcounts_proc (ranks as processes);
#  3. rmacoll-latency of the device-count paths against the host-count
#     graph replay, new and old builds interleaved twice (2 and 4 ranks as
#     threads of one process, one GPU);
#  4. (PARTS with 4) the new tree built with -DRMACOLL_NVL_DC_TRACE
#     (build-ab-trace/): the device-count kernel's mean phase times
#     ("dc-trace" lines, every 512 calls) under graph replay.
# (libfabric shm with CUDA IPC, issue 32: scripts/gpu/shm_ipc_stacks.sh.)
# PARTS (default "2 3") picks the parts after the build. The summary is
# what it prints; every log is under $OUT (default /tmp/dc-ab), or under
# /tmp/dc-ab-logs when LOGS_APART=1 (few files come back from the device).
# Usage: [PARTS="2 3 4"] bash scripts/gpu/dc_ab.sh
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/gpu/common.sh"
gpu_begin /tmp/dc-ab
LOG=$OUT; [ "${LOGS_APART:-0}" = 1 ] && { LOG=/tmp/dc-ab-logs; mkdir -p "$LOG"; }
cd "$top" || exit 1
part() { case " ${PARTS:-2 3} " in *" $1 "*) return 0;; esac; return 1; }
nvidia-smi -L
. scripts/gpu/setup.sh /tmp/sysroot >/dev/null

step "1. builds"
targets=(--target rmacoll rmacoll-latency test_gpu_devcounts test_gpu_devcounts_proc)
cfg() { timeout -k 5 120 cmake -S "$1" -B "$2" -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
          "${@:3}" > "$LOG/cfg-$(basename "$2").log" 2>&1; }
cfg . build-ab-new && timeout -k 5 300 cmake --build build-ab-new -j12 "${targets[@]}" \
  > "$LOG/build-new.log" 2>&1 &
new_pid=$!
trace_pid=
if part 4; then
  cfg . build-ab-trace -DCMAKE_CUDA_FLAGS=-DRMACOLL_NVL_DC_TRACE &&
    timeout -k 5 300 cmake --build build-ab-trace -j4 --target rmacoll-latency \
      > "$LOG/build-trace.log" 2>&1 &
  trace_pid=$!
fi
old=
if [ -d .ab-old ]; then
  rm -rf /tmp/ab-old-src; mkdir -p /tmp/ab-old-src
  tar --exclude='./build*' --exclude=./.devpkgs --exclude=./third_party --exclude=./.ab-old -cf - . |
    tar -xf - -C /tmp/ab-old-src
  cp -r .ab-old/. /tmp/ab-old-src/
  cfg /tmp/ab-old-src "$top/build-ab-old" && timeout -k 5 300 cmake --build build-ab-old -j4 \
    --target rmacoll-latency > "$LOG/build-old.log" 2>&1 && old=build-ab-old
fi
trace=; [ -n "$trace_pid" ] && wait $trace_pid && trace=build-ab-trace
wait $new_pid || { tail -30 "$LOG/build-new.log"; echo "new build FAILED"; exit 1; }
echo "built: build-ab-new${old:+ and $old} (t+$(( $(date +%s) - t0 ))s)"

if part 2; then
  step "2. test_gpu_devcounts (ranks as threads), test_gpu_devcounts_proc (as processes)"
  for t in test_gpu_devcounts test_gpu_devcounts_proc; do
    FI_TCP_IFACE=lo timeout -k 5 150 ./build-ab-new/tests/$t > "$LOG/$t.log" 2>&1
    r=$?; [ $r = 0 ] || rc=1
    grep -vE '^\[ +RUN ' "$LOG/$t.log" | tail -12; echo "$t: rc $r"
  done
fi

if part 3; then
  step "3. rmacoll-latency: device-count paths, new${old:+ against old}"
  for rep in 1 2; do
    for b in build-ab-new $old; do
      for np in 2 4; do
        echo "-- $b np $np (rep $rep)"
        timeout -k 5 60 ./$b/tools/rmacoll-latency -np $np -b 8K -e 512K -f 8 -n 500 -w 50 \
          --path graph_one_launch,graph_device_counts,device_counts > "$LOG/lat-$b-$np-$rep.log" 2>&1
        r=$?; grep -vE "^#|^$" "$LOG/lat-$b-$np-$rep.log" | tail -12
        [ $r = 0 ] || { rc=1; echo "rmacoll-latency $b np $np: rc $r"; }
      done
    done
  done
fi

if part 4; then
  step "4. device-count kernel phases (build-ab-trace, graph replay, 8 KiB)"
  if [ -z "$trace" ]; then
    tail -20 "$LOG/build-trace.log"; echo "trace build FAILED"; rc=1
  else
    for np in 2 4; do
      timeout -k 5 60 ./build-ab-trace/tools/rmacoll-latency -np $np -b 8K -e 8K -n 2048 -w 64 \
        --path graph_one_launch,graph_device_counts > "$LOG/trace-$np.log" 2>&1
      echo "-- np $np: rc $?"; grep -vE "^#|^$" "$LOG/trace-$np.log" | grep -v "dc-trace" | tail -3
      grep "dc-trace" "$LOG/trace-$np.log" | tail -$((2 * np))
    done
  fi
fi

step "done, rc $rc"
exit $rc
