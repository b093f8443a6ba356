#!/usr/bin/env python3
"""Check rmacoll-plan --heat's SVG against the simulation it draws.

    check_heat_svg.py PLAN [--long-title] -- ARGS...

runs  PLAN ARGS --sim --json --heat TMP.svg  and checks, with xml.etree:
  - the SVG has a viewBox (0 0 width height) and every label and rectangle
    lies inside it (a label's width estimated at 0.6 em a character);
  - the matrix: as many row labels as 2 x the traced ranks (rail 0 of the
    first --trace-ranks nodes, default 8), columns that cover the JSON's
    rounds exactly (columns x rounds-per-column >= rounds, one column
    fewer would not), every cell on that grid, in its row's rank and
    direction;
  - the round axis: ticks at column centres, the first at round 0, the
    last ending at the last round (rounds - 1), each naming its column's
    rounds, none past the last round;
  - the colour scale: a gradient bar, its minimum label 0 B and its
    maximum label the largest cell's bytes, drawn in the gradient's last
    colour.
--long-title copies the --case file to a file name of 120 characters first,
so that the title (which names the case) is wider than the cells.
Prints "heat svg ok: ..." on success, raises on the first failure.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
EM = 0.6  # estimated character width, in font sizes


def fail(msg):
    sys.exit("check_heat_svg: FAIL: " + msg)


def num(e, a):
    return float(e.get(a))


def nodes_of(args):
    if "--topology" in args:
        t = args[args.index("--topology") + 1]
        m = re.fullmatch(r"(\d+)x(\d+)", t)
        return int(m.group(1)) if m else len(t.split(","))
    if "--case" in args:
        with open(args[args.index("--case") + 1]) as f:
            for ln in f:
                m = re.match(r"\s*topology\s*:\s*(\S+)", ln)
                if m:
                    return len(m.group(1).split(","))
    return None


def main():
    argv = sys.argv[1:]
    plan = argv[0]
    long_title = "--long-title" in argv[1:argv.index("--")]
    args = argv[argv.index("--") + 1:]
    tmp = tempfile.mkdtemp(prefix="heat_svg.")
    try:
        if long_title:
            i = args.index("--case") + 1
            # the title names the case by its file name (up to 127 characters)
            name = ("a-case-whose-file-name-is-long-enough-to-make-the-title-wider-than-"
                    "the-cells-of-the-heat-map-" + os.path.basename(args[i]))[:120]
            dst = os.path.join(tmp, name)
            shutil.copy(args[i], dst)
            args[i] = dst
        svg = os.path.join(tmp, "heat.svg")
        r = subprocess.run([plan] + args + ["--sim", "--json", "--heat", svg],
                           stdout=subprocess.PIPE, universal_newlines=True, timeout=300)
        if r.returncode != 0:
            fail("rmacoll-plan exited %d" % r.returncode)
        res = json.loads(r.stdout)["results"][0]
        check(ET.parse(svg).getroot(), res["rounds"], args, r.stdout)
    finally:
        shutil.rmtree(tmp)


def check(root, rounds, args, out):
    # viewBox, and everything inside it
    vb = root.get("viewBox")
    if vb is None:
        fail("no viewBox")
    x0, y0, W, H = (float(v) for v in vb.split())
    if (x0, y0) != (0, 0) or W != float(root.get("width")) or H != float(root.get("height")):
        fail("viewBox %s does not match width %s height %s" % (vb, root.get("width"),
                                                                root.get("height")))
    base_fs = float(root.get("font-size", 10))
    ntext = 0
    for t in root.iter(NS + "text"):
        s = "".join(t.itertext())
        fs = float(t.get("font-size", base_fs))
        w = len(s) * fs * EM
        x, y = num(t, "x"), num(t, "y")
        a = t.get("text-anchor", "start")
        left = x - (w if a == "end" else w / 2 if a == "middle" else 0)
        if left < 0 or left + w > W or y - fs < 0 or y + 0.25 * fs > H:
            fail("label %r (x %g..%g, y %g) outside the viewBox %gx%g" %
                 (s, left, left + w, y, W, H))
        ntext += 1
    for e in root.iter(NS + "rect"):
        if e.get("x") is None:
            continue
        if num(e, "x") < 0 or num(e, "y") < 0 or num(e, "x") + num(e, "width") > W or \
                num(e, "y") + num(e, "height") > H:
            fail("rectangle at %s,%s outside the viewBox" % (e.get("x"), e.get("y")))

    groups = {g.get("id"): g for g in root.iter(NS + "g")}
    for gid in ("row-labels", "cells", "x-ticks", "colour-scale"):
        if gid not in groups:
            fail("no group %s" % gid)
    # the matrix
    nodes = nodes_of(args)
    tr = int(args[args.index("--trace-ranks") + 1]) if "--trace-ranks" in args else 8
    rows_exp = 2 * min(tr, nodes)
    labels = ["".join(t.itertext()) for t in groups["row-labels"].iter(NS + "text")]
    if len(labels) != rows_exp:
        fail("%d row labels, expected %d (2 x %d traced ranks)" % (len(labels), rows_exp,
                                                                    min(tr, nodes)))
    cells = groups["cells"]
    ncols = int(cells.get("data-columns"))
    per = int(cells.get("data-rounds-per-column"))
    if int(cells.get("data-rounds")) != rounds:
        fail("the picture says %s rounds, the simulation %d" % (cells.get("data-rounds"), rounds))
    if not (ncols * per >= rounds > (ncols - 1) * per):
        fail("%d columns of %d rounds do not cover %d rounds exactly" % (ncols, per, rounds))
    axis = groups["x-ticks"].find(NS + "line")
    ax1, ax2 = num(axis, "x1"), num(axis, "x2")
    cw = (ax2 - ax1) / ncols
    row_y = [num(t, "y") for t in groups["row-labels"].iter(NS + "text")]
    rh = row_y[1] - row_y[0] if len(row_y) > 1 else None
    vals = []
    for e in cells.iter(NS + "rect"):
        c = (num(e, "x") - ax1) / cw
        if abs(c - round(c)) > 1e-6 or not 0 <= round(c) < ncols or \
                abs(num(e, "width") - cw) > 1e-6:
            fail("cell at x %s is not on the %d columns from %g, %g wide" %
                 (e.get("x"), ncols, ax1, cw))
        c = int(round(c))
        row = min(range(len(row_y)), key=lambda i: abs(row_y[i] - (num(e, "y") + num(e, "height"))))
        title = e.find(NS + "title").text
        m = re.fullmatch(r"(rank \d+ nic [rt]x), rounds? (\d+)(?:-(\d+))?: (\d+) B", title)
        if not m:
            fail("cell title %r" % title)
        if m.group(1) != labels[row]:
            fail("cell %r drawn in the row of %r" % (title, labels[row]))
        first, last = int(m.group(2)), int(m.group(3) or m.group(2))
        if (first, last) != (c * per, min((c + 1) * per, rounds) - 1):
            fail("cell %r in column %d" % (title, c))
        vals.append((int(m.group(4)), e.get("fill")))
    # the round axis
    ticks = [t for t in groups["x-ticks"].iter(NS + "text") if t.get("data-column")]
    if not ticks:
        fail("no ticks")
    prev = -1
    for t in ticks:
        c = int(t.get("data-column"))
        lab = "".join(t.itertext())
        want = ("%d-%d" % (c * per, min((c + 1) * per, rounds) - 1)) if per > 1 else str(c)
        if lab != want:
            fail("tick of column %d says %r, not %r" % (c, lab, want))
        if abs(num(t, "x") - (ax1 + (c + 0.5) * cw)) > 0.05:
            fail("tick %r at x %s, not at its column's centre %g" % (lab, t.get("x"),
                                                                   ax1 + (c + 0.5) * cw))
        if c <= prev or c >= ncols:
            fail("tick columns not increasing within 0..%d" % (ncols - 1))
        prev = c
    first_lab = "".join(ticks[0].itertext())
    last_lab = "".join(ticks[-1].itertext())
    if int(first_lab.split("-")[0]) != 0:
        fail("first tick %r is not round 0" % first_lab)
    if int(last_lab.split("-")[-1]) != rounds - 1:
        fail("last tick %r does not end at the last round %d" % (last_lab, rounds - 1))
    # the colour scale
    scale = groups["colour-scale"]
    grads = {g.get("id"): g for g in root.iter(NS + "linearGradient")}
    bar = [e for e in scale.iter(NS + "rect") if (e.get("fill") or "").startswith("url(#")]
    if not bar:
        fail("no colour-scale bar")
    gid = bar[0].get("fill")[5:-1]
    if gid not in grads:
        fail("colour-scale bar fills with %s, which is not defined" % gid)
    stops = grads[gid].findall(NS + "stop")
    mn = [t for t in scale.iter(NS + "text") if t.get("class") == "scale-min"]
    mx = [t for t in scale.iter(NS + "text") if t.get("class") == "scale-max"]
    if not mn or not mx:
        fail("colour scale without its minimum and maximum labels")
    if "".join(mn[0].itertext()) != "0 B":
        fail("colour scale minimum %r, not 0 B" % "".join(mn[0].itertext()))
    top = max(v for v, _ in vals) if vals else 0
    if "".join(mx[0].itertext()) != "%d B" % top:
        fail("colour scale maximum %r, the largest cell has %d B" %
             ("".join(mx[0].itertext()), top))
    for v, fill in vals:
        if v == top and fill != stops[-1].get("stop-color"):
            fail("the largest cell is %s, the scale's end %s" % (fill, stops[-1].get("stop-color")))
    print("heat svg ok: %d rounds in %d columns of %d, %d rows, %d cells, %d ticks, scale 0..%d B, "
          "%d labels inside %gx%g" % (rounds, ncols, per, len(labels), len(vals), len(ticks), top,
                                      ntext, W, H))


if __name__ == "__main__":
    main()
