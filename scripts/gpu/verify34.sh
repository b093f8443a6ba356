#!/usr/bin/env bash
# On the GPU machine, one call: the GPU-only checks of issues 34 and 32.
# STEPS picks them (default: all; they run in this order):
#  hmem      libfabric with CUDA (third_party/build-libfabric-cuda.sh) into
#            /tmp/fi-cuda, rmacoll built against it; test_gpu_e2e
#            test_cross_node_hmem_userreg (device buffers of
#            rmacoll_mem_register, FI_HMEM over shm required: 0 bytes
#            staged, no per-call registration). Without it, rmacoll is
#            built against the carried libfabric;
#  emunic    test_gpu_e2e test_cross_node_emunic (ranks as processes: peers'
#            memory mapped in emunic's own context, stale mappings closed;
#            EMUNIC_S seconds at most, default 240);
#  backend   the torch.distributed backend with CUDA tensors ("rmacoll" and
#            "cpu:gloo,cuda:rmacoll"), python/tests/test_torch_backend.py;
#  overhead  Python's host cost per call with CUDA tensors against C on the
#            same tensors and stream (bench_overhead.py --device cuda, one
#            rank, so no GPU sharing);
#  torchgpu  all_to_all_single on CUDA tensors, 2 and 4 ranks (the prepared
#            argument block across calls and streams), test_torch_gpu.py.
# Processes on one GPU without MPS time-slice it.
# Usage: [OUT=DIR] [STEPS="overhead emunic"] bash scripts/gpu/verify34.sh
#        (needs .devpkgs/, and third_party/ for hmem)
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/gpu/common.sh"
gpu_begin /tmp/v34
STEPS=${STEPS:-hmem emunic backend overhead torchgpu}
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
fi=/tmp/fi-cuda
cd "$top"
nvidia-smi -L
. "$top/scripts/gpu/setup.sh" /tmp/sysroot
extra=()
if want hmem; then
  step "libfabric with CUDA into $fi"
  [ -x "$fi/bin/fi_info" ] || LD_LIBRARY_PATH= timeout 240 bash third_party/build-libfabric-cuda.sh "$fi" >"$OUT/fi.log" 2>&1 ||
    { tail -20 "$OUT/fi.log"; echo "libfabric build failed"; exit 1; }
  LD_LIBRARY_PATH=$fi/lib:$LD_LIBRARY_PATH "$fi/bin/fi_info" -p shm -c FI_HMEM -t FI_EP_RDM | head -3
  mkdir -p "/tmp/sysroot$(dirname "$fi")"; ln -sfn "$fi" "/tmp/sysroot$fi"
  export PKG_CONFIG_PATH=$fi/lib/pkgconfig:$PKG_CONFIG_PATH LD_LIBRARY_PATH=$fi/lib:$LD_LIBRARY_PATH
  extra=(-DCMAKE_BUILD_RPATH="$fi/lib")
fi
step "build-v34 (CUDA, emunic)"
if ! { timeout 200 cmake -S . -B build-v34 -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
         -DRMACOLL_BUILD_EMUNIC=ON "${extra[@]}" >"$OUT/cfg.log" 2>&1 &&
       timeout 300 cmake --build build-v34 -j"$(nproc)" --target rmacoll test_gpu_e2e \
         rmacoll_bench_loop rmacoll_emunic >"$OUT/build.log" 2>&1; }; then
  tail -40 "$OUT/cfg.log" "$OUT/build.log"; exit 1
fi
export RMACOLL_LIBRARY=$top/build-v34/librmacoll.so PYTHONPATH=$top/python
export BENCH_OVERHEAD_LOOP=$top/build-v34/python/librmacoll_bench_loop.so
gtest() { # $1 filter, $2 seconds, rest: env
  local f=$1 s=$2; shift 2
  step "test_gpu_e2e $f $*"
  env "$@" RMACOLL_TEST_FILTER="$f" timeout "$s" ./build-v34/tests/test_gpu_e2e >"$OUT/$f.log" 2>&1
  local r=$?
  grep -vE '^\[ +(RUN|OK) ' "$OUT/$f.log" | tail -25
  [ "$r" = 0 ] || { rc=1; echo "$f: FAILED or timed out (exit $r)"; }
}
want hmem && gtest test_cross_node_hmem_userreg 200 RMACOLL_TEST_REQUIRE_HMEM=1
want emunic && gtest test_cross_node_emunic "${EMUNIC_S:-240}"
if want backend; then
  step "torch backend, CUDA tensors (torch $(python3 -c 'import torch; print(torch.__version__)'))"
  (cd python/tests && timeout 300 python3 test_torch_backend.py -v TestTorchBackendGPU) >"$OUT/torch_backend.log" 2>&1 || rc=1
  tail -15 "$OUT/torch_backend.log"
fi
if want overhead; then
  step "Python per-call cost over C, CUDA tensors, 1 rank"
  PYTHONUNBUFFERED=1 timeout 200 python3 python/bench/bench_overhead.py --device cuda --nprocs 1 \
    --sizes 1K,64K,1M --iters 1000 --warmup 100 --rounds 5 --json "$OUT/overhead_cuda.json" 2>&1 |
    grep -v WARN | tail -40
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
if want torchgpu; then
  step "torch CUDA tensors, 2 and 4 ranks (one GPU, time-sliced)"
  (cd python/tests && timeout 240 python3 test_torch_gpu.py -v TestTorchGPU.test_cuda_tensors_2_ranks \
     TestTorchGPU.test_cuda_tensors_4_ranks) >"$OUT/torch_gpu.log" 2>&1 || rc=1
  grep -E "prepared|FAIL|ok$|Ran|OK|Error" "$OUT/torch_gpu.log" | tail -20
fi
step "done rc=$rc"
exit $rc
