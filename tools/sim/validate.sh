#!/bin/bash
# Real runs for the model validation of docs/sim.md: parameters (-np 2),
# then every scheduler on 2 and 3 virtual nodes of 2, tcp and shm, 3 times.
# Results: one rmacoll-perf JSON per run in $OUT (default sim-validate/).
cd "$(dirname "$0")/../.."
P=./build/tools/rmacoll-perf
O=${OUT:-sim-validate}; mkdir -p $O
export FI_TCP_IFACE=lo
for prov in tcp shm; do
  if [ $prov = shm ]; then export RMACOLL_OFI_PROVIDER=shm; else unset RMACOLL_OFI_PROVIDER; fi
  for rep in 1 2 3; do
    timeout 120 $P -np 2 --ppn 1 --dist uniform -b 1K -e 16M -f 4 -n 10 -w 3 --no-check --json $O/net_${prov}_$rep.json > /dev/null 2>&1
  done
done
unset RMACOLL_OFI_PROVIDER
for rep in 1 2 3; do
  timeout 120 $P -np 2 --ppn 2 --dist uniform -b 1K -e 16M -f 4 -n 10 -w 3 --no-check --json $O/ce_$rep.json > /dev/null 2>&1
done
for prov in tcp shm; do
  if [ $prov = shm ]; then export RMACOLL_OFI_PROVIDER=shm; else unset RMACOLL_OFI_PROVIDER; fi
  for rep in 1 2 3; do
    for s in shift node_shift xor random largest_first; do
      timeout 120 $P -np 4 --ppn 2 --scheduler $s --dist zipf:1.2 -b 1M -e 16M -f 4 -n 10 -w 3 --no-check --json $O/val_${prov}_${s}_$rep.json > /dev/null 2>&1
      timeout 120 $P -np 6 --ppn 2 --scheduler $s --dist zipf:1.2 -b 1M -e 16M -f 4 -n 10 -w 3 --no-check --json $O/val6_${prov}_${s}_$rep.json > /dev/null 2>&1
    done
  done
done
echo finished > $O/DONE
