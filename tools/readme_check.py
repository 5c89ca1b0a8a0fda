#!/usr/bin/env python3
"""Re-run every command the README shows with its output, and compare what it prints now.

    /usr/bin/python3 tools/readme_check.py [--readme README.md] [--lingen ./lingen] [--only WORD] [--timeout S]

A command is a line "$ lingen ..." (or "$ python3 ...") in a fenced or indented code block of
the README; its expected output is the lines after it, up to the next command or the block's
end. "..." in the expected output stands for any number of lines. Runs of spaces count as one.
In lines that report a time (images/s, seconds, speed-ups "Nx"), numbers may differ; bits/dim
figures in such lines (four or more decimals before "+-" or in compare's bits/dim column) must
not. Every other line must be the same. `make run` is not re-run (it installs packages): its
last command is, as `lingen sample -n 16 -o samples.png`. "python3" is the Python running this.

Prints, per command, "same" or "DIFFERS" with the lines that differ; exit 1 if any differs.
Run from the repository root after `make lingen lib`, with LINGEN_DATA set as for `make test`;
the commands run in a temporary folder whose ./models is the repository's.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

TIMING = re.compile(r"images/s|\d s\b|\d+(\.\d+)?x\b|^speed\b|MB\s*$")
NUMBER = re.compile(r"\d[\d,]*(\.\d+)?")
# compare's rows: "1 linear, RNN mode (state S, z)   0.6669   10.6 ...": the bits/dim column stays exact
COMPARE_ROW = re.compile(r"^(\d [a-z]+, [^0-9]*?)\s+(\d\.\d{4})\s+(.*)$")


def commands(readme):
    """[(command, [expected lines])] from the README's code blocks."""
    out, cur, fenced = [], None, False
    for raw in open(readme, encoding="utf-8").read().splitlines():
        if raw.startswith("```"):
            fenced = not fenced
            cur = None
            continue
        line = raw if fenced else (raw[4:] if raw.startswith("    ") else None)
        if line is None:
            cur = None
            continue
        if line.startswith("$ "):
            cur = [line[2:], []]
            out.append(cur)
        elif cur is not None:
            cur[1].append(line)
    return [(c, e) for c, e in out if c.startswith(("lingen ", "make run", "python3 "))]


def pattern(line):
    """A regex for one expected line (see the module's docstring)."""
    line = " ".join(line.split())
    m = COMPARE_ROW.match(line)
    if m:
        return re.escape(m.group(1)) + " " + re.escape(m.group(2)) + " " + masked(m.group(3))
    return masked(line) if TIMING.search(line) else re.escape(line)


def masked(line):
    parts, at = [], 0
    for m in NUMBER.finditer(line):
        parts.append(re.escape(line[at:m.start()]))
        parts.append(r"\d[\d,]*(\.\d+)?")
        at = m.end()
    parts.append(re.escape(line[at:]))
    return "".join(parts)


def matches(expected, got):
    """Whether got (lines) fits expected (lines, "..." any number of lines): a glob over lines."""
    got = [" ".join(g.split()) for g in got]
    pats = [None if e.strip() == "..." else re.compile(pattern(e) + r"\Z") for e in expected]
    # reach[j]: expected[:i] can consume got[:j]
    reach = [True] + [False] * len(got)
    for p in pats:
        nxt = [False] * (len(got) + 1)
        for j in range(len(got) + 1):
            if not reach[j]:
                continue
            if p is None:
                for k in range(j, len(got) + 1):
                    nxt[k] = True
                break
            if j < len(got) and p.match(got[j]):
                nxt[j + 1] = True
        reach = nxt
    return reach[len(got)]


def first_mismatch(expected, got):
    """The first expected line (not "...") that no printed line fits, for the report."""
    norm = [" ".join(g.split()) for g in got]
    for e in expected:
        if e.strip() != "..." and not any(re.match(pattern(e) + r"\Z", g) for g in norm):
            return e
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--lingen", default="./lingen")
    ap.add_argument("--only", help="only the commands that contain this text")
    ap.add_argument("--timeout", type=float, default=3600)
    a = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        # run where ./models is the repository's (the README ran from its root), writing there nothing
        os.symlink(os.path.abspath("models"), os.path.join(tmp, "models"))
        for cmd, expected in commands(a.readme):
            if cmd == "make run":
                cmd, expected = "lingen sample -n 16 -o samples.png", expected[-1:]
            if a.only and a.only not in cmd:
                continue
            run = cmd.replace("lingen ", os.path.abspath(a.lingen) + " ", 1) if cmd.startswith("lingen ") else \
                cmd.replace("python3 ", sys.executable + " ", 1)
            env = dict(os.environ, PYTHONPATH=os.path.abspath("python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
            try:
                p = subprocess.run(run, shell=True, cwd=tmp, env=env, capture_output=True, text=True,
                                   timeout=a.timeout)
                got = (p.stdout + p.stderr).splitlines()
            except subprocess.TimeoutExpired:
                got = ["(timed out)"]
            if matches(expected, got):
                print(f"same     $ {cmd}")
            else:
                bad += 1
                miss = first_mismatch(expected, got)
                print(f"DIFFERS  $ {cmd}\n  " + (f"first README line not printed: {miss!r}" if miss else
                                                  "the lines are there, not in the README's order or with more after them"))
                print("  printed now:\n" + "\n".join("    " + g for g in got))
            sys.stdout.flush()
    print(f"{bad} of the README's commands differ" if bad else "every README command prints what the README shows")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
