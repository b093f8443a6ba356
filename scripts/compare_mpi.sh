#!/usr/bin/env bash
# compare_mpi.sh - rmacoll-perf against the MPI_Alltoallv baseline on the
# same sizes, distribution, seed and dtype, on one host: 1 node x 4 ranks
# and 2 virtual nodes x 2 ranks. Each run is repeated REPS times; per size
# it prints the median busbw of both and their ratio (rmacoll / MPI).
#
# Usage: scripts/compare_mpi.sh [BUILD_DIR] [-- extra benchmark options]
# Environment (defaults in brackets):
#   NP [4]  MIN [1K]  MAX [64M]  STEP [4]  DIST [zipf:1.2]  DTYPE [float32]
#   ITERS [20]  WARMUP [5]  REPS [3]  SEED [1]  CHECK [1]
#   ITERS_BYTES [256M]  ITERS_MAX [5000]  iterations per size: each size
#     runs on its own with max(ITERS, min(ITERS_MAX, ITERS_BYTES / size))
#     timed iterations and a tenth of that (at least WARMUP) untimed, as
#     OSU's benchmarks run more iterations of small messages: 20 calls of
#     1 KiB take 0.2 ms, inside this host's scheduling noise.
#     ITERS_BYTES=0: one run over all sizes with ITERS and WARMUP
#   TOPOLOGIES ["1x4 2x2"]  nodes x ranks-per-node, NODES*PPN must be NP
#   MPI_BTL [""]  e.g. "tcp,self" to push every MPI pair through TCP
#   OUT [a temporary directory]  where the JSON files are kept
# The MPI baseline has no notion of virtual nodes: it runs the same way in
# both topologies (shared memory inside the host), which is what an
# application would get from MPI on this machine.
set -euo pipefail

BUILD=${1:-build}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
EXTRA=("$@")

NP=${NP:-4}
MIN=${MIN:-1K}
MAX=${MAX:-64M}
STEP=${STEP:-4}
DIST=${DIST:-zipf:1.2}
DTYPE=${DTYPE:-float32}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
REPS=${REPS:-3}
SEED=${SEED:-1}
ITERS_BYTES=${ITERS_BYTES:-256M}
ITERS_MAX=${ITERS_MAX:-5000}
CHECK=${CHECK:-1}
TOPOLOGIES=${TOPOLOGIES:-"1x4 2x2"}
MPI_BTL=${MPI_BTL:-}
OUT=${OUT:-$(mktemp -d /tmp/rmacoll-compare.XXXXXX)}
mkdir -p "$OUT"

# Loopback only: the OFI transport between virtual nodes stays on lo.
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo

PERF=$BUILD/tools/rmacoll-perf
MPIPERF=$BUILD/tools/rmacoll-mpi-perf
for exe in "$PERF" "$MPIPERF"; do
    if [ ! -x "$exe" ]; then
        echo "compare_mpi: $exe not found (build first; the MPI baseline needs MPI)" >&2
        exit 2
    fi
done

MPIRUN=(mpirun -np "$NP" --bind-to none)
if [ "$(id -u)" = 0 ]; then
    MPIRUN+=(--allow-run-as-root)
fi
if [ "$NP" -gt "$(nproc)" ]; then
    MPIRUN+=(--oversubscribe)
fi
if [ -n "$MPI_BTL" ]; then
    MPIRUN+=(--mca btl "$MPI_BTL")
fi

# SIZE with an optional K/M/G suffix (powers of 1024) in bytes.
bytes() {
    local v=$1 m=1
    case $v in
        *[kK]) m=1024; v=${v%?} ;;
        *[mM]) m=$((1024 * 1024)); v=${v%?} ;;
        *[gG]) m=$((1024 * 1024 * 1024)); v=${v%?} ;;
    esac
    case $v in
        ''|*[!0-9]*) echo "compare_mpi: '$1' is not a size" >&2; exit 2 ;;
    esac
    echo $((v * m))
}

OPTS=(--dist "$DIST" -d "$DTYPE" --seed "$SEED" -c "$CHECK" -q
      ${EXTRA[@]+"${EXTRA[@]}"})
# Whole numbers the script computes with, checked before anything runs.
for v in NP ITERS WARMUP REPS STEP ITERS_MAX SEED CHECK; do
    case ${!v} in
        ''|*[!0-9]*) echo "compare_mpi: $v='${!v}' is not a whole number" >&2; exit 2 ;;
    esac
done
if [ "$REPS" -lt 1 ] || [ "$STEP" -lt 2 ] || [ "$ITERS" -lt 1 ] || [ "$ITERS_MAX" -lt 1 ]; then
    echo "compare_mpi: REPS ($REPS), ITERS ($ITERS) and ITERS_MAX ($ITERS_MAX) must be at" \
         "least 1 and STEP ($STEP) at least 2" >&2
    exit 2
fi
lo_b=$(bytes "$MIN") || exit 2
hi_b=$(bytes "$MAX") || exit 2
if [ "$lo_b" -lt 1 ] || [ "$hi_b" -lt "$lo_b" ]; then
    echo "compare_mpi: MIN ($MIN) must be at least 1 and at most MAX ($MAX)" >&2
    exit 2
fi

# One run per entry: "minbytes maxbytes iters warmup".
RUNS=()
target=$(bytes "$ITERS_BYTES") || exit 2
if [ "$target" -eq 0 ]; then
    RUNS=("$MIN $MAX $ITERS $WARMUP")
else
    size=$(bytes "$MIN") || exit 2
    max=$(bytes "$MAX") || exit 2
    while [ "$size" -le "$max" ]; do
        n=$((target / size))
        [ "$n" -gt "$ITERS_MAX" ] && n=$ITERS_MAX
        [ "$n" -lt "$ITERS" ] && n=$ITERS
        w=$((n / 10))
        [ "$w" -lt "$WARMUP" ] && w=$WARMUP
        RUNS+=("$size $size $n $w")
        [ "$STEP" -le 1 ] && break
        size=$((size * STEP))
    done
fi

# busbw per size from a JSON file (perfrun's rows), through Python's json
# module rather than patterns over cJSON's layout.
rows() {
    python3 -c '
import json, sys
for r in json.load(open(sys.argv[1])).get("rows", []):
    print(r["size"], r["busbw_gbs"], r["wrong"])' "$1"
}

# Median busbw per size over files $@: "size median wrong_total".
median() {
    for f in "$@"; do rows "$f"; done | sort -k1,1n -k2,2g | awk '
        { size[NR] = $1; bw[NR] = $2; wrong[$1] += $3 }
        END {
            i = 1
            while (i <= NR) {
                j = i; while (j + 1 <= NR && size[j + 1] == size[i]) j++;
                n = j - i + 1; m = i + int((n - 1) / 2);
                med = (n % 2) ? bw[m] : (bw[m] + bw[m + 1]) / 2;
                print size[i], med, wrong[size[i]];
                i = j + 1
            }
        }'
}

status=0
for topo in $TOPOLOGIES; do
    nodes=${topo%x*}
    ppn=${topo#*x}
    if [ $((nodes * ppn)) -ne "$NP" ]; then
        echo "compare_mpi: topology $topo does not hold NP=$NP ranks" >&2
        exit 2
    fi
    rfiles=()
    mfiles=()
    for rep in $(seq 1 "$REPS"); do
        for run in "${RUNS[@]}"; do
            read -r lo hi n w <<<"$run"
            r=$OUT/rmacoll_${topo}_${lo}_$rep.json
            m=$OUT/mpi_${topo}_${lo}_$rep.json
            # -a 3: the time of the slowest rank, as before -a defaulted to
            # nccl-tests' mean (issue 34 item 5); both tools alike
            args=(-b "$lo" -e "$hi" -f "$STEP" -n "$n" -w "$w" -a 3 "${OPTS[@]}")
            if ! "$PERF" -np "$NP" --ppn "$ppn" "${args[@]}" --json "$r" >"$r.log" 2>&1; then
                echo "compare_mpi: rmacoll-perf failed ($topo, -b $lo, rep $rep); see $r.log" >&2
                tail -5 "$r.log" >&2
                status=1
            fi
            if ! "${MPIRUN[@]}" "$MPIPERF" "${args[@]}" --json "$m" >"$m.log" 2>&1; then
                echo "compare_mpi: MPI baseline failed ($topo, -b $lo, rep $rep); see $m.log" >&2
                tail -5 "$m.log" >&2
                status=1
            fi
            [ -s "$r" ] && rfiles+=("$r")
            [ -s "$m" ] && mfiles+=("$m")
            # Paired ratio of this repetition (rmacoll and MPI ran back to back).
            if [ -s "$r" ] && [ -s "$m" ]; then
                join <(rows "$r" | sort -k1,1) <(rows "$m" | sort -k1,1) |
                    awk '$4 + 0 > 0 { printf "%s %.4f\n", $1, $2 / $4 }' >>"$OUT/pairs_${topo}"
            fi
        done
    done
    if [ "$target" -eq 0 ]; then
        iters="iters $ITERS"
    else
        iters="iters per size max($ITERS, min($ITERS_MAX, $ITERS_BYTES / size))"
    fi
    echo "# topology ${nodes} node(s) x ${ppn} rank(s), dist $DIST, dtype $DTYPE," \
         "$iters, reps $REPS (medians), check $CHECK"
    echo "# ratio: of the medians; range: lowest and highest ratio of one repetition's back-to-back pair"
    printf "# %12s %16s %16s %8s %13s %8s\n" "size(B)" "rmacoll(GB/s)" "mpi(GB/s)" "ratio" "range" "#wrong"
    touch "$OUT/pairs_${topo}"
    join -a1 -a2 -e NA -o 0,1.2,2.2,1.3,2.3 \
        <(median ${rfiles[@]+"${rfiles[@]}"} | sort -k1,1) \
        <(median ${mfiles[@]+"${mfiles[@]}"} | sort -k1,1) | sort -k1,1 |
    join -a1 -e NA -o 0,1.2,1.3,1.4,1.5,2.2,2.3 - \
        <(sort -k1,1 -k2,2g "$OUT/pairs_${topo}" |
          awk '{ if (!($1 in lo)) lo[$1] = $2; hi[$1] = $2 }
               END { for (k in lo) print k, lo[k], hi[k] }' | sort -k1,1) |
    sort -k1,1n |
    awk '{
        ratio = ($2 != "NA" && $3 != "NA" && $3 + 0 > 0) ? sprintf("%.2f", $2 / $3) : "NA";
        wrong = ($4 == "NA" ? 0 : $4) + ($5 == "NA" ? 0 : $5);
        range = ($6 != "NA") ? sprintf("%.2f-%.2f", $6, $7) : "NA";
        printf "  %12s %16s %16s %8s %13s %8d\n", $1, $2, $3, ratio, range, wrong }'
    echo
done
echo "# JSON and logs in $OUT"
exit $status
