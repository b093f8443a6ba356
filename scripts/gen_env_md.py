#!/usr/bin/env python3
"""docs/env.md's two tables, from what rmacoll-info prints.

    gen_env_md.py RMACOLL_INFO docs/env.md (--write | --check)

The tables of docs/env.md between the markers
    <!-- generated from rmacoll-info --json: ... -->   ...   <!-- end generated -->
are rendered from `rmacoll-info --json` (the configuration keys: variable,
key, type, default, meaning - the library's key table, core/config/
config_keys.c) and `rmacoll-info --runtime --json` (every other variable
with what reads it and its meaning - core/config/env.c), so the page says
what the library does (the relay rule in particular). --write rewrites the
file; --check prints a diff and exits 1 when the file differs.
"""
import difflib
import json
import os
import re
import subprocess
import sys

MARK = re.compile(r"(<!-- generated from rmacoll-info (--json|--runtime --json):[^\n]*-->\n)"
                  r"(.*?)(<!-- end generated -->)", re.S)


def cell(s):
    return s.replace("|", "\\|")


def code(s):
    return "`%s`" % (s if s != "" else '""')


def info(exe, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMACOLL_")}
    r = subprocess.run([exe] + list(args), stdout=subprocess.PIPE, universal_newlines=True,
                       env=env, timeout=60)
    if r.returncode != 0:
        sys.exit("gen_env_md: %s %s exited %d" % (exe, " ".join(args), r.returncode))
    return json.loads(r.stdout)


def tables(exe):
    cfg = info(exe, "--json")["config"]
    rows = ["| variable | key | type | default | meaning |", "|---|---|---|---|---|"]
    for k in cfg:
        rows.append("| %s | %s | %s | %s | %s |" % (code(k["env"]), code(k["key"]), cell(k["type"]),
                                                   code(k["default"]), cell(k["meaning"])))
    keys = "\n".join(rows) + "\n"
    env = info(exe, "--runtime", "--json")["environment"]
    rows = ["| variable | read by | meaning |", "|---|---|---|"]
    for v in env:
        if v["config_key"]:
            continue
        rows.append("| %s | %s | %s |" % (code(v["name"]), cell(v["read_by"]), cell(v["meaning"])))
    other = "\n".join(rows) + "\n"
    return {"--json": keys, "--runtime --json": other}


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in ("--write", "--check"):
        sys.exit(__doc__)
    exe, path, mode = sys.argv[1:]
    with open(path) as f:
        have = f.read()
    t = tables(exe)
    seen = []

    def sub(m):
        seen.append(m.group(2))
        return m.group(1) + t[m.group(2)] + m.group(4)

    want = MARK.sub(sub, have)
    if sorted(seen) != sorted(t):
        sys.exit("gen_env_md: %s needs one generated block for each of %s (has %s)" %
                 (path, sorted(t), seen))
    if mode == "--write":
        with open(path, "w") as f:
            f.write(want)
        return 0
    if want != have:
        sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                                   path, "rmacoll-info"))
        print("gen_env_md: %s differs from rmacoll-info: run scripts/gen_env_md.py "
              "build/tools/rmacoll-info docs/env.md --write (or cmake --build build "
              "--target env_md) and commit it" % path)
        return 1
    print("gen_env_md: %s agrees with rmacoll-info (%d keys, %d other variables)" %
          (path, t["--json"].count("\n") - 2, t["--runtime --json"].count("\n") - 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
