#!/usr/bin/env bash
# On the GPU machine (issue 32; one H200, no network): the emulated
# GPUDirect NIC (plugins/emunic, docs/transport-emunic.md) and libfabric
# shm's CUDA IPC path (ofi.hmem_device_only). Whole run under 8 minutes;
# every step has its own timeout; results under $OUT (default
# /tmp/emunic-out), a summary at the end.
#  1. builds libfabric with CUDA in the background (third_party/ or
#     shared/third_party/ of the checkout) for step 5; the device tool
#     carries only the checkout, so copy it in first (4 MB, untracked):
#     cp -r ../shared/third_party third_party;
#  2. builds rmacoll with CUDA (build-emunic/, Debian packages of .devpkgs
#     via scripts/gpu/setup.sh), -Werror, the plugin included;
#  3. gpu tests: test_emunic_pace, test_gpu_e2e test_cross_node_emunic;
#  4. rmacoll-perf, device memory, over the emulated NIC: 2 virtual nodes x
#     2 and x 4 ranks, 1 MiB .. 256 MiB per rank, uniform and zipf:1.2,
#     relay on/off, rate 48.5 GB/s and uncapped, registered (hmem) path;
#     the staged path at 48.5 GB/s for comparison; each row beside
#     rmacoll-plan --sim over a model of the same NIC (--perf-size) and
#     the emulated NIC's bound; the staged-bytes counter of every run.
#     Ranks are processes (rmacoll-perf has no thread mode), sharing the
#     GPU under MPS when it starts (EMUNIC_MPS=0: time-sliced);
#  5. shm's IPC path: scripts/gpu/shm_ipc_repro.c (libfabric only, no
#     rmacoll) in three progress modes, then rmacoll over shm with
#     ofi.hmem_device_only, with libfabric's warnings.
# Usage: bash scripts/gpu/emunic.sh   (OUT=dir to choose where results go;
#   EMUNIC_REPRO_MODES="busy both" leaves out the reproducer's slow mode;
#   EMUNIC_STEPS="3 5" runs only those of steps 3-5 after the build)
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/emunic-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/emunic.log") 2>&1
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
step() { echo; echo "==== $* (t+$(el)s)"; }
summary=()
note() { summary+=("$*"); echo ">> $*"; }
cd "$top" || exit 1
nvidia-smi -L || true
nproc
jobs_n=$(nproc)

step "1. libfabric with CUDA (background, for step 5)"
fi_dir=/tmp/fi-cuda
tp=""
for d in third_party shared/third_party /work/shared/third_party; do
  [ -f "$d/build-libfabric-cuda.sh" ] && { tp=$d; break; }
done
fi_pid=""
if [ -x "$fi_dir/bin/fi_info" ]; then
  echo "already built: $fi_dir"
elif [ -n "$tp" ]; then
  ( timeout -k 5 230 bash "$tp/build-libfabric-cuda.sh" "$fi_dir" > "$OUT/libfabric-build.log" 2>&1 ) &
  fi_pid=$!
  echo "building from $tp (pid $fi_pid, log $OUT/libfabric-build.log)"
else
  note "no third_party/build-libfabric-cuda.sh in the checkout: step 5 skipped"
fi

step "2. rmacoll with CUDA and the emunic plugin (build-emunic/)"
. "$top/scripts/gpu/setup.sh" /tmp/sysroot
set -x
timeout -k 5 60 cmake -S . -B build-emunic -DCMAKE_CUDA_ARCHITECTURES=90 -DRMACOLL_WERROR=ON \
  -DRMACOLL_BUILD_EMUNIC=ON > "$OUT/cmake.log" 2>&1
cfg_rc=$?
# step 5 alone needs rmacoll-perf only (EMUNIC_STEPS=5: the build is a few targets)
targets=()
[ "${EMUNIC_STEPS:-3 4 5}" = 5 ] && targets=(--target rmacoll-perf rmacoll-plan rmacoll_emunic)
timeout -k 5 240 cmake --build build-emunic -j"$jobs_n" "${targets[@]}" > "$OUT/build.log" 2>&1
build_rc=$?
set +x
grep -E "emunic:" "$OUT/cmake.log"
plugin=$top/build-emunic/plugins/emunic/librmacoll_emunic.so
if [ $cfg_rc != 0 ] || [ $build_rc != 0 ] || [ ! -f "$plugin" ]; then
  tail -40 "$OUT/cmake.log" "$OUT/build.log"
  note "BUILD FAILED (cmake $cfg_rc, build $build_rc): nothing else runs"
  printf '%s\n' "${summary[@]}" > "$OUT/summary.txt"
  exit 1
fi
note "build ok (t+$(el)s)"
perf=$top/build-emunic/tools/rmacoll-perf
plan=$top/build-emunic/tools/rmacoll-plan

want() { case " ${EMUNIC_STEPS:-3 4 5} " in *" $1 "*) return 0;; esac; note "step $1: not asked for (EMUNIC_STEPS)"; return 1; }
if want 3; then
step "3. gpu tests"
set -x
timeout -k 5 30 ./build-emunic/plugins/emunic/test_emunic_pace > "$OUT/test_emunic_pace.log" 2>&1
r=$?
set +x
tail -2 "$OUT/test_emunic_pace.log"; note "test_emunic_pace: rc $r"
set -x
RMACOLL_TEST_FILTER=test_cross_node_emunic timeout -k 5 150 ./build-emunic/tests/test_gpu_e2e \
  > "$OUT/test_cross_node_emunic.log" 2>&1
r=$?
set +x
if [ $r != 0 ]; then
  # every rank's first errors (the tail alone hides the rank that failed first)
  grep -nE "ERROR|rank [0-9]+ \(|exit [0-9]|FAILED|case " "$OUT/test_cross_node_emunic.log" | head -40
fi
grep -vE '^\[ +(RUN|OK) ' "$OUT/test_cross_node_emunic.log" | tail -12
note "test_gpu_e2e test_cross_node_emunic: rc $r (124 = timed out at 150 s)"
fi

if want 4; then
step "4. measurements over the emulated NIC"
mps=no
if [ "${EMUNIC_MPS:-1}" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/emunic-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/emunic-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if timeout -k 5 20 nvidia-cuda-mps-control -d; then
    mps=yes
    trap 'echo quit | timeout -k 5 10 nvidia-cuda-mps-control' EXIT
  else
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
fi
note "ranks are processes (rmacoll-perf has no thread mode); MPS: $mps"
# the simulator's model of the same NIC: the CX-7 defaults (48.5 GB/s, 3 us);
# uncapped: a NIC far faster than the copies (the emulation then runs at
# copy-engine speed, which the simulator's nvlink/self sections model)
cat > "$OUT/model-cx7.yaml" <<'EOF'
name: "emunic 48.5 GB/s, 3 us (= docs/sim/fabric-h200-cx7.yaml)"
nic: {bandwidth_GBps: 48.5, latency_us: 3.0}
EOF
cat > "$OUT/model-uncapped.yaml" <<'EOF'
name: "emunic uncapped (NIC 100000 GB/s), 3 us"
nic: {bandwidth_GBps: 100000.0, latency_us: 3.0}
pcie: {bandwidth_GBps: 0}
EOF
table=$OUT/table.tsv
printf 'ppn\tdist\trelay\trate\tpath\tbytes\ttime_us\tbusbw_GBps\tsim_us\tbound_us\tbound/time\tsim/time\twrong\n' > "$table"
# one rmacoll-perf run, then one rmacoll-plan --sim per size
measure() { # ppn dist relay rate path
  local ppn=$1 dist=$2 relay=$3 rate=$4 path=$5 np=$(( $1 * 2 ))
  local tag="ppn${ppn}_${dist/:/}_relay${relay}_rate${rate}_${path}" model
  [ "$rate" = 0 ] && model=$OUT/model-uncapped.yaml || model=$OUT/model-cx7.yaml
  if [ "$(el)" -gt 370 ]; then note "skipped $tag: past the time budget"; return; fi
  echo "---- $tag (t+$(el)s)"
  RMACOLL_LOG_LEVEL=debug RMACOLL_LOG_SUBSYSTEMS=none RMACOLL_TIMEOUT_MS=15000 \
  RMACOLL_TRANSPORTS_INTER_NODE=plugin:$plugin RMACOLL_EMUNIC_RATE=$rate RMACOLL_EMUNIC_LATENCY_US=3 \
  RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=$path \
    timeout -k 5 75 "$perf" --buffers cuda -np $np --ppn $ppn --dist "$dist" --relay $relay \
      -b 1M -e 256M -f 4 -n 3 -w 1 > "$OUT/perf_$tag.log" 2>&1
  local rc=$?
  grep -E "^ +[0-9]+ |device path|stats: device path|Out of bounds" "$OUT/perf_$tag.log" | \
    grep -E "^ +[0-9]|rank 0 stats|Out of bounds|# device" | head -12
  local staged
  staged=$(grep -oE "[0-9]+ bytes staged" "$OUT/perf_$tag.log" | awk '{s+=$1} END {print s+0}')
  note "$tag: rc $rc, staged bytes (all ranks) $staged$([ "$path" = hmem ] && [ "$staged" != 0 ] && echo ' MUST BE 0')"
  grep -E "^ +[0-9]+ " "$OUT/perf_$tag.log" | while read -r size _ _ _ _ time _ busbw wrong _; do
    local simrow sim bound
    simrow=$(timeout -k 5 20 "$plan" --sim --model "$model" --perf-size "$size" --topology "$ppn,$ppn" \
               --dist "$dist" --relay "$relay" 2>/dev/null | awk '$1 !~ /^#/ && $2 ~ /^[0-9.]+$/ {print $2, $3; exit}')
    sim=${simrow% *}; bound=${simrow#* }
    awk -v p="$ppn" -v d="$dist" -v rl="$relay" -v ra="$rate" -v pa="$path" -v s="$size" \
        -v t="$time" -v b="$busbw" -v si="${sim:-nan}" -v bo="${bound:-nan}" -v w="$wrong" \
      'BEGIN { printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%s\n", p, d, rl, ra, pa, s, t, b, si, bo, (bo+0)/(t+0), (si+0)/(t+0), w }' >> "$table"
  done
}
for ppn in 2 4; do
  for dist in uniform zipf:1.2; do
    for relay in on off; do
      for rate in 48.5e9 0; do
        measure $ppn $dist $relay $rate hmem
      done
    done
    measure $ppn $dist on 48.5e9 staged
  done
done
echo "---- table ($table): bound/time = fraction of the emulated NIC bound reached (aim >= 0.9 uniform, >= 0.8 zipf at 64 MiB), sim/time = simulator against measured (aim within 0.85..1.15)"
column -t -s $'\t' "$table" 2>/dev/null || cat "$table"
if [ "$mps" = yes ]; then echo quit | timeout -k 5 10 nvidia-cuda-mps-control; trap - EXIT; fi
fi

step "5. libfabric shm, device memory with FI_HMEM_DEVICE_ONLY (CUDA IPC)"
do5=no; want 5 && do5=yes
if [ -n "$fi_pid" ]; then
  echo "waiting for the libfabric build (pid $fi_pid)"
  wait "$fi_pid"; echo "libfabric build rc $?"; tail -3 "$OUT/libfabric-build.log"
fi
if [ $do5 = no ]; then
  :
elif [ -x "$fi_dir/bin/fi_info" ]; then
  # setup.sh put Debian's libfabric (1.x, no CUDA) on LD_LIBRARY_PATH, which
  # the loader searches before a binary's RUNPATH: the CUDA-built one must
  # come first for everything below (fi_info, the reproducer, rmacoll-perf)
  fi_ld=$fi_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  LD_LIBRARY_PATH=$fi_ld "$fi_dir/bin/fi_info" --version | head -2
  LD_LIBRARY_PATH=$fi_ld "$fi_dir/bin/fi_info" -p shm 2>&1 | grep -E "provider|hmem|FI_HMEM" | sort -u | head -4
  set -x
  timeout -k 5 60 gcc -O2 -o "$OUT/shm_ipc_repro" scripts/gpu/shm_ipc_repro.c -I"$fi_dir/include" \
    -I/usr/local/cuda/include -L"$fi_dir/lib" -Wl,-rpath,"$fi_dir/lib" -lfabric \
    -L/usr/local/cuda/lib64 -lcudart
  set +x
  if [ -x "$OUT/shm_ipc_repro" ]; then
    for donly in 1 0; do
      for mode in ${EMUNIC_REPRO_MODES:-busy late both}; do
        [ "$(el)" -gt 450 ] && { note "shm_ipc_repro $mode $donly: skipped, past the time budget"; continue; }
        LD_LIBRARY_PATH=$fi_ld FI_LOG_LEVEL=warn FI_LOG_PROV=shm \
          timeout -k 5 45 "$OUT/shm_ipc_repro" $mode $donly \
          > "$OUT/shm_ipc_repro_${mode}_$donly.log" 2>&1
        r=$?
        tail -6 "$OUT/shm_ipc_repro_${mode}_$donly.log"
        note "shm_ipc_repro $mode device_only=$donly: rc $r (0 ok, 2 STALL, 3 wrong bytes, 124 hung)"
      done
    done
  else
    note "shm_ipc_repro did not build"
  fi
  if [ "$(el)" -lt 440 ]; then
    # rmacoll over shm, libfabric with CUDA swapped in at run time (FI_HMEM
    # is probed by fi_getinfo, never at build time), device-only on
    for donly in 1 0; do
      # RMACOLL_LOG_SUBSYSTEMS=none would silence rmacoll's errors too: all
      # subsystems (debug for the stats line; the grep below picks the errors)
      LD_LIBRARY_PATH=$fi_ld FI_LOG_LEVEL=warn FI_LOG_PROV=shm \
      RMACOLL_LOG_LEVEL=debug RMACOLL_LOG_SUBSYSTEMS=all RMACOLL_TIMEOUT_MS=8000 \
      RMACOLL_TRANSPORTS_INTER_NODE=ofi RMACOLL_OFI_PROVIDER=shm RMACOLL_OFI_HMEM_DEVICE_ONLY=$donly \
      RMACOLL_TRANSPORTS_DEVICE_INTER_NODE=hmem \
        timeout -k 5 40 "$perf" --buffers cuda -np 4 --ppn 2 -b 16M -e 64M -f 4 -n 3 -w 1 \
          > "$OUT/perf_shm_device_only_$donly.log" 2>&1
      r=$?
      grep -E "^ +[0-9]+ |device path|libfabric:.*(warn|IPC|ipc|SAR)" \
        "$OUT/perf_shm_device_only_$donly.log" | sort | uniq -c | sort -rn | head -12
      # rmacoll's own errors and warnings (ERROR/WARN, any subsystem), in order,
      # with the pid:tid prefix cut so that the same line of each rank counts once
      grep -iE "error|warn|stalled|timed out|fail" "$OUT/perf_shm_device_only_$donly.log" | \
        grep -v "^libfabric" | sed -E 's/^[^ ]+:[0-9]+:[0-9]+ //' | awk '!seen[$0]++' | head -20
      note "rmacoll over shm, hmem, ofi.hmem_device_only=$donly: rc $r$([ $r != 0 ] && \
        grep -m1 -E "ERROR" "$OUT/perf_shm_device_only_$donly.log" | sed -E 's/^[^ ]+:[0-9]+:[0-9]+ /: /')"
    done
  fi
else
  note "no libfabric with CUDA: step 5 skipped"
fi

step "summary (t+$(el)s)"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
echo "results in $OUT"
