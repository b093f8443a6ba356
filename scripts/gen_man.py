#!/usr/bin/env python3
"""Render a tool's man page from its --help output and a hand-written template.

    gen_man.py --exe PATH --name rmacoll-perf --template docs/man/rmacoll-perf.1.in \
               --version 0.1.0 (--out FILE | --check FILE)

The one source of truth for a tool's options is its --help text; the
template (docs/man/<tool>.1.in, roff) holds what --help does not: NAME,
DESCRIPTION, EXIT STATUS, ENVIRONMENT, EXAMPLES, SEE ALSO. In it

    @VERSION@   becomes the project version
    @SYNOPSIS@  the usage line(s) of --help
    @OPTIONS@   everything --help prints after its usage line(s):
                headings (a line at column 0 ending in ':') become .SS,
                option lines (column 2, starting with '-') .TP entries with
                their deeper-indented continuation lines, other text .PP

--check FILE exits 1 (printing a diff) when FILE differs from what would be
generated; --out FILE writes it. Both fail, before comparing, when the help
and the template disagree:
  - an option named in --help's usage line has no entry of its own;
  - a long option the template mentions (\\-\\-name) is not in --help
    (unless listed on a line '.\\" not-options: --a --b' of the template:
    options of other programs, e.g. mpirun's).
The tool is run as given; the path it prints for itself in its usage line
(its argv[0]) is replaced by its name.
"""
import argparse
import difflib
import os
import re
import subprocess
import sys


def esc(s):
    """Plain text to roff: backslashes, dashes, leading control characters."""
    s = s.replace("\\", "\\e").replace("-", "\\-")
    if s.startswith((".", "'")):
        s = "\\&" + s
    return s


def term(t):
    """An option term ('-np N, --nranks N') with options bold, arguments italic."""
    out = []
    for tok in t.split():
        tail = ""
        while tok and tok[-1] in ",;:":
            tail = tok[-1] + tail
            tok = tok[:-1]
        if tok.startswith("-"):
            out.append("\\fB" + esc(tok) + "\\fR" + esc(tail))
        elif tok:
            out.append("\\fI" + esc(tok) + "\\fR" + esc(tail))
        else:
            out.append(esc(tail))
    return " ".join(out)


def split_option(body):
    """'-b, --minbytes SIZE    smallest ...' -> (term, description). The term
    ends at the first gap of two or more spaces followed by something other
    than an option (so '-t, --nthreads 1  -g, --ngpus 1   one rank' keeps
    both options in the term); without such a gap, at ': ' if any."""
    for m in re.finditer(r"\s{2,}", body):
        rest = body[m.end():]
        if not rest.startswith("-"):
            return body[:m.start()], rest
    if ": " in body:
        a, b = body.split(": ", 1)
        return a + ":", b
    return body, ""


def parse_help(text, exe, name):
    text = text.replace(exe, name)
    lines = text.rstrip("\n").split("\n")
    if not lines or not lines[0].startswith("usage:"):
        sys.exit("gen_man: %s --help does not start with 'usage:'" % name)
    usage = [lines[0][len("usage:"):].strip()]
    i = 1
    while i < len(lines) and re.match(r"^ {3,}\S", lines[i]):
        usage.append(lines[i].strip())
        i += 1
    items = []  # ('h', text) | ('p', [lines]) | ('o', term, [desc lines])
    for ln in lines[i:]:
        if not ln.strip():
            continue
        ind = len(ln) - len(ln.lstrip(" "))
        s = ln.strip()
        if ind == 2 and s.startswith("-"):
            t, d = split_option(s)
            items.append(["o", t, [d] if d else []])
        elif ind > 2 and items and items[-1][0] in "op":
            items[-1][-1].append(s)
        elif ind == 0 and s.endswith(":"):
            items.append(["h", s[:-1]])
        else:
            prev = items[-1] if items else None
            if (prev and prev[0] == "p" and prev[2] == ind and
                    not (prev[1][-1].endswith(".") and s[:1].isupper())):
                prev[1].append(s)
            else:
                items.append(["p", [s], ind])
    return usage, items


def render_synopsis(usage, name):
    out = [".nf"]
    for u in usage:
        e = esc(u)
        en = esc(name)
        if e.startswith(en):
            e = "\\fB" + en + "\\fR" + e[len(en):]
        out.append(e)
    out.append(".fi")
    return "\n".join(out)


def render_options(items):
    out = []
    for it in items:
        if it[0] == "h":
            out.append(".SS " + esc(it[1]))
        elif it[0] == "o":
            out.append(".TP")
            out.append(term(it[1]))
            out.extend(esc(d) for d in it[2])
        else:
            out.append(".PP")
            out.extend(esc(d) for d in it[1])
    return "\n".join(out)


LONG = re.compile(r"(?<![\w-])--[a-zA-Z][\w-]*")


def option_names(items):
    names = set()
    for it in items:
        if it[0] == "o":
            names.update(LONG.findall(it[1]))
            names.update(re.findall(r"(?<![\w-])-[a-zA-Z]\w*", it[1]))
    return names


def consistency(name, usage, items, template):
    described = option_names(items)
    errs = []
    for o in sorted(set(LONG.findall(" ".join(usage)))):
        if o not in described:
            errs.append("%s --help: %s is in the usage line but has no entry" % (name, o))
    allowed = set()
    for ln in template.split("\n"):
        m = re.match(r'^\.\\"\s*not-options:(.*)$', ln)
        if m:
            allowed.update(m.group(1).split())
    plain = template.replace("\\-", "-").replace("\\&", "")
    plain = re.sub(r"\\f[BIRP]", "", plain)
    helptext = " ".join(usage) + " " + " ".join(
        (it[1] + " " + " ".join(it[2])) if it[0] == "o" else
        (it[1] if it[0] == "h" else " ".join(it[1])) for it in items)
    known = set(LONG.findall(helptext))
    for ln in plain.split("\n"):
        if ln.startswith('.\\"'):
            continue
        for o in LONG.findall(ln):
            if o not in known and o not in allowed:
                errs.append("%s template mentions %s, which --help does not have" % (name, o))
    return errs


def generate(exe, name, template_path, version):
    r = subprocess.run([exe, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=60)
    if r.returncode != 0:
        sys.exit("gen_man: %s --help exited %d:\n%s" % (exe, r.returncode, r.stdout))
    usage, items = parse_help(r.stdout, exe, name)
    with open(template_path) as f:
        template = f.read()
    errs = consistency(name, usage, items, template)
    if errs:
        sys.exit("gen_man: " + "\ngen_man: ".join(errs))
    for ph in ("@SYNOPSIS@", "@OPTIONS@"):
        if ph not in template:
            sys.exit("gen_man: %s lacks %s" % (template_path, ph))
    page = (template.replace("@VERSION@", version)
            .replace("@SYNOPSIS@", render_synopsis(usage, name))
            .replace("@OPTIONS@", render_options(items)))
    head = ('.\\" Generated by scripts/gen_man.py from "%s \\-\\-help" and docs/man/%s;\n'
            '.\\" do not edit: change those and run "cmake \\-\\-build build \\-\\-target man".\n'
            % (name, os.path.basename(template_path)))
    return head + page, len(option_names(items))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--template", required=True)
    ap.add_argument("--version", required=True)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--out")
    g.add_argument("--check")
    a = ap.parse_args()
    page, nopt = generate(a.exe, a.name, a.template, a.version)
    if a.out:
        with open(a.out, "w") as f:
            f.write(page)
        return 0
    try:
        with open(a.check) as f:
            have = f.read()
    except OSError as e:
        print("gen_man: %s: %s" % (a.check, e))
        return 1
    if have != page:
        sys.stdout.writelines(difflib.unified_diff(
            have.splitlines(True), page.splitlines(True), a.check, "generated"))
        print("gen_man: %s is stale: run cmake --build build --target man and commit it"
              % a.check)
        return 1
    print("gen_man: %s is current (%d option names)" % (a.check, nopt))
    return 0


if __name__ == "__main__":
    sys.exit(main())
