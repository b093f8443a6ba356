#!/usr/bin/env bash
# On the GPU machine, one call (under 10 minutes): what sessions 22-23 built
# and could not run there.
#  1. libfabric with CUDA in the background (third_party/ of the checkout:
#     cp -r ../shared/third_party third_party before the device call);
#  2. rmacoll with CUDA and the emunic plugin (build-emunic/, the directory
#     and flags scripts/gpu/emunic.sh uses, so its build is then a no-op);
#  3. test_gpu_devcounts (issue 31: the one-node kernel and the
#     stream-triggered form across 2 virtual nodes, test_two_nodes_triggered);
#  4. test_gpu_e2e test_cross_node_hmem_userreg with Debian's libfabric (it
#     must skip: no FI_HMEM) and with the CUDA one over shm (it must run:
#     RMACOLL_TEST_REQUIRE_HMEM=1);
#  5. scripts/gpu/emunic.sh step 5 (libfabric shm's CUDA IPC path).
# Logs under $OUT (default /tmp/verify-dcx). Usage: bash scripts/gpu/verify-dcx.sh
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/verify-dcx}
mkdir -p "$OUT"
cd "$top" || exit 1
t0=$(date +%s)
step() { echo; echo "==== $* (t+$(( $(date +%s) - t0 ))s)"; }
fi_dir=/tmp/fi-cuda
fi_pid=""
if [ ! -x "$fi_dir/bin/fi_info" ] && [ -f third_party/build-libfabric-cuda.sh ]; then
  ( timeout -k 5 230 bash third_party/build-libfabric-cuda.sh "$fi_dir" > "$OUT/libfabric-build.log" 2>&1 ) &
  fi_pid=$!
fi
step "build (build-emunic/)"
. scripts/gpu/setup.sh /tmp/sysroot >/dev/null
if ! { timeout -k 5 60 cmake -S . -B build-emunic -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
         -DRMACOLL_BUILD_EMUNIC=ON > "$OUT/cmake.log" 2>&1 &&
       timeout -k 5 240 cmake --build build-emunic -j"$(nproc)" > "$OUT/build.log" 2>&1; }; then
  tail -40 "$OUT/cmake.log" "$OUT/build.log"; exit 1
fi
rc=0
step "test_gpu_devcounts (ranks as threads, one GPU)"
FI_TCP_IFACE=lo timeout -k 5 240 ./build-emunic/tests/test_gpu_devcounts > "$OUT/devcounts.log" 2>&1
r=$?; [ $r = 0 ] || rc=1
grep -vE '^\[ +RUN ' "$OUT/devcounts.log" | tail -30; echo "test_gpu_devcounts: rc $r"
step "test_cross_node_hmem_userreg, Debian libfabric (skip expected)"
RMACOLL_TEST_FILTER=test_cross_node_hmem_userreg timeout -k 5 120 ./build-emunic/tests/test_gpu_e2e \
  > "$OUT/userreg-debian.log" 2>&1
r=$?; [ $r = 0 ] || rc=1
grep -vE '^\[ +RUN ' "$OUT/userreg-debian.log" | tail -12; echo "userreg (Debian libfabric): rc $r"
if [ -n "$fi_pid" ]; then wait "$fi_pid"; echo "libfabric build rc $?"; fi
if [ -x "$fi_dir/bin/fi_info" ]; then
  for donly in 1 0; do
    step "test_cross_node_hmem_userreg, libfabric with CUDA, shm, HMEM required, device_only=$donly"
    LD_LIBRARY_PATH=$fi_dir/lib:${LD_LIBRARY_PATH:-} RMACOLL_OFI_HMEM_DEVICE_ONLY=$donly \
    RMACOLL_TEST_REQUIRE_HMEM=1 RMACOLL_TEST_FILTER=test_cross_node_hmem_userreg \
      timeout -k 5 120 ./build-emunic/tests/test_gpu_e2e > "$OUT/userreg-hmem-$donly.log" 2>&1
    r=$?; [ $r = 0 ] || rc=1
    grep -vE '^\[ +RUN ' "$OUT/userreg-hmem-$donly.log" | tail -16; echo "userreg (CUDA libfabric, device_only=$donly): rc $r"
  done
else
  echo "no libfabric with CUDA (third_party/ missing or its build failed): userreg with FI_HMEM not run"
  tail -5 "$OUT/libfabric-build.log" 2>/dev/null
fi
step "emunic.sh step 5"
EMUNIC_STEPS=5 EMUNIC_REPRO_MODES="busy both" OUT=$OUT/emunic timeout -k 5 300 bash scripts/gpu/emunic.sh \
  > "$OUT/emunic5.log" 2>&1
echo "emunic.sh step 5: rc $?"; sed -n '/==== 5\./,$p' "$OUT/emunic5.log" | tail -60
step "done, rc $rc"
exit $rc
