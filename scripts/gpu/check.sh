#!/usr/bin/env bash
# On the GPU machine: build with CUDA for Hopper and run the gpu-labelled
# tests (C and Python), the MoE example and the Python per-call benchmark.
# Logs go to $OUT (or ./gpu-out). Usage: bash scripts/gpu/check.sh [quick]
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$top/gpu-out}
mkdir -p "$out"
. "$top/scripts/gpu/setup.sh" /tmp/sysroot >/dev/null
cd "$top"
nvidia-smi -L
if ! { cmake -S . -B build -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON >"$out/cfg.log" 2>&1 &&
       cmake --build build -j"$(nproc)" >"$out/build.log" 2>&1; }; then
  tail -40 "$out/cfg.log" "$out/build.log"; exit 1
fi
rc=0
ctest --test-dir build -L gpu --output-on-failure --timeout 300 >"$out/gpu-tests.log" 2>&1 || rc=1
grep -E "Test +#|tests passed|Failed" "$out/gpu-tests.log"
[ "${1:-}" = quick ] && exit $rc
PYTHONUNBUFFERED=1 timeout 300 python3 examples/moe_dispatch.py --nprocs 2 --device cuda --dtype bfloat16 >"$out/moe.log" 2>&1 || { rc=1; tail -20 "$out/moe.log"; }
tail -3 "$out/moe.log"
PYTHONUNBUFFERED=1 timeout 300 python3 python/bench/bench_all_to_all.py --nprocs 2 --device cuda --sizes 8K,64K,512K,1M,16M,128M --json "$out/bench_py.json" >"$out/bench_py.log" 2>&1 || { rc=1; tail -20 "$out/bench_py.log"; }
tail -12 "$out/bench_py.log"
# Python's per-call cost over C, host memory (issue 34 item 4; CUDA tensors
# take the full path and are not in it)
PYTHONUNBUFFERED=1 timeout 300 python3 python/bench/bench_overhead.py --nprocs 1,2 --sizes 1K,16K,256K --json "$out/bench_overhead.json" >"$out/bench_overhead.log" 2>&1 || { rc=1; tail -20 "$out/bench_overhead.log"; }
grep -v WARN "$out/bench_overhead.log" | tail -36
exit $rc
