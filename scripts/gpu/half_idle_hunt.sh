#!/usr/bin/env bash
# On the GPU machine, in one call: the 8-rank half_idle.txt hang of
# test_gpu_threads (about one run in six) under five settings, each
# RMACOLL_TEST_REPEAT runs of the case under ce and nvlink_kernel
# (test_half_idle_repeat alone), each with its own time limit (a hang
# ends the binary about 30 s in: the idle ranks time out after 20 s, the
# others' stream waits give up 10 s later, after one of them tried a
# memset and two copies on a fresh stream: "completed" = the GPU still
# takes work, the hung waits lack a value; "did not complete" = the new
# stream is queued behind the hung ones).
#   base      as the suite runs it (CUDA_DEVICE_MAX_CONNECTIONS=32)
#   trace     RMACOLL_TRACE_STREAM=1, then scripts/stream_trace_check.py
#             on the log: a wait no write reaches / a copy into signal
#             words / a wrong same-process import, or "every wait has a
#             write that reaches it" (then the values are right)
#   conn2     CUDA_DEVICE_MAX_CONNECTIONS=2 (streams share hardware
#             queues: hangs here on every run point at queue sharing)
#   eager     CUDA_MODULE_LOADING=EAGER (lazy kernel loading ruled in/out)
#   hostsig   RMACOLL_DEVICE_SIGNALS=0 (device-resident words ruled in/out)
# Logs go to $OUT (or ./gpu-out); one summary line per setting on stdout.
# Usage: bash scripts/gpu/half_idle_hunt.sh [REPEAT (default 12)] [SETTINGS]
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$top/gpu-out}
reps=${1:-12}
settings=${2:-base trace conn2 eager hostsig}
mkdir -p "$out"
cd "$top"
. "$top/scripts/gpu/setup.sh" /tmp/sysroot >/dev/null
if ! { timeout 300 cmake -S . -B build -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
         >"$out/cfg.log" 2>&1 &&
       timeout 300 cmake --build build -j"$(nproc)" --target test_gpu_threads \
         >"$out/build.log" 2>&1; }; then
  tail -40 "$out/cfg.log" "$out/build.log"; exit 1
fi
for s in $settings; do
  env=(RMACOLL_TEST_FILTER=test_half_idle_repeat RMACOLL_TEST_REPEAT="$reps")
  case $s in
    base) ;;
    trace) env+=(RMACOLL_TRACE_STREAM=1) ;;
    conn2) env+=(CUDA_DEVICE_MAX_CONNECTIONS=2) ;;
    eager) env+=(CUDA_MODULE_LOADING=EAGER) ;;
    hostsig) env+=(RMACOLL_DEVICE_SIGNALS=0) ;;
    *) echo "unknown setting $s"; continue ;;
  esac
  t0=$(date +%s)
  timeout 100 env "${env[@]}" ./build/tests/test_gpu_threads >"$out/$s.log" 2>&1
  rc=$?
  runs=$(grep -c "runs passed" "$out/$s.log")
  echo "$s: rc $rc in $(( $(date +%s) - t0 )) s, $runs of 2 transports passed $reps runs;" \
       "$(grep -m1 -E 'did not drain|timed out|ranks failed' "$out/$s.log" || echo 'no hang')"
  grep -h "fresh-stream probe" "$out/$s.log" | sed 's/^/  /'
  if [ "$s" = trace ]; then
    python3 scripts/stream_trace_check.py "$out/$s.log" >"$out/trace_check.txt" 2>&1
    echo "  trace check (rc $?): $(head -3 "$out/trace_check.txt" | tr '\n' ' ')"
  fi
done
