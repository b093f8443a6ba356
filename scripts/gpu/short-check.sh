#!/usr/bin/env bash
# On the GPU machine, in one call of under ten minutes (a session has 30
# minutes of device time): the device paths' tests and numbers that
# issues 13 and 14 ask for, each step with its own time limit.
#  1. build/ (Debian libfabric), CUDA for Hopper, -Werror;
#  2. one node: test_gpu_graph (RMACOLL_TEST_REPLAYS replays, default
#     100), test_gpu_threads, test_gpu_e2e's one-node tests;
#  3. per-call latency of every device path, 2 ranks as threads, device
#     and host signal words (rmacoll-latency, as scripts/gpu/latency.sh,
#     -np 2 only), and rmacoll-perf's graph replay (-G);
#  4. libfabric with CUDA (third_party/), build-hmem/ against it, the
#     registered path across 2 virtual nodes: test_cross_node_hmem (every
#     case file; RMACOLL_TEST_CASES=SUBSTRING narrows it),
#     test_cross_node_mixed, and staged against hmem at 16 and 64 MiB.
# Logs go to $OUT (or ./gpu-out); a summary to stdout.
# Usage: bash scripts/gpu/short-check.sh [SKIP_STEPS, e.g. "3 4"]
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$top/gpu-out}
skip=" ${1:-} "
mkdir -p "$out"
t0=$(date +%s)
step() { echo; echo "==== $* (t+$(( $(date +%s) - t0 ))s)"; }
want() { [[ "$skip" != *" $1 "* ]]; }
rc=0
cd "$top"
. "$top/scripts/gpu/setup.sh" /tmp/sysroot >/dev/null
nvidia-smi -L

step "1. build/"
if ! { timeout 300 cmake -S . -B build -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
         >"$out/cfg.log" 2>&1 &&
       timeout 300 cmake --build build -j"$(nproc)" >"$out/build.log" 2>&1; }; then
  tail -40 "$out/cfg.log" "$out/build.log"; exit 1
fi

# $1: log name, $2: time limit (s), rest: the command
t() {
  local name=$1 lim=$2; shift 2
  timeout "$lim" "$@" >"$out/$name.log" 2>&1
  local r=$?
  if [ $r = 0 ]; then echo "$name: passed"; else rc=1; echo "$name: FAILED (exit $r)";
    grep -vE '^\[ +(RUN|OK) ' "$out/$name.log" | tail -25; fi
}

if want 2; then
  step "2. one node: graph replay, ranks as threads, one-node device tests"
  RMACOLL_TEST_REPLAYS=${RMACOLL_TEST_REPLAYS:-100} t gpu_graph 100 ./build/tests/test_gpu_graph
  t gpu_threads 100 ./build/tests/test_gpu_threads
  for f in test_cases_one_node test_stream_order_nan test_back_to_back test_graph_capture \
           test_one_launch_processes; do
    RMACOLL_TEST_FILTER=$f t "gpu_e2e_$f" 90 ./build/tests/test_gpu_e2e
  done
fi

if want 3; then
  step "3. per-call latency, 2 ranks as threads: device signal words, then host words"
  for words in device host; do
    if [ $words = host ]; then export RMACOLL_DEVICE_SIGNALS=0; else unset RMACOLL_DEVICE_SIGNALS; fi
    CUDA_DEVICE_MAX_CONNECTIONS=32 timeout 60 ./build/tools/rmacoll-latency -np 2 -b 8K -e 512K \
        -f 8 -n 1000 -w 100 --graph-calls 100 \
        --path ce,nvlink_kernel,one_launch,graph_ce,graph_one_launch 2>&1 |
      grep -v "WARN config" | tee "$out/lat2-$words.log" || rc=1
  done
  unset RMACOLL_DEVICE_SIGNALS
  echo "---- rmacoll-perf -G 1 -m 100 (graph replay, 2 processes, time-sliced, uniform)"
  timeout 60 ./build/tools/rmacoll-perf --buffers cuda -np 2 --dist uniform \
      -b 8K -e 512K -f 8 -n 20 -w 5 -m 100 -G 1 2>&1 | grep -v "WARN config" |
    tee "$out/perf-graph.log" | grep -E "^ +[0-9]+ |failed|Out of bounds" || rc=1
fi

if want 4; then
  fi_dir=/tmp/fi-cuda
  step "4. libfabric with CUDA, build-hmem/, the registered path across 2 virtual nodes"
  # (its own check runs fi_info: not with setup.sh's Debian libfabric first)
  [ -f "$fi_dir/lib/libfabric.so" ] ||
    env -u LD_LIBRARY_PATH timeout 240 bash third_party/build-libfabric-cuda.sh "$fi_dir" \
      >"$out/fi-build.log" 2>&1
  [ -f "$fi_dir/lib/libfabric.so" ] ||
    { echo "libfabric build failed"; tail -20 "$out/fi-build.log"; exit 1; }
  mkdir -p "/tmp/sysroot$(dirname "$fi_dir")"
  ln -sfn "$fi_dir" "/tmp/sysroot$fi_dir"
  export PKG_CONFIG_PATH=$fi_dir/lib/pkgconfig:$PKG_CONFIG_PATH
  export LD_LIBRARY_PATH=$fi_dir/lib:$LD_LIBRARY_PATH
  if ! { timeout 300 cmake -S . -B build-hmem -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
           -DCMAKE_BUILD_RPATH="$fi_dir/lib" >"$out/hmem-cfg.log" 2>&1 &&
         timeout 300 cmake --build build-hmem -j"$(nproc)" >"$out/hmem-build.log" 2>&1; }; then
    tail -40 "$out/hmem-cfg.log" "$out/hmem-build.log"; exit 1
  fi
  RMACOLL_TEST_REQUIRE_HMEM=1 RMACOLL_TEST_FILTER=test_cross_node_hmem \
    t cross_node_hmem 150 ./build-hmem/tests/test_gpu_e2e
  RMACOLL_TEST_REQUIRE_HMEM=1 RMACOLL_TEST_FILTER=test_cross_node_mixed \
    t cross_node_mixed 100 ./build-hmem/tests/test_gpu_e2e
  for dist in uniform zipf:1.2; do
    for path in staged hmem; do
      echo "---- $path, --dist $dist (ofi/shm, 4 ranks --ppn 2, one GPU, no MPS)"
      RMACOLL_TIMEOUT_MS=10000 RMACOLL_LOG_LEVEL=debug RMACOLL_LOG_SUBSYSTEMS=none \
      RMACOLL_TRANSPORTS_INTER_NODE=ofi RMACOLL_OFI_PROVIDER=shm \
      RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=$path \
        timeout 60 ./build-hmem/tools/rmacoll-perf --buffers cuda -np 4 --ppn 2 --dist "$dist" \
          -b 16M -e 64M -f 4 -n 5 -w 2 2>&1 |
        grep -E "^ +[0-9]+ |failed|stats: device path|device buffers" | head -8 || rc=1
    done
  done
  echo "---- this libfabric's own providers: test_ofi, and host calls with ofi.provider auto"
  t hmem_test_ofi 200 env FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo ./build-hmem/tests/test_ofi
  grep -E "auto took|checks with" "$out/hmem_test_ofi.log" | sort | uniq | head -12
  FI_TCP_IFACE=lo RMACOLL_LOG_LEVEL=info timeout 120 ./build-hmem/tools/rmacoll-perf -np 4 \
      --ppn 2 -b 1K -e 4M -f 16 -n 200 -w 20 -c 2 2>&1 | grep -E "^ +[0-9]+ |failed|Out of|auto" |
    sort -u | head -12 || rc=1
fi
step "done, rc=$rc"
exit $rc
