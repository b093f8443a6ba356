#!/usr/bin/env bash
# On the GPU machine, one short call: Python's host cost per call with CUDA
# tensors against C on the same tensors and stream (issue 34 item 4; one
# rank, so no GPU sharing), then the torch CUDA-tensor tests that run the
# prepared block (same shapes and split lists again, across streams).
# Usage: [OUT=DIR] bash scripts/gpu/python-cuda.sh   (needs .devpkgs/)
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/pycuda}; mkdir -p "$OUT"
t0=$(date +%s); rc=0
step() { echo; echo "==== $* (t+$(( $(date +%s) - t0 ))s)"; }
cd "$top"
nvidia-smi -L
step "build-py (CUDA)"
. "$top/scripts/gpu/setup.sh" /tmp/sysroot
if ! { timeout 200 cmake -S . -B build-py -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
         >"$OUT/cfg.log" 2>&1 &&
       timeout 300 cmake --build build-py -j"$(nproc)" --target rmacoll rmacoll_bench_loop \
         >"$OUT/build.log" 2>&1; }; then
  tail -40 "$OUT/cfg.log" "$OUT/build.log"; exit 1
fi
export RMACOLL_LIBRARY=$top/build-py/librmacoll.so PYTHONPATH=$top/python
export BENCH_OVERHEAD_LOOP=$top/build-py/python/librmacoll_bench_loop.so
step "Python per-call cost over C, CUDA tensors, 1 rank"
PYTHONUNBUFFERED=1 timeout 150 python3 python/bench/bench_overhead.py --device cuda --nprocs 1 \
  --sizes 1K,64K,1M --iters 1000 --warmup 100 --rounds 5 --json "$OUT/overhead_cuda.json" 2>&1 |
  grep -v WARN | tail -10
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
step "torch CUDA tensors, 2 and 4 ranks (one GPU, time-sliced)"
(cd python/tests && timeout 240 python3 test_torch_gpu.py -v TestTorchGPU.test_cuda_tensors_2_ranks \
   TestTorchGPU.test_cuda_tensors_4_ranks) >"$OUT/torch_gpu.log" 2>&1 || rc=1
grep -E "prepared|FAIL|ok$|Ran|OK|Error" "$OUT/torch_gpu.log" | tail -20
step "done rc=$rc"
exit $rc
