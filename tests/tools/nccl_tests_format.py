#!/usr/bin/env python3
"""Check that benchmark output is in nccl-tests' format: the text table on
stdin and, with --json, the document written by -J. Written from the format
nccl-tests prints and documents (src/common.cu, src/util.cu of
NVIDIA/nccl-tests: the column headers, the row layout, the "not measured"
filler, the footer lines and the JSON writer's keys), not from rmacoll-perf.

Text rules:
 - a "# nThread N nGpus N minBytes ... validation: V ..." line (V: the -c
   value); a header line holding "out-of-place" and "in-place", then the
   names line "size count type redop root T algbw busbw #wrong T algbw busbw
   #wrong [timestamp]" (T = time, or cputime with -C 1) and the units line;
 - every row: "%12li  %12li  %8s  %6s  %6s" (size, count, type, redop,
   root: 52 characters), then per variant (out-of-place, in-place) either a
   body "  time  algbw  busbw  #wrong" whose time/algbw/busbw are numbers
   and whose #wrong is a number, or N/A when validation is 0 (nccl-tests'
   -c 0), or nccl-tests' not-measured filler: 32 spaces (its
   writeBenchMarkLineNullBody); "N/A" in time/algbw/busbw is not nccl-tests
   output and fails;
 - busbw = algbw * (n-1)/n (nccl-tests' alltoall) with --ranks n, and with
   --algbw-size algbw = size / time (GB/s, 1e9; nccl-tests' definition, which
   rmacoll-perf's holds where every rank moves the row's size: --dist
   uniform), within the printed rounding;
 - "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X",
   "# Collective test concluded: NAME", the "#  Rank" lines as nccl-tests'
   parseRankInfo reads them.

JSON rules (--json FILE; the text must then say "# Writing JSON output to
P", and P is the file read, as nccl-tests may write FILE.0 etc.): the
top-level keys version, start_time, args, env, nccl_version, config,
results, out_of_bounds, average_bus_bandwidth, errors, end_time; config's
nthreads, ngpus, minimum_bytes, maximum_bytes, step_factor or step_bytes,
warmup_iters, iterations, aggregated_iterations, validation, graph,
blocking_collectives, parallel_init, devices (rank, group, pid, hostname,
device, device_hex, device_info); each result's size, count, type, redop,
root (a string), out_of_place and in_place (null when not measured, else
time or cpu_time, alg_bw, bus_bw, nwrong: null when not validated),
actual_iterations, experiment_name; the results are the text's rows, with
the same figures within the text's rounding.

Usage: TOOL ... | nccl_tests_format.py [--ranks N] [--min-rows N]
           [--json FILE] [--expect-in-place none|measured] [--algbw-size]
Exit 0 with "nccl_tests_format: ok: ..." on success; 1 and the reason.
"""
import json
import math
import os
import re
import sys

TYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half",
         "float", "double", "bfloat16", "char", "int", "float16", "float32",
         "float64", "f8e4m3", "f8e5m2"}
FILLER = " " * 32


def fail(msg):
    print("nccl_tests_format: FAIL: " + msg)
    sys.exit(1)


def num(s, what, line):
    try:
        v = float(s)
    except ValueError:
        fail("%s is not a number (%r) in row %r" % (what, s, line))
    if math.isnan(v) or math.isinf(v):
        fail("%s is %r in row %r" % (what, s, line))
    return v


def near(a, b, abs_tol, rel_tol=0.011):
    return abs(a - b) <= abs_tol + rel_tol * max(abs(a), abs(b))


def decimals(s):
    """Rounding step of a printed number ("12.34" -> 0.01, "1e+03" -> 1e3)."""
    if "e" in s or "E" in s:
        m, e = re.split("[eE]", s)
        return 10.0 ** (int(e) - (len(m.split(".")[1]) if "." in m else 0))
    return 10.0 ** -(len(s.split(".")[1]) if "." in s else 0)


def parse_body(rest, validation, line):
    """One variant's body at the start of rest: (dict or None, rest after).
    None is the 32-space not-measured filler."""
    if rest.startswith(FILLER) or (rest.strip() == "" and rest != ""):
        if not rest.startswith(FILLER):
            fail("not-measured filler is %d spaces, nccl-tests prints 32: %r"
                 % (len(rest), line))
        return None, rest[len(FILLER):]
    m = re.match(r"( +(\S+)){4}", rest)
    if m is None:
        fail("a variant has fewer than 4 fields: %r" % line)
    toks = rest[:m.end()].split()
    t, a, b, w = toks
    body = {"time": num(t, "time", line), "algbw": num(a, "algbw", line),
            "busbw": num(b, "busbw", line), "texts": (t, a, b)}
    if w == "N/A":
        if validation != 0:
            fail("#wrong is N/A but validation is %d: %r" % (validation, line))
        body["wrong"] = None
    else:
        if validation == 0:
            fail("#wrong %r but validation is 0 (nccl-tests prints N/A): %r"
                 % (w, line))
        body["wrong"] = num(w, "#wrong", line)
        if body["wrong"] != int(body["wrong"]) or body["wrong"] < 0:
            fail("#wrong %r is not a count: %r" % (w, line))
    return body, rest[m.end():]


def check_bw(size, body, ranks, line, algbw_size):
    t, a, b = body["texts"]
    if algbw_size and body["time"] > 0:
        alg = size / body["time"] / 1e3
        if not near(body["algbw"], alg, decimals(a) / 2 + 1e-9,
                    0.011 + decimals(t) / body["time"]):
            fail("algbw %s is not size/time = %g: %r" % (a, alg, line))
    if ranks is not None and ranks > 0:
        bus = body["algbw"] * (ranks - 1) / ranks
        if not near(body["busbw"], bus, decimals(b) / 2 + decimals(a) + 1e-9):
            fail("busbw %s is not algbw*(n-1)/n = %g: %r" % (b, bus, line))


def parse_text(text, ranks, algbw_size):
    lines = text.splitlines()
    nt = [l for l in lines if l.startswith("# nThread ")]
    if len(nt) != 1:
        fail("expected one '# nThread' line, got %d" % len(nt))
    m = re.search(r"validation: (-?\d+)", nt[0])
    if m is None:
        fail("no 'validation: N' in %r" % nt[0])
    validation = int(m.group(1))
    m = re.search(r"(?<!warmup)(?<!agg) iters: (\d+)", nt[0])
    iters = int(m.group(1)) if m else None

    hdr = [i for i, l in enumerate(lines)
           if l.startswith("#") and "out-of-place" in l and "in-place" in l]
    if len(hdr) != 1:
        fail("expected one header line with out-of-place and in-place, got %d"
             % len(hdr))
    h = hdr[0]
    if h + 2 >= len(lines):
        fail("the header is cut short")
    names = lines[h + 1].lstrip("#").split()
    want = ["size", "count", "type", "redop", "root"]
    if names[:5] != want or len(names) not in (13, 14):
        fail("column names %r are not nccl-tests'" % names)
    tname = names[5]
    if tname not in ("time", "cputime") or names[5:13] != [
            tname, "algbw", "busbw", "#wrong", tname, "algbw", "busbw", "#wrong"]:
        fail("variant column names %r are not nccl-tests'" % names[5:])
    stamps = len(names) == 14
    if stamps and names[13] != "timestamp":
        fail("extra column %r" % names[13])
    units = lines[h + 2].lstrip("#").split()
    if units[:8] != ["(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "(us)",
                     "(GB/s)", "(GB/s)"]:
        fail("units line %r is not nccl-tests'" % lines[h + 2])

    rows = []
    for l in lines[h + 3:]:
        if l.startswith("#"):
            continue
        if not re.match(r"^ *\d", l):
            continue
        if len(l) < 52:
            fail("row shorter than nccl-tests' 52-character preamble: %r" % l)
        pre = l[:52].split()
        if len(pre) != 5:
            fail("preamble %r is not size count type redop root" % l[:52])
        size, count = int(pre[0]), int(pre[1])
        if pre[2] not in TYPES:
            fail("type %r is not an nccl-tests type name" % pre[2])
        int(pre[4])
        rest = l[52:]
        oop, rest = parse_body(rest, validation, l)
        ip, rest = parse_body(rest, validation, l)
        if stamps:
            if not re.fullmatch(r" *\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", rest):
                fail("timestamp %r is not '%%Y-%%m-%%d %%H:%%M:%%S'" % rest)
        elif rest != "":
            fail("trailing text %r after the in-place variant: %r" % (rest, l))
        if oop is None and ip is None:
            fail("neither variant measured: %r" % l)
        for b in (oop, ip):
            if b is not None:
                check_bw(size, b, ranks, l, algbw_size)
        rows.append({"size": size, "count": count, "type": pre[2],
                     "redop": pre[3], "root": int(pre[4]), "oop": oop,
                     "ip": ip, "line": l})

    oob = [l for l in lines if l.startswith("# Out of bounds values : ")]
    if len(oob) != 1:
        fail("expected one '# Out of bounds values' line, got %d" % len(oob))
    m = re.fullmatch(r"# Out of bounds values : (\d+) (OK|FAILED)", oob[0].rstrip())
    if m is None:
        fail("bad line %r" % oob[0])
    if (int(m.group(1)) == 0) != (m.group(2) == "OK"):
        fail("count and verdict disagree: %r" % oob[0])
    avg = [l for l in lines if l.startswith("# Avg bus bandwidth    : ")]
    if len(avg) != 1:
        fail("expected one '# Avg bus bandwidth    :' line, got %d" % len(avg))
    avg_bw = num(avg[0].split(":")[1].split()[0], "avg bus bandwidth", avg[0])
    if not any(l.startswith("# Collective test concluded: ") for l in lines):
        fail("no '# Collective test concluded' line")

    rank_re = re.compile(r"^#  Rank +(-?\d+) Group +(\d+) Pid +(\d+) on +(\S+) "
                         r"device +(-?\d+) \[([^\]]+)\] (.+)$")
    rl = [l for l in lines if l.startswith("#  Rank")]
    if any(rank_re.match(l) is None for l in rl):
        fail("a '#  Rank' line does not parse")
    if "# Using devices" not in lines:
        fail("no '# Using devices' line")
    if ranks is not None and len(rl) != ranks:
        fail("%d rank lines, expected %d" % (len(rl), ranks))
    return {"validation": validation, "iters": iters, "rows": rows,
            "oob": int(m.group(1)), "avg_bw": avg_bw, "tname": tname,
            "ranks": len(rl), "lines": lines}


def need(d, key, types, where):
    if key not in d:
        fail("%s has no %r" % (where, key))
    if not isinstance(d[key], types) or isinstance(d[key], bool):
        fail("%s.%s is %r, not %s" % (where, key, d[key], types))
    return d[key]


def check_variant(v, where, validation, tname):
    if v is None:
        return None
    if not isinstance(v, dict):
        fail("%s is %r" % (where, v))
    key = "cpu_time" if tname == "cputime" else "time"
    t = need(v, key, (int, float), where)
    a = need(v, "alg_bw", (int, float), where)
    b = need(v, "bus_bw", (int, float), where)
    if "nwrong" not in v:
        fail("%s has no 'nwrong'" % where)
    w = v["nwrong"]
    if validation == 0 and w is not None:
        fail("%s.nwrong is %r with validation 0 (nccl-tests: null)" % (where, w))
    if validation != 0 and (not isinstance(w, (int, float)) or isinstance(w, bool)):
        fail("%s.nwrong is %r, not a number" % (where, w))
    return {"time": t, "algbw": a, "busbw": b, "wrong": w}


def same(jv, tv, where):
    if (jv is None) != (tv is None):
        fail("%s: JSON %s, text %s" % (where, "null" if jv is None else "measured",
                                       "not measured" if tv is None else "measured"))
    if jv is None:
        return
    for k, text in zip(("time", "algbw", "busbw"), tv["texts"]):
        if not near(jv[k], tv[k], decimals(text) / 2 + 1e-9, 1e-6):
            fail("%s.%s: JSON %r, text %s" % (where, k, jv[k], text))
    if tv["wrong"] != jv["wrong"]:
        fail("%s.nwrong: JSON %r, text %r" % (where, jv["wrong"], tv["wrong"]))


def parse_json(path, t):
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: %s" % (path, e))
    if not isinstance(d, dict):
        fail("the document is not an object")
    need(d, "version", int, "top")
    for k in ("start_time", "end_time"):
        s = need(d, k, str, "top")
        if not re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", s):
            fail("%s %r is not '%%Y-%%m-%%d %%H:%%M:%%S'" % (k, s))
    for k in ("args", "env", "errors"):
        if not all(isinstance(x, str) for x in need(d, k, list, "top")):
            fail("%s holds a non-string" % k)
    need(d, "nccl_version", int, "top")
    c = need(d, "config", dict, "top")
    for k in ("nthreads", "ngpus", "minimum_bytes", "maximum_bytes",
              "warmup_iters", "iterations", "aggregated_iterations",
              "validation", "graph"):
        need(c, k, int, "config")
    if ("step_factor" in c) == ("step_bytes" in c):
        fail("config needs exactly one of step_factor, step_bytes")
    for k in ("blocking_collectives", "parallel_init"):
        if need(c, k, str, "config") not in ("true", "false"):
            fail("config.%s is %r (nccl-tests: \"true\"/\"false\")" % (k, c[k]))
    if c["validation"] != t["validation"]:
        fail("config.validation %d, text %d" % (c["validation"], t["validation"]))
    if t["iters"] is not None and c["iterations"] != t["iters"]:
        fail("config.iterations %d, text %d" % (c["iterations"], t["iters"]))
    devs = need(c, "devices", list, "config")
    if len(devs) != t["ranks"]:
        fail("config.devices has %d entries, the text %d rank lines"
             % (len(devs), t["ranks"]))
    for i, dv in enumerate(devs):
        w = "config.devices[%d]" % i
        for k in ("rank", "group", "pid", "device"):
            need(dv, k, int, w)
        for k in ("hostname", "device_hex", "device_info"):
            need(dv, k, str, w)
        if dv["rank"] != i:
            fail("%s.rank is %d" % (w, dv["rank"]))
    res = need(d, "results", list, "top")
    if len(res) != len(t["rows"]):
        fail("%d results, %d text rows" % (len(res), len(t["rows"])))
    for i, (r, tr) in enumerate(zip(res, t["rows"])):
        w = "results[%d]" % i
        if not isinstance(r, dict):
            fail("%s is not an object" % w)
        for k in ("size", "count", "actual_iterations"):
            need(r, k, int, w)
        for k in ("type", "redop", "root", "experiment_name"):
            need(r, k, str, w)
        if (r["size"], r["count"], r["type"], r["redop"]) != (
                tr["size"], tr["count"], tr["type"], tr["redop"]):
            fail("%s is %r, the text row %r" % (w, (r["size"], r["count"], r["type"],
                                                   r["redop"]), tr["line"]))
        if int(r["root"]) != tr["root"]:
            fail("%s.root %r, text %d" % (w, r["root"], tr["root"]))
        if r["actual_iterations"] != c["iterations"]:
            fail("%s.actual_iterations %d, config.iterations %d"
                 % (w, r["actual_iterations"], c["iterations"]))
        for k in ("out_of_place", "in_place"):
            if k not in r:
                fail("%s has no %r" % (w, k))
        same(check_variant(r["out_of_place"], w + ".out_of_place", c["validation"],
                           t["tname"]), tr["oop"], w + ".out_of_place")
        same(check_variant(r["in_place"], w + ".in_place", c["validation"],
                           t["tname"]), tr["ip"], w + ".in_place")
    oob = need(d, "out_of_bounds", dict, "top")
    need(oob, "count", int, "out_of_bounds")
    if oob["count"] != t["oob"] or oob.get("okay") != ("true" if t["oob"] == 0 else "false"):
        fail("out_of_bounds %r, text %d" % (oob, t["oob"]))
    abw = need(d, "average_bus_bandwidth", dict, "top")
    bw = need(abw, "bandwidth", (int, float), "average_bus_bandwidth")
    if not near(bw, t["avg_bw"], 1e-6, 1e-5):
        fail("average_bus_bandwidth.bandwidth %r, text %r" % (bw, t["avg_bw"]))
    if "okay" not in abw:
        fail("average_bus_bandwidth has no 'okay'")
    return d


def main():
    ranks, min_rows, jpath, expect_ip, algbw_size = None, 1, None, None, False
    args = sys.argv[1:]
    while args:
        a = args.pop(0)
        if a == "--ranks":
            ranks = int(args.pop(0))
        elif a == "--min-rows":
            min_rows = int(args.pop(0))
        elif a == "--json":
            jpath = args.pop(0)
        elif a == "--algbw-size":
            algbw_size = True
        elif a == "--expect-in-place":
            expect_ip = args.pop(0)
        else:
            fail("unknown argument " + a)
    t = parse_text(sys.stdin.read(), ranks, algbw_size)
    if len(t["rows"]) < min_rows:
        fail("%d rows, expected at least %d" % (len(t["rows"]), min_rows))
    if expect_ip is not None:
        for r in t["rows"]:
            if (r["ip"] is None) != (expect_ip == "none"):
                fail("in-place is %s, expected %s: %r" % (
                    "not measured" if r["ip"] is None else "measured", expect_ip,
                    r["line"]))
    what = "text"
    if jpath is not None:
        wl = [l for l in t["lines"] if l.startswith("# Writing JSON output to ")]
        if len(wl) != 1:
            fail("-J given but no single '# Writing JSON output to' line")
        written = wl[0][len("# Writing JSON output to "):]
        if os.path.realpath(written).rsplit(".", 1)[0] != os.path.realpath(jpath) and \
                os.path.realpath(written) != os.path.realpath(jpath):
            fail("JSON written to %r, asked for %r" % (written, jpath))
        parse_json(written, t)
        what = "text and JSON"
    print("nccl_tests_format: ok: %s, %d rows (%d..%d bytes), %d ranks, "
          "validation %d, avg busbw %g"
          % (what, len(t["rows"]), t["rows"][0]["size"], t["rows"][-1]["size"],
             t["ranks"], t["validation"], t["avg_bw"]))


if __name__ == "__main__":
    main()
