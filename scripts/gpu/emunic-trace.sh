#!/usr/bin/env bash
# On the GPU machine (issue 32): where a device call across virtual nodes
# over the emulated NIC (plugins/emunic) spends its time, and the
# test_cross_node_emunic run with its whole log. Results under $OUT
# (default /tmp/emunic-trace), a summary in $OUT/summary.txt.
#  1. builds rmacoll with CUDA and the plugin (build-emunic/, as emunic.sh);
#  2. test_gpu_e2e test_cross_node_emunic (EMUNIC_TEST=0 skips it), whole
#     log kept;
#  3. rmacoll-perf, device memory, 2 virtual nodes x 2 ranks, 1 MiB per
#     rank, uniform, relay on, uncapped and 48.5 GB/s, at log level TRACE:
#     the call's host stages (validate, metadata, plan, agreement, enqueue),
#     the worker's (woke, GO, READY, data), the drain, and emunic's post ->
#     signal times; means per stage over the timed calls of every rank;
#     before it, EMUNIC_CHECK="2:zipf:1.2:on:0 4:uniform:off:48.5e9 ...":
#     1M..64M rows of those configurations with rmacoll's errors shown.
# Usage: bash scripts/gpu/emunic-trace.sh   (OUT=dir, EMUNIC_MPS=0: no MPS,
#   EMUNIC_TRACE=0: no step 3, EMUNIC_TEST_TIMEOUT=s for step 2, and
#   RMACOLL_TEST_CASES=SUBSTRING limits its case files)
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/emunic-trace}
mkdir -p "$OUT"
exec > >(tee "$OUT/trace.log") 2>&1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
summary=()
note() { summary+=("$*"); echo ">> $*"; }
cd "$top" || exit 1
nvidia-smi -L || true

echo "==== build (t+$(el)s)"
. "$top/scripts/gpu/setup.sh" /tmp/sysroot
timeout -k 5 60 cmake -S . -B build-emunic -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
  -DRMACOLL_BUILD_EMUNIC=ON > "$OUT/cmake.log" 2>&1 &&
timeout -k 5 240 cmake --build build-emunic -j"$(nproc)" > "$OUT/build.log" 2>&1
r=$?
plugin=$top/build-emunic/plugins/emunic/librmacoll_emunic.so
if [ $r != 0 ] || [ ! -f "$plugin" ]; then
  tail -30 "$OUT/cmake.log" "$OUT/build.log"
  note "BUILD FAILED ($r)"
  printf '%s\n' "${summary[@]}" > "$OUT/summary.txt"
  exit 1
fi
note "build ok (t+$(el)s)"
perf=$top/build-emunic/tools/rmacoll-perf

if [ "${EMUNIC_TEST:-1}" = 1 ]; then
  echo "==== test_cross_node_emunic (t+$(el)s)"
  RMACOLL_TEST_FILTER=test_cross_node_emunic timeout -k 5 "${EMUNIC_TEST_TIMEOUT:-200}" ./build-emunic/tests/test_gpu_e2e \
    > "$OUT/test_cross_node_emunic.log" 2>&1
  r=$?
  grep -nE "ERROR|WARN|rank [0-9]+ \(|exit [0-9]|FAILED|PASSED|case " \
    "$OUT/test_cross_node_emunic.log" | head -40
  note "test_gpu_e2e test_cross_node_emunic: rc $r"
fi

mps=no
if [ "${EMUNIC_MPS:-1}" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/emunic-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/emunic-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if timeout -k 5 20 nvidia-cuda-mps-control -d; then
    mps=yes
    trap 'echo quit | timeout -k 5 10 nvidia-cuda-mps-control' EXIT
  else
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
fi
note "MPS: $mps"

# means of the TRACE stage lines of one log
stages() {
  awk '
    /call [0-9]+: validate/ {
      for (i = 1; i <= NF; i++) {
        if ($i == "validate") v += $(i+1); if ($i == "metadata") m += $(i+1);
        if ($i == "plan") p += $(i+1); if ($i == "agreement") a += $(i+1);
        if ($i == "data") d += $(i+1);
      }
      nh++ }
    /worker: woke/ {
      for (i = 1; i <= NF; i++) {
        if ($i == "woke") w += $(i+1); if ($i == "(GO)") g += substr($(i+1), 2);
        if ($i == "READY") r += substr($(i+1), 2); if ($i == "(data)") dd += substr($(i+1), 2);
        if ($i == "total") tt += $(i+1); if ($i == "since") gap += $(i-2);
      }
      nw++ }
    /drained:/ { for (i = 1; i <= NF; i++) if ($i == "drained:") dr += $(i+1); nd++ }
    /emunic: rank .* post to signal/ { print "   " $0 }
    END {
      if (nh) printf "   host part (%d calls): validate %.1f, metadata %.1f, plan %.1f, agreement %.1f, enqueue %.1f us\n", nh, v/nh, m/nh, p/nh, a/nh, d/nh
      if (nw) printf "   worker (%d jobs): woke %.1f, GO %.1f, READY %.1f, data %.1f, total %.1f us; gap since the last job %.1f us\n", nw, w/nw, g/nw, r/nw, dd/nw, tt/nw, gap/nw
      if (nd) printf "   drain (%d): %.1f us waiting for COPIED\n", nd, dr/nd
    }' "$1" | sed -E 's/^ +[^ ]+:[0-9]+:[0-9]+ \[[0-9]+\] rmacoll DEBUG transport: /   /'
}

run_perf() { # tag rate extra-env...
  local tag=$1 rate=$2; shift 2
  echo "---- $tag (t+$(el)s)"
  env "$@" RMACOLL_LOG_LEVEL=trace RMACOLL_LOG_SUBSYSTEMS=core,transport RMACOLL_TIMEOUT_MS=15000 \
    RMACOLL_TRANSPORTS_INTER_NODE=plugin:$plugin RMACOLL_EMUNIC_RATE=$rate RMACOLL_EMUNIC_LATENCY_US=3 \
    RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=hmem \
    timeout -k 5 60 "$perf" --buffers cuda -np 4 --ppn 2 --dist uniform --relay on \
      -b 1M -e 1M -n 20 -w 5 > "$OUT/perf_$tag.log" 2>&1
  local r=$?
  grep -E "^ +[0-9]+ " "$OUT/perf_$tag.log"
  stages "$OUT/perf_$tag.log" | tee "$OUT/stages_$tag.txt"
  note "$tag: rc $r; $(grep -E '^ +[0-9]+ ' "$OUT/perf_$tag.log" | awk '{printf "%s B %s us; ", $1, $6}')"
}
# EMUNIC_CHECK="ppn:dist:relay:rate ...": rmacoll-perf rows 1M..64M of those
# configurations with rmacoll's errors shown (every subsystem, WARN)
check_perf() { # ppn dist relay rate
  local tag="check_ppn$1_${2/:/}_relay$3_rate$4"
  echo "---- $tag (t+$(el)s)"
  RMACOLL_LOG_LEVEL=warn RMACOLL_LOG_SUBSYSTEMS=all RMACOLL_TIMEOUT_MS=15000 \
  RMACOLL_TRANSPORTS_INTER_NODE=plugin:$plugin RMACOLL_EMUNIC_RATE=$4 RMACOLL_EMUNIC_LATENCY_US=3 \
  RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=hmem \
    timeout -k 5 60 "$perf" --buffers cuda -np $(( $1 * 2 )) --ppn $1 --dist "$2" --relay $3 \
      -b 1M -e 64M -f 4 -n 3 -w 1 > "$OUT/perf_$tag.log" 2>&1
  local r=$?
  grep -E "^ +[0-9]+ |ERROR|WARN|wrong" "$OUT/perf_$tag.log" | sed -E 's/^[^ ]+:[0-9]+:[0-9]+ //' | \
    awk '!seen[$0]++' | head -14
  note "$tag: rc $r$([ $r != 0 ] && grep -m1 ERROR "$OUT/perf_$tag.log" | sed -E 's/^[^ ]+:[0-9]+:[0-9]+ /: /')"
}
for c in ${EMUNIC_CHECK:-}; do
  IFS=: read -r c_ppn c_dist c_dist2 c_relay c_rate <<< "$c"
  # dist may hold a colon (zipf:1.2): 5 fields then, else 4
  if [ -z "$c_rate" ]; then c_rate=$c_relay; c_relay=$c_dist2; else c_dist=$c_dist:$c_dist2; fi
  check_perf "$c_ppn" "$c_dist" "$c_relay" "$c_rate"
done
if [ "${EMUNIC_TRACE:-1}" = 1 ]; then
  run_perf uncapped 0
  run_perf cx7 48.5e9
fi
if [ "$mps" = yes ]; then echo quit | timeout -k 5 10 nvidia-cuda-mps-control; trap - EXIT; fi

echo "==== summary (t+$(el)s)"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
for f in "$OUT"/stages_*.txt; do echo "$f"; cat "$f"; done >> "$OUT/summary.txt"
