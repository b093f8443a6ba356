#!/usr/bin/env python3
"""Check that README.md is true: its commands run, its options and YAML exist.

    check_readme.py static BUILD_DIR     (ctest readme_static: seconds)
    check_readme.py run [--keep]         (.ci/run, after the build: minutes)

static:
  - every option a README command gives an rmacoll tool (in ```sh blocks
    and in `code` spans starting with rmacoll-<tool> or ./build/tools/...)
    is in that tool's --help (BUILD_DIR/tools/<tool>);
  - the packages of README's apt-get lines are all installed by .ci/run
    (so CI builds and tests with what the README tells users to install),
    and the first apt-get line has what CMake uses for the tools the
    README names (Open MPI for rmacoll-mpi-perf and mpirun, PMIx);
  - the ```yaml block loads: rmacoll-info --config FILE exits 0;
  - every ```sh command is one this script knows how to run or skip.
run: every command of README's ```sh blocks, in README order, from the
  checkout's root (where .ci/run built build/), except:
    apt-get update / install   skipped: .ci/run installs the packages
                               (checked by static);
    bash .ci/run               skipped: that is CI itself;
    FI_TCP_IFACE=lo ctest ...  skipped: .ci/run's test step is this line
                               (static checks .ci/run has it);
    --prefix /opt/rmacoll      installed into a temporary folder instead
                               (PKG_CONFIG_PATH follows it);
    cc app.c ...               run in a temporary folder where app.c is
                               tests/consumer/main.c (README's app.c is any
                               program), and the program linked is run.
  python3 is Debian's /usr/bin/python3 (the README says so): /usr/bin comes
  first in PATH. The folders the README's commands create (dist, venv,
  venv-torch) must not exist before (so nothing of yours is removed) and are
  removed after, with python/build (the wheel's build tree), unless --keep.
  Prints each command, its exit status and time; exits 1 at the first
  failure.
Code blocks in other languages (c, cmake, python) are not run: the C and
CMake uses are built by .ci/run's installed-consumer checks and examples/,
the Python line is the signature of rmacoll.all_to_all_single.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
# what CMake builds or runs with these packages, for the tools the README names
NEEDED = {"openmpi-bin": "mpirun (README's 'Running on a cluster')",
          "libopenmpi-dev": "rmacoll-mpi-perf and the MPI example",
          "libpmix-dev": "mpirun without rmacoll variables"}


def blocks(text):
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)]


def strip_comment(line):
    """A shell line without its trailing '# comment' (outside quotes)."""
    q = None
    for i, ch in enumerate(line):
        if q:
            if ch == q:
                q = None
        elif ch in "'\"":
            q = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(text):
    """The commands of the ```sh blocks: lines joined at a trailing '\\',
    comments dropped, chains split at '&&'."""
    out = []
    for lang, body in blocks(text):
        if lang != "sh":
            continue
        body = re.sub(r"\\\n\s*", " ", body)
        for ln in body.split("\n"):
            ln = strip_comment(ln).strip()
            if not ln:
                continue
            out.extend(c.strip() for c in ln.split(" && "))
    return out


SKIP = [(re.compile(r"^apt-get update$"), "package lists: .ci/run ran apt-get update"),
        (re.compile(r"^apt-get install "), "packages: .ci/run installs them (static: a superset)"),
        (re.compile(r"^bash \.ci/run$"), "CI itself"),
        (re.compile(r"^FI_TCP_IFACE=lo ctest --test-dir build --output-on-failure$"),
         ".ci/run's '== tests' step runs it (static: .ci/run has this line)")]
# .ci/run must run the README's test line (FI_TCP_IFACE exported there)
CI_TEST_LINE = re.compile(r"^ctest --test-dir build --output-on-failure\b", re.M)


def classify(cmd):
    for rx, why in SKIP:
        if rx.search(cmd):
            return "skip", why
    return "run", None


def tool_commands(text):
    """(tool, argv) of every rmacoll tool command in blocks and code spans."""
    found = []
    snippets = commands(text)
    snippets += re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
    for s in snippets:
        try:
            words = shlex.split(s)
        except ValueError:
            words = s.split()
        for i, w in enumerate(words):
            m = re.fullmatch(r"(?:\./build/tools/)?(rmacoll-(?:perf|plan|info|latency|mpi-perf))", w)
            if m:
                if i == 0 or words[i - 1] != "man":
                    found.append((m.group(1), words[i + 1:], s))
                break
    return found


def help_options(exe):
    r = subprocess.run([exe, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=60)
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", r.stdout))


def apt_packages(text):
    pk = []
    for c in commands(text):
        if c.startswith("apt-get install "):
            pk.append([w for w in c.split()[2:] if not w.startswith("-")])
    return pk


def ci_packages():
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        ci = re.sub(r"\\\n", " ", f.read())
    have = set()
    for m in re.finditer(r"apt-get install ([^\n>]*)", ci):
        have.update(w for w in m.group(1).split() if not w.startswith("-"))
    return have


def static(build):
    with open(README) as f:
        text = f.read()
    errs = []
    # options
    helps = {}
    n = 0
    for tool, argv, s in tool_commands(text):
        exe = os.path.join(build, "tools", tool)
        if not os.path.exists(exe):
            print("readme: %s not built here: %r not checked" % (tool, s))
            continue
        if tool not in helps:
            helps[tool] = help_options(exe)
        for a in argv:
            if a.startswith("-") and not re.fullmatch(r"-\d.*", a):
                n += 1
                if a.split("=")[0] not in helps[tool]:
                    errs.append("README runs %s %s, not in its --help (in %r)" % (tool, a, s))
    # packages
    ci = ci_packages()
    lines = apt_packages(text)
    for pk in lines:
        for p in pk:
            if p not in ci:
                errs.append("README installs %s, .ci/run does not (CI never tried it)" % p)
    if lines:
        for p, why in NEEDED.items():
            if p not in lines[0]:
                errs.append("README's first apt-get line lacks %s (%s)" % (p, why))
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        ci = f.read()
    if any(c.startswith("FI_TCP_IFACE=lo ctest ") for c in commands(text)) and \
            not (CI_TEST_LINE.search(ci) and re.search(r"^export FI_TCP_IFACE=lo\b", ci, re.M)):
        errs.append("README's ctest line is not what .ci/run runs")
    # the configuration example
    ymls = [b for lang, b in blocks(text) if lang == "yaml"]
    for y in ymls:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(y)
        r = subprocess.run([os.path.join(build, "tools", "rmacoll-info"), "--config", f.name],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if not k.startswith("RMACOLL_")})
        os.unlink(f.name)
        if r.returncode != 0:
            errs.append("README's YAML does not load (rmacoll-info --config exits %d):\n%s" %
                        (r.returncode, "\n".join(r.stdout.split("\n")[:5])))
    cmds = commands(text)
    for c in cmds:
        kind, why = classify(c)
        print("readme: %s: %s%s" % (kind, c, " (%s)" % why if why else ""))
    if errs:
        print("readme: FAIL: " + "\nreadme: FAIL: ".join(errs))
        return 1
    print("readme ok: %d options of %d tool commands in --help, %d apt packages in .ci/run, "
          "%d YAML block(s) load, %d sh commands (%d run by .ci/run, %d skipped)" %
          (n, len(tool_commands(text)), sum(len(p) for p in lines), len(ymls), len(cmds),
           sum(classify(c)[0] == "run" for c in cmds), sum(classify(c)[0] == "skip" for c in cmds)))
    return 0


def run(keep):
    with open(README) as f:
        text = f.read()
    made = ["dist", "venv", "venv-torch"]
    there = [d for d in made if os.path.exists(os.path.join(ROOT, d))]
    if there:
        print("readme: %s already exist in %s: move them away first" % (", ".join(there), ROOT))
        return 2
    tmp = tempfile.mkdtemp(prefix="readme.")
    env = dict(os.environ)
    env["PATH"] = "/usr/bin:" + env.get("PATH", "")
    prefix = os.path.join(tmp, "opt", "rmacoll")
    app = os.path.join(tmp, "app")
    os.makedirs(app)
    shutil.copy(os.path.join(ROOT, "tests", "consumer", "main.c"), os.path.join(app, "app.c"))
    shutil.rmtree(os.path.join(ROOT, "python", "build"), ignore_errors=True)
    rc = 0
    try:
        for c in commands(text):
            kind, why = classify(c)
            if kind == "skip":
                print("== readme: skipped: %s  (%s)" % (c, why), flush=True)
                continue
            cwd, cmd, note = ROOT, c, ""
            if "/opt/rmacoll" in c:
                cmd = c.replace("/opt/rmacoll", prefix)
                note = " (prefix %s)" % prefix
            if re.match(r"^cc app\.c ", c):
                # README: PKG_CONFIG_PATH=/opt/rmacoll/lib/pkgconfig
                env["PKG_CONFIG_PATH"] = os.path.join(prefix, "lib", "pkgconfig")
                cwd = app
                cmd = c + " && ./a.out && rm -f a.out"
                note = " (in %s, app.c = tests/consumer/main.c, PKG_CONFIG_PATH=%s; then ./a.out)" % (
                    app, env["PKG_CONFIG_PATH"])
            print("== readme: %s%s" % (c, note), flush=True)
            t0 = time.time()
            r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, env=env)
            print("== readme: exit %d, %.0f s" % (r.returncode, time.time() - t0), flush=True)
            if r.returncode != 0:
                print("readme: FAIL: README's command %r exits %d" % (c, r.returncode))
                rc = 1
                break
    finally:
        if not keep:
            for d in made + [os.path.join("python", "build")]:
                shutil.rmtree(os.path.join(ROOT, d), ignore_errors=True)
            shutil.rmtree(tmp, ignore_errors=True)
    if rc == 0:
        cmds = commands(text)
        print("readme ok: %d commands of README's sh blocks ran, %d skipped (reasons above)" %
              (sum(classify(c)[0] == "run" for c in cmds), sum(classify(c)[0] == "skip" for c in cmds)))
    return rc


def main():
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "static":
        return static(a[1])
    if a[:1] == ["run"] and set(a[1:]) <= {"--keep"}:
        return run("--keep" in a)
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
