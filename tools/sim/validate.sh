#!/bin/bash
# Real runs for the model validation of docs/sim.md: parameters (-np 2),
# then every scheduler on 2 and 3 virtual nodes of 2, tcp and shm, 3 times.
# Results: one rmacoll-perf JSON per run in $OUT (default sim-validate/).
# Knobs (environment): PROVS (default "tcp shm"); SMALL=0 skips the 2- and
# 3-node runs; NP16=1 adds 16 ranks on 2 x 8, 4 x 4 and 8 x 2 virtual nodes
# (v16nN_PROV_SCHED_R.json, schedulers SCHEDS16, default "shift node_shift
# xor"; REPS16 repetitions, default 2): issue 30's check of the model on a
# host with a core per rank (the GPU machine's 16 cores).
cd "$(dirname "$0")/../.."
P=${PERF:-./build/tools/rmacoll-perf}
O=${OUT:-sim-validate}; mkdir -p $O
PROVS=${PROVS:-tcp shm}
export FI_TCP_IFACE=lo
use() { if [ "$1" = shm ]; then export RMACOLL_OFI_PROVIDER=shm; else unset RMACOLL_OFI_PROVIDER; fi; }
for prov in $PROVS; do
  use $prov
  for rep in 1 2 3; do
    timeout 120 $P -np 2 --ppn 1 --dist uniform -b 1K -e 16M -f 4 -n 10 -w 3 --no-check --json $O/net_${prov}_$rep.json > /dev/null 2>&1
  done
done
unset RMACOLL_OFI_PROVIDER
for rep in 1 2 3; do
  timeout 120 $P -np 2 --ppn 2 --dist uniform -b 1K -e 16M -f 4 -n 10 -w 3 --no-check --json $O/ce_$rep.json > /dev/null 2>&1
done
if [ "${SMALL:-1}" != 0 ]; then
  for prov in $PROVS; do
    use $prov
    for rep in 1 2 3; do
      for s in shift node_shift xor random largest_first; do
        timeout 120 $P -np 4 --ppn 2 --scheduler $s --dist zipf:1.2 -b 1M -e 16M -f 4 -n 10 -w 3 --no-check --json $O/val_${prov}_${s}_$rep.json > /dev/null 2>&1
        timeout 120 $P -np 6 --ppn 2 --scheduler $s --dist zipf:1.2 -b 1M -e 16M -f 4 -n 10 -w 3 --no-check --json $O/val6_${prov}_${s}_$rep.json > /dev/null 2>&1
      done
    done
  done
fi
if [ "${NP16:-0}" = 1 ]; then
  for prov in $PROVS; do
    use $prov
    for rep in $(seq "${REPS16:-2}"); do
      for n in 2 4 8; do
        for s in ${SCHEDS16:-shift node_shift xor}; do
          timeout 120 $P -np 16 --ppn $((16 / n)) --scheduler $s --dist zipf:1.2 -b 1M -e 16M -f 4 -n 10 -w 3 --no-check --json $O/v16n${n}_${prov}_${s}_$rep.json > /dev/null 2>&1
        done
      done
    done
  done
fi
echo finished > $O/DONE
