#!/usr/bin/env bash
# On the GPU machine (issue 13): device memory across nodes registered with
# libfabric (FI_HMEM) against the host-staged path, on the same provider.
#  1. builds libfabric with CUDA (third_party/build-libfabric-cuda.sh) into
#     /tmp/fi-cuda and shows that its shm provider reports FI_HMEM;
#  2. builds rmacoll against it (the Debian packages of .devpkgs for the
#     rest, as scripts/gpu/setup.sh unpacks them), CUDA on, -Werror;
#  3. runs the cross-node gpu tests (test_gpu_e2e: test_cross_node_*, the
#     HMEM one required: RMACOLL_TEST_REQUIRE_HMEM=1) and test_ce_cuda;
#  4. benchmarks staged against HMEM, both over ofi/shm, 4 ranks as 2
#     virtual nodes x 2 (--ppn 2) on the GPU(s), device memory, 1 MiB ..
#     256 MiB per rank, uniform and zipf:1.2 (rmacoll-perf; the staged rows
#     forced with RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=staged).
# Everything goes to stdout. Usage: bash scripts/gpu/hmem-check.sh [PREFIX=/tmp/fi-cuda]
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
fi=${1:-/tmp/fi-cuda}
t0=$(date +%s)
step() { echo; echo "==== $* (t+$(( $(date +%s) - t0 ))s)"; }
cd "$top"
nvidia-smi -L
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader

step "libfabric with CUDA into $fi"
if [ ! -x "$fi/bin/fi_info" ]; then
  timeout 240 bash third_party/build-libfabric-cuda.sh "$fi" || { echo "libfabric build failed"; exit 1; }
fi
"$fi/bin/fi_info" --version | head -2
echo "-- fi_info -p shm -c FI_HMEM:"
"$fi/bin/fi_info" -p shm -c FI_HMEM -t FI_EP_RDM | head -12
echo "-- fi_info -p tcp -c FI_HMEM (tcp;ofi_rxm: expected none or no CUDA):"
"$fi/bin/fi_info" -p tcp -c FI_HMEM -t FI_EP_RDM 2>&1 | head -4

step "rmacoll against $fi (build-hmem/)"
. "$top/scripts/gpu/setup.sh" /tmp/sysroot
# setup.sh roots every pkg-config path at the sysroot: give /tmp/fi-cuda a
# place there, and put it first for pkg-config and the loader
mkdir -p "/tmp/sysroot$(dirname "$fi")"
ln -sfn "$fi" "/tmp/sysroot$fi"
export PKG_CONFIG_PATH=$fi/lib/pkgconfig:$PKG_CONFIG_PATH
export LD_LIBRARY_PATH=$fi/lib:$LD_LIBRARY_PATH
echo "pkg-config libfabric: $(pkg-config --modversion libfabric) $(pkg-config --libs libfabric)"
if ! { timeout 300 cmake -S . -B build-hmem -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
         -DCMAKE_BUILD_RPATH="$fi/lib" >/tmp/hmem-cfg.log 2>&1 &&
       timeout 300 cmake --build build-hmem -j"$(nproc)" >/tmp/hmem-build.log 2>&1; }; then
  tail -40 /tmp/hmem-cfg.log /tmp/hmem-build.log; exit 1
fi
grep -E "rmacoll: (ofi|NCCL)" /tmp/hmem-cfg.log
echo "librmacoll loads: $(ldd build-hmem/librmacoll.so | grep -o '[^ ]*libfabric[^ ]*' | head -2 | tr '\n' ' ')"

rc=0
step "rmacoll creation log over shm (INFO): the device path chosen"
RMACOLL_LOG_LEVEL=info RMACOLL_TRANSPORTS_INTER_NODE=ofi RMACOLL_OFI_PROVIDER=shm RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=auto \
  timeout 60 ./build-hmem/tools/rmacoll-perf --buffers cuda -np 4 --ppn 2 -b 1M -e 1M -n 2 -w 1 2>&1 |
  grep -E "device path|FI_HMEM|ofi: rank 0" | head -8
RMACOLL_LOG_LEVEL=info RMACOLL_TRANSPORTS_INTER_NODE=ofi RMACOLL_OFI_PROVIDER='tcp;ofi_rxm' RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=auto \
  timeout 60 ./build-hmem/tools/rmacoll-perf --buffers cuda -np 4 --ppn 2 -b 1M -e 1M -n 2 -w 1 2>&1 |
  grep -E "device path" | head -2

bench() { # $1: label
  for dist in uniform zipf:1.2; do
    for path in staged hmem hmem:device_only; do
      echo "---- $1: $path, --dist $dist"
      donly=0; [ "$path" = hmem:device_only ] && donly=1
      RMACOLL_TIMEOUT_MS=10000 RMACOLL_LOG_LEVEL=debug RMACOLL_LOG_SUBSYSTEMS=none RMACOLL_TRANSPORTS_INTER_NODE=ofi \
      RMACOLL_OFI_HMEM_DEVICE_ONLY=$donly \
      RMACOLL_OFI_PROVIDER=shm RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=${path%%:*} \
        timeout 120 ./build-hmem/tools/rmacoll-perf --buffers cuda -np 4 --ppn 2 --dist "$dist" \
          -b 1M -e 256M -f 4 -n 5 -w 2 2>&1 | grep -vE "^#  Rank|^# (Using|nThread)|^#$" || rc=1
    done
  done
}
step "benchmark: staged vs hmem, ofi/shm, 4 ranks --ppn 2 on one GPU, device memory, no MPS (time-sliced)"
bench "no MPS"
for donly in 1 0; do
  step "gpu tests: test_cross_node_hmem (HMEM required), ofi.hmem_device_only=$donly"
  RMACOLL_OFI_HMEM_DEVICE_ONLY=$donly RMACOLL_TEST_REQUIRE_HMEM=1 RMACOLL_TEST_FILTER=test_cross_node_hmem \
    timeout 240 ./build-hmem/tests/test_gpu_e2e 2>&1 | grep -vE '^\[ +(RUN|OK) ' | tail -40
  [ "${PIPESTATUS[0]}" = 0 ] || { rc=1; echo "test_cross_node_hmem (device_only=$donly): FAILED or timed out"; }
done
step "gpu tests: test_cross_node_mixed (host and device calls on one communicator; staged over tcp, hmem over shm)"
RMACOLL_OFI_HMEM_DEVICE_ONLY=1 RMACOLL_TEST_REQUIRE_HMEM=1 RMACOLL_TEST_FILTER=test_cross_node_mixed \
  timeout 120 ./build-hmem/tests/test_gpu_e2e 2>&1 | grep -vE '^\[ +(RUN|OK) ' | tail -20
[ "${PIPESTATUS[0]}" = 0 ] || { rc=1; echo "test_cross_node_mixed: FAILED or timed out"; }
step "gpu tests: test_cross_node_relay (staged), test_ce_cuda"
RMACOLL_TEST_FILTER=test_cross_node_relay \
  timeout 150 ./build-hmem/tests/test_gpu_e2e 2>&1 | grep -vE '^\[ +(RUN|OK) ' | tail -30
[ "${PIPESTATUS[0]}" = 0 ] || { rc=1; echo "test_cross_node_relay: FAILED or timed out"; }
timeout 60 ./build-hmem/tests/test_ce_cuda 2>&1 | tail -3

if [ "${HMEM_MPS:-0}" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null; then
  step "the same under MPS (4 processes share the GPU at once)"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/hmem-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/hmem-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
    bench "MPS"
    echo quit | nvidia-cuda-mps-control; trap - EXIT
  else
    echo "nvidia-cuda-mps-control -d failed: no MPS rows"
  fi
fi
step "done, rc=$rc"
exit $rc
