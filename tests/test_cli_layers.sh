#!/usr/bin/env bash
# The layers of src/ (docs/code.md): each folder is a layer, and a file includes headers of its
# own layer or of those below it, never above; the include graph between modules (a .c and its
# .h) has no circle. The order, lowest first, is the data below. include/ holds lib's public
# headers (lingen.h), of lib's layer.
LAYERS="io kernels engine cuda lib cli"
cd "$(dirname "$0")/.." || exit 2
LAYERS="$LAYERS" python3 - << 'PY'
import os, re, sys

layers = os.environ["LAYERS"].split()
rank = {name: i for i, name in enumerate(layers)}
failed = 0

def bad(msg):
    global failed
    failed += 1
    print("FAIL " + msg)

files = sorted(os.path.join(d, f)[len("src/"):] for d, _, fs in os.walk("src") for f in fs
               if f.endswith((".c", ".h", ".cu", ".cuh")))
def layer(path):
    top = path.split("/")[0]
    return top if "/" in path and top in rank else None

def resolve(src, name):
    """an include as the compiler finds it: beside the file first, then -Isrc"""
    here = os.path.normpath(os.path.join(os.path.dirname(src), name))
    return here if here in files else (os.path.normpath(name) if os.path.normpath(name) in files else None)

module = lambda p: os.path.splitext(p)[0]
edges = {}
for f in files:
    if layer(f) is None:
        bad(f"src/{f}: not in a layer's folder ({', '.join(layers)})")
        continue
    text = open("src/" + f, encoding="utf-8").read()
    for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
        target = resolve(f, name)
        if target is None and os.path.isfile(os.path.join("include", name)):
            if rank["lib"] > rank[layer(f)]:
                bad(f"src/{f} ({layer(f)}) includes include/{name} (lib), a layer above its own")
            continue
        if target is None:
            bad(f"src/{f}: includes \"{name}\", which is not in src/")
            continue
        if layer(target) and rank[layer(target)] > rank[layer(f)]:
            bad(f"src/{f} ({layer(f)}) includes src/{target} ({layer(target)}), a layer above its own")
        if module(target) != module(f):
            edges.setdefault(module(f), set()).add(module(target))

# a circle between modules: depth-first search, grey nodes on the current path
state, path = {}, []
def visit(m):
    state[m] = 1
    path.append(m)
    for n in sorted(edges.get(m, ())):
        if state.get(n) == 1:
            bad("a circle of includes: " + " -> ".join(path[path.index(n):] + [n]))
        elif n not in state:
            visit(n)
    path.pop()
    state[m] = 2
for m in sorted(edges):
    if m not in state:
        visit(m)

print(f"{'ok  ' if not failed else 'FAIL'} {len(files)} files in {len(layers)} layers, {sum(map(len, edges.values()))} includes between modules")
print(f"{failed} failed")
sys.exit(1 if failed else 0)
PY
