#!/usr/bin/env python3
"""long_functions.py - lists the functions of core/ and transports/ longer
than a limit (docs/architecture.md: no function over ~80 lines without a
reason written at its top).

A function runs from its opening brace at column 0 to the next closing
brace at column 0; its length counts both braces. A function whose first
body line (or the comment just above it) starts with "Long because:" is
listed as explained. Only reports: the exit status is 0 unless --strict is
given, then 1 when an unexplained long function is found.

Usage: long_functions.py [--src DIR] [--limit N] [--strict]
"""
import argparse
import os
import re
import sys

EXT = (".c", ".cu", ".cc", ".cpp", ".h")
NAME_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def functions(path):
    lines = open(path, errors="replace").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith("{"):
            start = i
            end = start + 1
            while end < len(lines) and not lines[end].startswith("}"):
                end += 1
            if end >= len(lines):
                return
            # the name: the last identifier before "(" in the lines above
            name = "?"
            head_start = start
            for k in range(start - 1, max(-1, start - 24), -1):
                if lines[k].strip() == "" or lines[k].rstrip().endswith(("*/", ";", "}")):
                    break
                head_start = k
            head = " ".join(lines[head_start:start])
            m = NAME_RE.search(head)
            if m:
                name = m.group(1)
            above = "\n".join(lines[max(0, head_start - 6):head_start])
            inside = "\n".join(lines[start + 1:start + 4])
            why = "Long because:" in inside or above.rstrip().endswith("*/") and \
                "Long because:" in above.rsplit("/*", 1)[-1]
            yield name, head_start + 1, end - start + 1, why
            i = end + 1
        else:
            i += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--limit", type=int, default=80)
    ap.add_argument("--strict", action="store_true")
    a = ap.parse_args()
    bad = 0
    for top in ("core", "transports"):
        for dirpath, dirs, names in os.walk(os.path.join(a.src, top)):
            dirs.sort()
            for n in sorted(names):
                if not n.endswith(EXT):
                    continue
                path = os.path.join(dirpath, n)
                rel = os.path.relpath(path, a.src)
                for name, line, length, why in functions(path):
                    if length > a.limit:
                        print(f"{rel}:{line}: {name}: {length} lines"
                              + (" (Long because: given)" if why else ""))
                        bad += not why
    print(f"long_functions: {bad} function(s) over {a.limit} lines without a reason",
          file=sys.stderr)
    return 1 if a.strict and bad else 0


if __name__ == "__main__":
    sys.exit(main())
