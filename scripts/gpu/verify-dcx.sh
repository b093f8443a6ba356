#!/usr/bin/env bash
# On the GPU machine, one call (under 10 minutes): what sessions 22-23 built
# and could not run there.
#  1. scripts/gpu/verify34.sh STEPS="hmem overhead": libfabric with CUDA
#     (third_party/ of the checkout: cp -r ../shared/third_party third_party
#     before the device call), build-v34/ against it,
#     test_cross_node_hmem_userreg with FI_HMEM required (registered user
#     buffers, 0 bytes staged), Python's per-call cost over C on CUDA
#     tensors (with the ctypes row, the prepared block's hits and its steps);
#  2. test_gpu_devcounts in build-v34/ (issue 31: the one-node kernel and the
#     stream-triggered form across 2 virtual nodes, test_two_nodes_triggered);
#  3. test_cross_node_hmem_userreg with Debian's libfabric (it must skip);
#  4. python/bench/bench_moe_layer.py (issue 31 item 6): the MoE layer's
#     exchanges per step with host, device and graph split sizes, 2 and 4
#     ranks as threads of one process, 1 and 2 virtual nodes (2 nodes also with
#     RMACOLL_DEVICE_COUNTS_ACROSS_NODES=1), 8 KiB to 16 MiB per rank;
#  5. when time is left, scripts/gpu/emunic.sh step 5 (libfabric shm's CUDA
#     IPC path; builds build-emunic/).
# PARTS="1 2 3" runs only those (default all; 4 needs build-v34/ of 1).
# Logs under $OUT (default /tmp/verify-dcx). Usage: bash scripts/gpu/verify-dcx.sh
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/verify-dcx}
mkdir -p "$OUT"
cd "$top" || exit 1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
step() { echo; echo "==== $* (t+$(el)s)"; }
rc=0
part() { case " ${PARTS:-1 2 3 4 5} " in *" $1 "*) return 0;; esac; return 1; }
if part 1; then
step "1. verify34.sh hmem overhead"
STEPS="hmem overhead" OUT=$OUT/v34 timeout -k 5 330 bash scripts/gpu/verify34.sh 2>&1 | tail -80
[ "${PIPESTATUS[0]}" = 0 ] || { rc=1; echo "verify34: FAILED"; }
else
  STEPS=build OUT=$OUT/v34b timeout -k 5 330 bash scripts/gpu/verify34.sh > "$OUT/v34-build.log" 2>&1 ||
    echo "(verify34, for its build: rc $?)"
fi
. scripts/gpu/setup.sh /tmp/sysroot >/dev/null
export LD_LIBRARY_PATH=/tmp/fi-cuda/lib:$LD_LIBRARY_PATH
if part 2; then
step "2. test_gpu_devcounts (ranks as threads, one GPU)"
if timeout -k 5 200 cmake --build build-v34 -j"$(nproc)" --target test_gpu_devcounts > "$OUT/devcounts-build.log" 2>&1; then
  FI_TCP_IFACE=lo timeout -k 5 200 ./build-v34/tests/test_gpu_devcounts > "$OUT/devcounts.log" 2>&1
  r=$?; [ $r = 0 ] || rc=1
  grep -vE '^\[ +RUN ' "$OUT/devcounts.log" | tail -30; echo "test_gpu_devcounts: rc $r"
else
  rc=1; tail -30 "$OUT/devcounts-build.log"
fi
fi
if part 3; then
step "3. test_cross_node_hmem_userreg, Debian libfabric (a skip expected)"
LD_LIBRARY_PATH=${LD_LIBRARY_PATH#/tmp/fi-cuda/lib:} RMACOLL_TEST_FILTER=test_cross_node_hmem_userreg \
  timeout -k 5 100 ./build-v34/tests/test_gpu_e2e > "$OUT/userreg-debian.log" 2>&1
r=$?; [ $r = 0 ] || rc=1
grep -vE '^\[ +RUN ' "$OUT/userreg-debian.log" | tail -8; echo "userreg (Debian libfabric first on the path): rc $r"
fi
if part 4; then
step "4. MoE layer per step: host, device, graph split sizes"
timeout -k 5 30 cmake --build build-v34 --target rmacoll >/dev/null 2>&1
# MOE_RUNS: across:nodes pairs (RMACOLL_DEVICE_COUNTS_ACROSS_NODES, --nodes)
for run in ${MOE_RUNS:-0:1,2 1:2}; do
  across=${run%%:*} nodes=${run#*:}
  RMACOLL_DEVICE_COUNTS_ACROSS_NODES=$across RMACOLL_LIBRARY=$top/build-v34/librmacoll.so \
  PYTHONUNBUFFERED=1 timeout -k 5 ${MOE_S:-150} python3 python/bench/bench_moe_layer.py --device cuda \
    --nprocs 2,4 --nodes $nodes --sizes 8K,64K,1M,16M --steps 30 --rounds 3 --timeout 120 \
    --json "$OUT/moe_layer_across$across.json" > "$OUT/moe_$across.log" 2>&1
  r=$?
  grep -vE "WARN|rmacoll ERROR|rmacoll INFO|device_counts failed" "$OUT/moe_$across.log" | tail -40
  echo "-- the first errors the library logged (across=$across):"
  grep -E "rmacoll ERROR" "$OUT/moe_$across.log" | grep -v "device_counts failed" | head -8 | cut -c1-400
  [ $r = 0 ] || { rc=1; echo "bench_moe_layer (across=$across): FAILED or timed out"; }
done
fi
left=$(( 570 - $(el) ))
if ! part 5; then
  :
elif [ $left -gt 150 ]; then
  step "5. emunic.sh step 5 ($left s left)"
  EMUNIC_STEPS=5 EMUNIC_REPRO_MODES="busy both" OUT=$OUT/emunic timeout -k 5 $left bash scripts/gpu/emunic.sh \
    > "$OUT/emunic5.log" 2>&1
  echo "emunic.sh step 5: rc $?"; sed -n '/==== 5\./,$p' "$OUT/emunic5.log" | tail -50
else
  echo "5. emunic.sh step 5: not run ($left s left)"
fi
step "done, rc $rc"
exit $rc
