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
#  4. when time is left, scripts/gpu/emunic.sh step 5 (libfabric shm's CUDA
#     IPC path; builds build-emunic/).
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
step "1. verify34.sh hmem overhead"
STEPS="hmem overhead" OUT=$OUT/v34 timeout -k 5 330 bash scripts/gpu/verify34.sh 2>&1 | tail -80
[ "${PIPESTATUS[0]}" = 0 ] || { rc=1; echo "verify34: FAILED (rc ${PIPESTATUS[0]})"; }
. scripts/gpu/setup.sh /tmp/sysroot >/dev/null
export LD_LIBRARY_PATH=/tmp/fi-cuda/lib:$LD_LIBRARY_PATH
step "2. test_gpu_devcounts (ranks as threads, one GPU)"
if timeout -k 5 200 cmake --build build-v34 -j"$(nproc)" --target test_gpu_devcounts > "$OUT/devcounts-build.log" 2>&1; then
  FI_TCP_IFACE=lo timeout -k 5 200 ./build-v34/tests/test_gpu_devcounts > "$OUT/devcounts.log" 2>&1
  r=$?; [ $r = 0 ] || rc=1
  grep -vE '^\[ +RUN ' "$OUT/devcounts.log" | tail -30; echo "test_gpu_devcounts: rc $r"
else
  rc=1; tail -30 "$OUT/devcounts-build.log"
fi
step "3. test_cross_node_hmem_userreg, Debian libfabric (a skip expected)"
LD_LIBRARY_PATH=${LD_LIBRARY_PATH#/tmp/fi-cuda/lib:} RMACOLL_TEST_FILTER=test_cross_node_hmem_userreg \
  timeout -k 5 100 ./build-v34/tests/test_gpu_e2e > "$OUT/userreg-debian.log" 2>&1
r=$?; [ $r = 0 ] || rc=1
grep -vE '^\[ +RUN ' "$OUT/userreg-debian.log" | tail -8; echo "userreg (Debian libfabric first on the path): rc $r"
left=$(( 570 - $(el) ))
if [ $left -gt 150 ]; then
  step "4. emunic.sh step 5 ($left s left)"
  EMUNIC_STEPS=5 EMUNIC_REPRO_MODES="busy both" OUT=$OUT/emunic timeout -k 5 $left bash scripts/gpu/emunic.sh \
    > "$OUT/emunic5.log" 2>&1
  echo "emunic.sh step 5: rc $?"; sed -n '/==== 5\./,$p' "$OUT/emunic5.log" | tail -50
else
  echo "4. emunic.sh step 5: not run ($left s left)"
fi
step "done, rc $rc"
exit $rc
