#!/usr/bin/env python3
"""test_check_layers.py SRC - the layering checker catches what it must.

Runs check_layers.py on bad trees made from a copy of SRC's core/,
transports/ and sched/ (an upward include; a transport including a core
header) and on synthetic nm listings (an upward call, a circle between
folders, a file calling a later file of its folder's order), and expects
each to fail naming the culprit; the unchanged copy passes, and an
exception nobody needs is reported."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check_layers.py")
SRC = os.path.abspath(sys.argv[1])
failures = []


def run(src, *extra):
    r = subprocess.run([sys.executable, CHECK, "--src", src] + list(extra),
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(name, rc, text, want_rc, *needles):
    ok = rc == want_rc and all(n in text for n in needles)
    print(("ok   " if ok else "FAIL ") + name)
    if not ok:
        failures.append(name)
        print(f"  rc {rc} (want {want_rc}); output:\n  " + text.replace("\n", "\n  "))


def copy_tree(dst):
    for top in ("core", "transports", "sched"):
        shutil.copytree(os.path.join(SRC, top), os.path.join(dst, top),
                        ignore=shutil.ignore_patterns("*.o", "build*"))


def append(path, line):
    with open(path, "a") as f:
        f.write("\n" + line + "\n")


with tempfile.TemporaryDirectory() as tmp:
    allow = os.path.join(HERE, "allowed.txt")

    good = os.path.join(tmp, "good")
    copy_tree(good)
    rc, out = run(good, "--allow", allow)
    expect("the copied tree passes (includes)", rc, out, 0, "the layers hold")

    up = os.path.join(tmp, "upward")
    copy_tree(up)
    append(os.path.join(up, "core", "base", "log.c"), '#include "core/comm/comm.h"')
    rc, out = run(up, "--allow", allow)
    expect("an upward include is caught", rc, out, 1,
           "core/base/log.c: includes core/comm/comm.h: comm is above base")

    up2 = os.path.join(tmp, "upward2")
    copy_tree(up2)
    append(os.path.join(up2, "core", "xport", "bind.h"), '#include "core/exec/state.h"')
    rc, out = run(up2, "--allow", allow)
    expect("an upward include from a header is caught", rc, out, 1,
           "core/xport/bind.h: includes core/exec/state.h: exec is above xport")

    tp = os.path.join(tmp, "transport")
    copy_tree(tp)
    t = os.path.join(tp, "transports", "zz")
    os.makedirs(t)
    with open(os.path.join(t, "zz.c"), "w") as f:
        f.write('#include "core/base/log.h"\n')
    with open(os.path.join(tp, "sched", "zz.c"), "w") as f:
        f.write('#include "core/plan/plan.h"\n')
    rc, out = run(tp, "--allow", allow)
    expect("a transport or scheduler including core/ is caught", rc, out, 1,
           "transports/zz/zz.c: #include \"core/base/log.h\"",
           "sched/zz.c: #include \"core/plan/plan.h\"")

    # synthetic nm -A listings, over a tree of core/exec/ alone (its file
    # order, state.h)
    syn = os.path.join(tmp, "syn")
    shutil.copytree(os.path.join(SRC, "core", "exec"), os.path.join(syn, "core", "exec"))
    good = syn

    def listing(lines):
        p = os.path.join(tmp, "nm.txt")
        with open(p, "w") as f:
            f.write("\n".join(lines) + "\n")
        return p

    o = "/b/CMakeFiles/rmacoll_obj.dir/core/"
    ok_lines = [o + "base/fail.c.o:0000000000000000 T rmacoll__fail",
                o + "exec/wait.c.o:                 U rmacoll__fail",
                o + "exec/wait.c.o:0000000000000010 T rmacoll__wait_word",
                o + "exec/meta.c.o:                 U rmacoll__wait_word",
                o + "exec/meta.c.o:0000000000000010 t local_helper",
                o + "comm/comm.c.o:                 U rmacoll__wait_word",
                o + "comm/comm.c.o:                 U malloc"]
    rc, out = run(good, "--nm-output", listing(ok_lines))
    expect("downward calls pass", rc, out, 0, "the layers hold (includes and symbols)")

    bad = ok_lines + [o + "comm/comm.c.o:0000000000000020 T rmacoll__comm_thing",
                      o + "exec/exec.c.o:                 U rmacoll__comm_thing"]
    rc, out = run(good, "--nm-output", listing(bad))
    expect("an upward call is caught, and the circle it makes", rc, out, 1,
           "core/exec/exec.c calls rmacoll__comm_thing of core/comm/comm.c: comm is above "
           "exec (upward call)", "circle between folders: comm -> exec -> comm")

    order = ok_lines + [o + "exec/meta.c.o:0000000000000030 T rmacoll__meta_x",
                        o + "exec/wait.c.o:                 U rmacoll__meta_x"]
    rc, out = run(good, "--nm-output", listing(order))
    expect("a file calling a later file of its folder is caught", rc, out, 1,
           "core/exec/wait.c calls rmacoll__meta_x of meta.c, which comes after it")

    spare = os.path.join(tmp, "allow.txt")
    with open(spare, "w") as f:
        f.write("include core/base/log.c core/comm/comm.h\n")
    rc, out = run(good, "--allow", spare)
    expect("an exception nobody needs is reported", rc, out, 1,
           "allowed exception no longer needed (remove it): include core/base/log.c "
           "core/comm/comm.h")

print("test_check_layers: " + ("%d failed" % len(failures) if failures else "all ok"))
sys.exit(1 if failures else 0)
