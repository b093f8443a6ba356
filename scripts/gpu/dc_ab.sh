#!/usr/bin/env bash
# On the GPU machine, one call (under 10 minutes):
#  1. builds the checkout (build-ab-new/) and, when .ab-old/ holds older
#     copies of some files (same paths as in the tree), a copy of the
#     checkout with them swapped in (build-ab-old/);
#  2. test_gpu_devcounts (the device-count kernel, ranks as threads);
#  3. rmacoll-latency of the device-count paths against the host-count
#     graph replay, new and old builds interleaved twice (2 and 4 ranks as
#     threads of one process, one GPU).
# (libfabric shm with CUDA IPC, issue 32: scripts/gpu/shm_ipc_stacks.sh.)
# PARTS="2" or "3" runs only that part after the build. Logs under $OUT
# (default /tmp/dc-ab). Usage: bash scripts/gpu/dc_ab.sh
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/gpu/common.sh"
gpu_begin /tmp/dc-ab
cd "$top" || exit 1
part() { case " ${PARTS:-2 3} " in *" $1 "*) return 0;; esac; return 1; }
nvidia-smi -L
. scripts/gpu/setup.sh /tmp/sysroot >/dev/null

step "1. builds"
targets=(--target rmacoll rmacoll-latency test_gpu_devcounts)
cfg() { timeout -k 5 120 cmake -S "$1" -B "$2" -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
          > "$OUT/cfg-$(basename "$2").log" 2>&1; }
cfg . build-ab-new && timeout -k 5 300 cmake --build build-ab-new -j12 "${targets[@]}" \
  > "$OUT/build-new.log" 2>&1 &
new_pid=$!
old=
if [ -d .ab-old ]; then
  rm -rf /tmp/ab-old-src; mkdir -p /tmp/ab-old-src
  tar --exclude='./build*' --exclude=./.devpkgs --exclude=./third_party --exclude=./.ab-old -cf - . |
    tar -xf - -C /tmp/ab-old-src
  cp -r .ab-old/. /tmp/ab-old-src/
  cfg /tmp/ab-old-src "$top/build-ab-old" && timeout -k 5 300 cmake --build build-ab-old -j4 \
    --target rmacoll-latency > "$OUT/build-old.log" 2>&1 && old=build-ab-old
fi
wait $new_pid || { tail -30 "$OUT/build-new.log"; echo "new build FAILED"; exit 1; }
echo "built: build-ab-new${old:+ and $old} (t+$(( $(date +%s) - t0 ))s)"

if part 2; then
  step "2. test_gpu_devcounts"
  FI_TCP_IFACE=lo timeout -k 5 150 ./build-ab-new/tests/test_gpu_devcounts > "$OUT/devcounts.log" 2>&1
  r=$?; [ $r = 0 ] || rc=1
  grep -vE '^\[ +RUN ' "$OUT/devcounts.log" | tail -12; echo "test_gpu_devcounts: rc $r"
fi

if part 3; then
  step "3. rmacoll-latency: device-count paths, new${old:+ against old}"
  for rep in 1 2; do
    for b in build-ab-new $old; do
      for np in 2 4; do
        echo "-- $b np $np (rep $rep)"
        timeout -k 5 60 ./$b/tools/rmacoll-latency -np $np -b 8K -e 512K -f 8 -n 500 -w 50 \
          --path graph_one_launch,graph_device_counts,device_counts > "$OUT/lat-$b-$np-$rep.log" 2>&1
        r=$?; grep -vE "^#|^$" "$OUT/lat-$b-$np-$rep.log" | tail -12
        [ $r = 0 ] || { rc=1; echo "rmacoll-latency $b np $np: rc $r"; }
      done
    done
  done
fi

step "done, rc $rc"
exit $rc
