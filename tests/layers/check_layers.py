#!/usr/bin/env python3
"""check_layers.py - the layering of core/ (docs/architecture.md), checked.

The layers, lowest first; a folder may include and call only its own folder
and the folders before it:

    base < config < oob < plan < xport < ctrl < exec < comm

Rules:
  include  every #include "core/X/..." in core/Y/ has X at or below Y;
  outside  transports/ and sched/ include no core/ header (they see the
           public headers only: rmacoll_transport.h, rmacoll_sched.h);
  symbol   (with --objects) every symbol an object of core/Y/ needs from
           another object of the library is defined in core/Y/ or below,
           and the folders' call graph has no circle;
  files    (with --objects) inside a folder whose header comment lists
           "files, lowest first", a file calls only the files before it.

Exceptions are lines of --allow (see allowed.txt); an exception that no
longer matches anything is reported too, so the list only shrinks.

Usage:
  check_layers.py --src DIR [--objects FILE] [--nm NM] [--nm-output FILE]
                  [--allow FILE]
--objects: a file listing the library's object files, one a line (the
  build writes it); --nm-output: nm -A output to read instead of running nm
  (the checker's own tests feed it one). Exit 0 when every rule holds,
  1 with one line per violation.
"""
import argparse
import os
import re
import subprocess
import sys

LAYERS = ["base", "config", "oob", "plan", "xport", "ctrl", "exec", "comm"]
RANK = {name: i for i, name in enumerate(LAYERS)}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"core/([A-Za-z0-9_]+)/([^"]+)"', re.M)
ANY_CORE_RE = re.compile(r'^\s*#\s*include\s+"core/[^"]*"', re.M)
SOURCE_EXT = (".c", ".h", ".cu", ".cc", ".cpp")


def read_allow(path):
    allow = set()
    if not path:
        return allow
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                allow.add(" ".join(line.split()))
    return allow


def sources(root):
    for dirpath, _, names in os.walk(root):
        for n in sorted(names):
            if n.endswith(SOURCE_EXT):
                yield os.path.join(dirpath, n)


def check_includes(src, out):
    """Rules include and outside; appends (key, message) to out."""
    core = os.path.join(src, "core")
    for path in sources(core):
        rel = os.path.relpath(path, src)
        parts = rel.split(os.sep)
        if len(parts) < 3:
            out.append(("layout " + rel, f"{rel}: a core file outside a layer folder"))
            continue
        own = parts[1]
        if own not in RANK:
            out.append(("layout " + rel, f"{rel}: core/{own}/ is not a layer of {LAYERS}"))
            continue
        text = open(path, errors="replace").read()
        for m in INCLUDE_RE.finditer(text):
            dep = m.group(1)
            target = f"core/{dep}/{m.group(2)}"
            if dep not in RANK:
                out.append((f"include {rel} {target}", f"{rel}: includes {target}: "
                            f"core/{dep}/ is not a layer"))
            elif RANK[dep] > RANK[own]:
                out.append((f"include {rel} {target}", f"{rel}: includes {target}: "
                            f"{dep} is above {own} (upward include)"))
    for top in ("transports", "sched"):
        for path in sources(os.path.join(src, top)):
            rel = os.path.relpath(path, src)
            text = open(path, errors="replace").read()
            for m in ANY_CORE_RE.finditer(text):
                out.append((f"outside {rel}", f"{rel}: {m.group(0).strip()}: {top}/ "
                            "includes no core/ header (public headers only)"))


def nm_listing(objects, nm):
    res = subprocess.run([nm, "-A"] + objects, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"check_layers: {nm} failed: {res.stderr.strip()}")
    return res.stdout


OBJ_RE = re.compile(r"(?:^|/)core/([A-Za-z0-9_]+)/([^/:]+?)(?:\.o|\.obj)$")


def parse_nm(text):
    """{object: (folder, file)}, {symbol: object defining it}, [(object, symbol)]."""
    where, defs, undefs = {}, {}, []
    for line in text.splitlines():
        # "obj: addr T sym" or "obj:          U sym" (nm -A)
        m = re.match(r"^(.*?):\s*(?:[0-9a-fA-F]+\s+)?([A-Za-z])\s+(\S+)$", line)
        if not m:
            continue
        obj, kind, sym = m.groups()
        om = OBJ_RE.search(obj)
        if om is None:
            continue                  # generated tables, transports, sched
        where[obj] = (om.group(1), om.group(2))
        if kind == "U":
            undefs.append((obj, sym))
        elif kind.isupper():
            defs[sym] = obj
    return where, defs, undefs


def file_orders(src):
    """{folder: [file, ...]} from header comments that list the files
    "lowest first" (e.g. core/exec/state.h)."""
    orders = {}
    for layer in LAYERS:
        d = os.path.join(src, "core", layer)
        if not os.path.isdir(d):
            continue
        for n in sorted(os.listdir(d)):
            if not n.endswith(".h"):
                continue
            text = open(os.path.join(d, n), errors="replace").read()
            m = re.search(r"files, lowest first.*?\n((?:\s*\*.*\n)+?)\s*\*/", text)
            if m:
                block = m.group(1)
                # the list starts after the rule's own sentence
                names = re.findall(r"\b([A-Za-z0-9_]+\.[ch])\b", block)
                if names:
                    orders[layer] = names
    return orders


def find_cycle(edges):
    seen, stack = {}, []

    def visit(n):
        seen[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if seen.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in seen:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        seen[n] = 2
        return None

    for n in sorted(edges):
        if n not in seen:
            c = visit(n)
            if c:
                return c
    return None


def check_symbols(src, listing, out):
    where, defs, undefs = parse_nm(listing)
    if not where:
        out.append(("objects", "no core/ object in the listing (wrong --objects?)"))
        return
    orders = file_orders(src)
    edges = {}
    for obj, sym in undefs:
        if sym not in defs:
            continue                  # libc, third parties, other parts of the library
        (fa, na), (fb, nb) = where[obj], where[defs[sym]]
        if fa != fb:
            edges.setdefault(fa, set()).add(fb)
            if RANK.get(fb, -1) > RANK.get(fa, -1):
                out.append((f"symbol {fa} {fb} {sym}",
                            f"core/{fa}/{na} calls {sym} of core/{fb}/{nb}: "
                            f"{fb} is above {fa} (upward call)"))
        elif fa in orders and na != nb:
            order = orders[fa]
            if na in order and nb in order and order.index(nb) > order.index(na):
                out.append((f"file {fa} {na} {nb} {sym}",
                            f"core/{fa}/{na} calls {sym} of {nb}, which comes after it "
                            f"in core/{fa}/'s file order"))
            elif na not in order or nb not in order:
                missing = na if na not in order else nb
                out.append((f"file {fa} {missing}",
                            f"core/{fa}/{missing} is not in core/{fa}/'s file order"))
    cycle = find_cycle(edges)
    if cycle:
        out.append(("cycle " + " ".join(cycle),
                    "circle between folders: " + " -> ".join(cycle)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--objects")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--nm-output")
    ap.add_argument("--allow")
    a = ap.parse_args()
    found = []
    check_includes(a.src, found)
    if a.nm_output:
        check_symbols(a.src, open(a.nm_output).read(), found)
    elif a.objects:
        objs = [l.strip() for l in open(a.objects) if l.strip()]
        check_symbols(a.src, nm_listing(objs, a.nm), found)
    allow = read_allow(a.allow)
    used = set()
    bad = []
    for key, msg in found:
        k = " ".join(key.split())
        if k in allow:
            used.add(k)
        else:
            bad.append(msg)
    for k in sorted(allow - used):
        if k.startswith(("symbol", "cycle")) and not (a.objects or a.nm_output):
            continue                  # symbol exceptions need the objects
        bad.append(f"allowed exception no longer needed (remove it): {k}")
    for msg in sorted(set(bad)):
        print(msg)
    if bad:
        print(f"check_layers: {len(set(bad))} violation(s)", file=sys.stderr)
        return 1
    print("check_layers: the layers hold" + (" (includes and symbols)"
                                              if a.objects or a.nm_output else
                                              " (includes)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
