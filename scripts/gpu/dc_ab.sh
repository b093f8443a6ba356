#!/usr/bin/env bash
# On the GPU machine, one call (under 10 minutes):
#  1. builds the checkout (build-ab-new/) and, when .ab-old/ holds older
#     copies of some files (same paths as in the tree), a copy of the
#     checkout with them swapped in (build-ab-old/); libfabric with CUDA
#     (third_party/ of the checkout) into /tmp/fi-cuda in the background;
#  2. test_gpu_devcounts (the device-count kernel, ranks as threads);
#  3. rmacoll-latency of the device-count paths against the host-count
#     graph replay, new and old builds interleaved twice (2 and 4 ranks as
#     threads of one process, one GPU);
#  4. rmacoll over libfabric shm with CUDA, registered device path,
#     ofi.hmem_device_only=1 (issue 32), with the library's own-call watch
#     (a rank whose own call into the transport does not return says so);
#     thread stacks of every rank still running after 20 s, when gdb exists.
# PARTS="2 3" runs only those after the build. Logs under $OUT
# (default /tmp/dc-ab). Usage: bash scripts/gpu/dc_ab.sh
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/gpu/common.sh"
gpu_begin /tmp/dc-ab
cd "$top" || exit 1
part() { case " ${PARTS:-2 3 4} " in *" $1 "*) return 0;; esac; return 1; }
nvidia-smi -L
echo "gdb: $(command -v gdb || echo none); eu-stack: $(command -v eu-stack || echo none)"
. scripts/gpu/setup.sh /tmp/sysroot >/dev/null
fi=/tmp/fi-cuda fi_pid=
if part 4 && [ -x third_party/build-libfabric-cuda.sh ] && [ ! -x $fi/bin/fi_info ]; then
  (LD_LIBRARY_PATH= timeout 240 bash third_party/build-libfabric-cuda.sh $fi > "$OUT/fi.log" 2>&1) &
  fi_pid=$!
fi

step "1. builds"
targets=(--target rmacoll rmacoll-latency rmacoll-perf test_gpu_devcounts)
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

if part 4; then
  step "4. rmacoll over shm with CUDA IPC (ofi.hmem_device_only=1)"
  [ -n "$fi_pid" ] && { wait "$fi_pid"; echo "libfabric build rc $?"; }
  if [ -x $fi/bin/fi_info ]; then
    fi_ld=$fi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    for donly in 1 0; do
      log=$OUT/perf_shm_device_only_$donly.log
      LD_LIBRARY_PATH=$fi_ld FI_LOG_LEVEL=warn FI_LOG_PROV=shm \
      RMACOLL_LOG_LEVEL=info RMACOLL_TIMEOUT_MS=8000 \
      RMACOLL_TRANSPORTS_INTER_NODE=ofi RMACOLL_OFI_PROVIDER=shm RMACOLL_OFI_HMEM_DEVICE_ONLY=$donly \
      RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=hmem \
        timeout -k 5 60 ./build-ab-new/tools/rmacoll-perf --buffers cuda -np 4 --ppn 2 -b 16M -e 64M \
          -f 4 -n 3 -w 1 > "$log" 2>&1 &
      ppid=$!
      for i in $(seq 1 40); do sleep 1; kill -0 $ppid 2>/dev/null || break; done
      if kill -0 $ppid 2>/dev/null && command -v gdb >/dev/null; then
        for p in $(pgrep -f "rmacoll-perf --buffers cuda"); do
          echo "== stacks of pid $p (still running after 40 s)"
          timeout 30 gdb -p "$p" -batch -nx -ex "thread apply all bt 12" 2>/dev/null |
            grep -E "^#|^Thread" | head -60
        done
      fi
      wait $ppid; r=$?
      grep -E "^ +[0-9]+ " "$log" | head -6
      grep -iE "error|stalled|timed out|own call|not returned" "$log" | grep -v "^libfabric" |
        sed -E 's/^[^ ]+:[0-9]+:[0-9]+ //' | awk '!seen[$0]++' | head -16 | cut -c1-400
      echo "rmacoll over shm, hmem, device_only=$donly: rc $r"
    done
  else
    echo "no libfabric with CUDA (third_party/ missing?): part 4 skipped"
  fi
fi
step "done, rc $rc"
exit $rc
