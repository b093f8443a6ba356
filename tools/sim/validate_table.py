#!/usr/bin/env python3
"""validate_table.py - model versus measurement from the runs of validate.sh.

Usage: tools/sim/validate_table.py RESULTS_DIR [BUILD_DIR [FIT_DIR]]

1. Fits the fabric parameters of this machine from the parameter runs
   (net_{tcp,shm}_R.json: -np 2 --ppn 1 uniform, half of each rank's bytes
   cross the network; ce_R.json: -np 2 --ppn 2, every byte is a host CE copy):
   bandwidth = least-squares slope of time against bytes over 1..16 MiB,
   per-call constant = median time of the 1 KiB call. The 1 KiB call makes
   five one-way network trips (metadata and agreement: two round trips; data:
   one put and its signal), so nic latency = t(1K) / 5 and call_us = the rest.
   Writes FIT_DIR/fabric-fit-{tcp,shm}.yaml (default: a new temporary
   folder, so a committed RESULTS_DIR stays as it is).
2. Runs `rmacoll-plan --sim` with the fitted model for every validation run
   (val[6]_PROV_SCHED_R.json: zipf:1.2, 2 or 3 virtual nodes of 2 ranks;
   v16nN_PROV_SCHED_R.json: 16 ranks on N virtual nodes, validate.sh NP16=1) and
   prints, per configuration and size, the measured time per call (median and
   minimum of the repetitions, each repetition the mean of its iterations),
   the model's, the error (model - median) / median, the spread of the
   repetitions (max / min), and per configuration the Kendall rank correlation
   between the model's and the measured ordering of the schedulers.
Only the standard library is used.
"""
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

SCHEDS = ["shift", "node_shift", "xor", "random", "largest_first"]


def rows(path):
    with open(path) as f:
        doc = json.load(f)
    return {r["size"]: r["time_us"] for r in doc["rows"]}


def medians(files):
    per = {}
    for f in files:
        for s, t in rows(f).items():
            per.setdefault(s, []).append(t)
    return {s: statistics.median(v) for s, v in per.items()}


def fit(med, frac):
    """t = c + frac*size / bw over sizes >= 1 MiB; returns (GB/s, t(1K))."""
    pts = [(frac * s, t) for s, t in med.items() if s >= (1 << 20)]
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return 1e-3 / slope, med[min(med)]          # bytes/us -> GB/s


def write_model(path, prov, nic_bw, t_net, ce_bw, t_ce):
    lat = t_net / 5.0
    with open(path, "w") as f:
        f.write(f"# fitted by tools/sim/validate_table.py from validate.sh's parameter runs\n")
        f.write(f'name: "this box, fitted: {prov} between virtual nodes, host CE inside"\n')
        f.write(f"nic: {{bandwidth_GBps: {nic_bw:.3f}, latency_us: {lat:.1f}}}\n")
        f.write("pcie: {bandwidth_GBps: 0}\n")
        f.write(f"nvlink: {{bandwidth_GBps: {ce_bw:.3f}, bidir_GBps: 0, latency_us: {t_ce / 2:.1f}}}\n")
        f.write(f"self: {{bandwidth_GBps: {ce_bw:.3f}}}\n")
        f.write(f"host: {{put_us: 1, batch_us: 1, call_us: {t_net - lat:.1f}}}\n")
    return lat


def model_times(plan, model, nodes, size, ppn=2):
    topo = ",".join([str(ppn)] * nodes)
    out = subprocess.run([plan, "--topology", topo, "--dist", "zipf:1.2", "--perf-size", str(size),
                          "--sim", "--scheduler", "all", "--model", model, "--json"],
                         check=True, capture_output=True, text=True).stdout
    doc = json.loads(out)
    return {r["scheduler"]: r["makespan_us"] for r in doc["results"]}


def kendall(a, b):
    keys = list(a)
    c = d = 0
    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            x = (a[keys[i]] - a[keys[j]]) * (b[keys[i]] - b[keys[j]])
            if x > 0:
                c += 1
            elif x < 0:
                d += 1
    pairs = len(keys) * (len(keys) - 1) / 2
    return (c - d) / pairs


def need(files, what):
    if not files:
        sys.exit(f"validate_table.py: no {what} in the results folder (run validate.sh first)")
    return files


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        sys.exit(2)
    res = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) > 2 else "build"
    fitdir = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="rmacoll-fit-")
    plan = os.path.join(build, "tools", "rmacoll-plan")
    if not os.path.isdir(res):
        sys.exit(f"validate_table.py: {res}: not a folder")
    if not os.access(plan, os.X_OK):
        sys.exit(f"validate_table.py: {plan} not found (build first, or name BUILD_DIR)")
    ce_bw, t_ce = fit(medians(need(glob.glob(f"{res}/ce_*.json"), "ce_*.json")), 1.0)
    print(f"CE (host, process_vm_writev): {ce_bw:.2f} GB/s per rank, 1 KiB call {t_ce:.1f} us")
    models = {}
    provs = [p for p in ("tcp", "shm") if glob.glob(f"{res}/net_{p}_*.json")]
    need(provs, "net_{tcp,shm}_*.json")
    for prov in provs:
        nic_bw, t_net = fit(medians(need(glob.glob(f"{res}/net_{prov}_*.json"),
                                         f"net_{prov}_*.json")), 0.5)
        path = f"{fitdir}/fabric-fit-{prov}.yaml"
        lat = write_model(path, prov, nic_bw, t_net, ce_bw, t_ce)
        models[prov] = path
        print(f"network {prov}: {nic_bw:.2f} GB/s, 1 KiB call {t_net:.1f} us "
              f"(latency {lat:.1f} us, call_us {t_net - lat:.1f}) -> {path}")
    print()
    print("| provider, ranks | size per rank | " + " | ".join(SCHEDS) + " | Kendall tau |")
    print("|---|---|" + "---|" * (len(SCHEDS) + 1))
    errs = []
    errs16 = []
    taus = []
    for prov in provs:
        for pre, nodes, ppn in (("val", 2, 2), ("val6", 3, 2), ("v16n2", 2, 8),
                                ("v16n4", 4, 4), ("v16n8", 8, 2)):
            meas = {}
            for s in SCHEDS:
                for f in glob.glob(f"{res}/{pre}_{prov}_{s}_*.json"):
                    for size, t in rows(f).items():
                        meas.setdefault(size, {}).setdefault(s, []).append(t)
            for size in sorted(meas):
                mod = model_times(plan, models[prov], nodes, size, ppn)
                cells = []
                med = {}
                for s in SCHEDS:
                    v = meas[size].get(s, [])
                    if not v:
                        cells.append("-")
                        continue
                    m = statistics.median(v)
                    med[s] = m
                    e = (mod[s] - m) / m
                    errs.append(abs(e))
                    if pre.startswith("v16"):
                        errs16.append(abs(e))
                    cells.append(f"{m:.0f} (min {min(v):.0f}, x{max(v) / min(v):.2f}) / {mod[s]:.0f} ({e:+.0%})")
                tau = kendall({s: mod[s] for s in med}, med)
                taus.append(tau)
                print(f"| {prov}, {nodes} x {ppn} | {size >> 20} MiB | " + " | ".join(cells) + f" | {tau:+.2f} |")
    print()
    print(f"|error| over all cells: median {statistics.median(errs):.0%}, max {max(errs):.0%}; "
          f"Kendall tau: median {statistics.median(taus):+.2f}")
    if errs16:
        print(f"|error| over the 16-rank cells: median {statistics.median(errs16):.0%}, "
              f"max {max(errs16):.0%} ({len(errs16)} cells)")


if __name__ == "__main__":
    main()
