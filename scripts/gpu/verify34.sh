#!/usr/bin/env bash
# On the GPU machine, one call: the GPU-only checks of issue 34 and the
# emulated NIC's test (issue 32), against libfabric built with CUDA.
#  1. libfabric with CUDA (third_party/build-libfabric-cuda.sh) into
#     /tmp/fi-cuda; rmacoll against it in build-v34/ (CUDA, emunic);
#  2. user buffers on the registered device path: test_gpu_e2e
#     test_cross_node_hmem_userreg (device buffers of rmacoll_mem_register,
#     FI_HMEM over shm required: 0 bytes staged, no per-call registration);
#  3. the torch.distributed backend with CUDA tensors ("rmacoll" and
#     "cpu:gloo,cuda:rmacoll"), python/tests/test_torch_backend.py;
#  4. Python's host cost per call with CUDA tensors against C on the same
#     tensors and stream (python/bench/bench_overhead.py --device cuda, one
#     rank, so no GPU sharing);
#  5. test_gpu_e2e test_cross_node_emunic (and ..._hmem as a control).
# Usage: [OUT=DIR] bash scripts/gpu/verify34.sh   (needs .devpkgs/ and third_party/)
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
fi=/tmp/fi-cuda
OUT=${OUT:-/tmp/v34}; mkdir -p "$OUT"
t0=$(date +%s); rc=0
step() { echo; echo "==== $* (t+$(( $(date +%s) - t0 ))s)"; }
cd "$top"
nvidia-smi -L
step "libfabric with CUDA into $fi"
[ -x "$fi/bin/fi_info" ] || timeout 240 bash third_party/build-libfabric-cuda.sh "$fi" >"$OUT/fi.log" 2>&1 ||
  { tail -20 "$OUT/fi.log"; echo "libfabric build failed"; exit 1; }
"$fi/bin/fi_info" -p shm -c FI_HMEM -t FI_EP_RDM | head -3
step "build-v34 (CUDA, emunic, against $fi)"
. "$top/scripts/gpu/setup.sh" /tmp/sysroot
mkdir -p "/tmp/sysroot$(dirname "$fi")"; ln -sfn "$fi" "/tmp/sysroot$fi"
export PKG_CONFIG_PATH=$fi/lib/pkgconfig:$PKG_CONFIG_PATH LD_LIBRARY_PATH=$fi/lib:$LD_LIBRARY_PATH
if ! { timeout 200 cmake -S . -B build-v34 -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
         -DRMACOLL_BUILD_EMUNIC=ON -DCMAKE_BUILD_RPATH="$fi/lib" >"$OUT/cfg.log" 2>&1 &&
       timeout 300 cmake --build build-v34 -j"$(nproc)" --target rmacoll test_gpu_e2e \
         rmacoll_bench_loop rmacoll_emunic rmacoll-perf >"$OUT/build.log" 2>&1; }; then
  tail -40 "$OUT/cfg.log" "$OUT/build.log"; exit 1
fi
export RMACOLL_LIBRARY=$top/build-v34/librmacoll.so PYTHONPATH=$top/python
export BENCH_OVERHEAD_LOOP=$top/build-v34/python/librmacoll_bench_loop.so
gtest() { # $1 filter, $2 seconds, rest: env
  local f=$1 s=$2; shift 2
  step "test_gpu_e2e $f $*"
  env "$@" RMACOLL_TEST_FILTER="$f" timeout "$s" ./build-v34/tests/test_gpu_e2e 2>&1 |
    grep -vE '^\[ +(RUN|OK) ' | tail -25
  [ "${PIPESTATUS[0]}" = 0 ] || { rc=1; echo "$f: FAILED or timed out"; }
}
gtest test_cross_node_hmem_userreg 200 RMACOLL_TEST_REQUIRE_HMEM=1
step "torch backend, CUDA tensors (torch $(python3 -c 'import torch; print(torch.__version__)'))"
(cd python/tests && timeout 300 python3 test_torch_backend.py -v TestTorchBackendGPU) >"$OUT/torch_backend.log" 2>&1 || rc=1
tail -15 "$OUT/torch_backend.log"
step "Python per-call cost over C, CUDA tensors, 1 rank"
PYTHONUNBUFFERED=1 timeout 200 python3 python/bench/bench_overhead.py --device cuda --nprocs 1 \
  --sizes 1K,64K,1M --iters 1000 --warmup 100 --rounds 5 --json "$OUT/overhead_cuda.json" 2>&1 |
  grep -v WARN | tail -10
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
gtest test_cross_node_emunic 240
step "done rc=$rc"
exit $rc
