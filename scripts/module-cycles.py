#!/usr/bin/env python3
"""Finds import circles between the files of each crate (issue 24: "no
import circles anywhere"). A file is a module; it depends on another when it
names it through a `crate::`, `super::` or `self::` path (in a `use` or
inline). Paths into a module's own ancestors are not counted: a `mod.rs`
declares and re-exports its children, so a child naming its parent is the
tree, not a circle. Circles among the rest (siblings, cousins) are errors.

    scripts/module-cycles.py          every crate of the workspace
    scripts/module-cycles.py DIR...   only these source roots

Exits 1 and lists each circle when there is one.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOTS = ["src", "proto/src", "jute/src", "cli/src", "testkit/src", "zklock-test/src", "bench/src",
         "bench/minimal/src", "sim/src"]

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)::\{([^;]*)\};", re.S)


def modules(src):
    """Module path (tuple) -> file, for every .rs file under `src`."""
    found = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            found[tuple(parts)] = os.path.join(dirpath, f)
    return found


def strip(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def resolve(mods, here, anchor, names):
    """The deepest existing module a path names, from module `here`."""
    names = list(names)
    if anchor == "crate":
        base = ()
    elif anchor == "self":
        base = here
    else:
        base = here[:-1]
        while names and names[0] == "super":
            names.pop(0)
            base = base[:-1]
    best = cur = base
    for n in names:
        cur = cur + (n,)
        if cur not in mods:
            break
        best = cur
    return best


def edges(mods):
    graph = {m: set() for m in mods}
    for here, path in mods.items():
        text = strip(open(path, encoding="utf-8").read())
        refs = []
        for m in PATH.finditer(text):
            names = [n for n in m.group(2).split("::") if n and n != "{"]
            refs.append((m.group(1), names))
        for m in USE_GROUP.finditer(text):
            for item in re.split(r",(?![^{]*\})", m.group(2)):
                first = item.strip().split("::")[0].strip(" {}")
                if first:
                    refs.append((m.group(1), [first]))
        for anchor, names in refs:
            target = resolve(mods, here, anchor, names)
            if target == here or here[: len(target)] == target:
                continue  # itself or an ancestor
            if target[: len(here)] == here:
                continue  # its own descendant
            graph[here].add(target)
    return graph


def circles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    roots = sys.argv[1:] or ROOTS
    bad = 0
    for r in roots:
        src = os.path.join(ROOT, r)
        if not os.path.isdir(src):
            continue
        mods = modules(src)
        found = circles(edges(mods))
        for comp in found:
            bad += 1
            names = ", ".join("::".join(m) or "(root)" for m in comp)
            print(f"module-cycles: {r}: circle among {names}")
        print(f"module-cycles: {r}: {len(mods)} files, {len(found)} circles", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
