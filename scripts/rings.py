#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""No ring of files (HACKING.md "Layering"): reads the product archives of
a build ($OUT/lib/lib*.a, civetweb's left out) with `nm` (binutils), takes
an edge a.c -> b.c for every symbol a's object leaves undefined and b's
defines, and fails naming each strongly connected set of two or more files
with one ring through it and the symbols of each step.

    scripts/rings.py [OUT]     (default: $OUT, else build)
"""
import collections
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFINED = set("TDBRVWCGSi")


def sources():
    """basename.o -> path of its .c, per component folder."""
    found = collections.defaultdict(dict)
    for top in os.listdir(ROOT):
        if top.startswith(".") or top.startswith("build") or top == "tests":
            continue
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".c", ".S")):
                    rel = os.path.relpath(os.path.join(d, f), ROOT)
                    found[top][f.rsplit(".", 1)[0] + ".o"] = rel
    return found


def read(out):
    libdir = os.path.join(out, "lib")
    libs = sorted(f for f in os.listdir(libdir)
                  if f.startswith("lib") and f.endswith(".a") and
                  f != "libcivetweb.a")
    if not libs:
        sys.exit("rings: no archives in %s (build first)" % libdir)
    comp = {"libcellctl.a": "controller"}
    src = sources()
    defs, undef = {}, collections.defaultdict(set)
    for lib in libs:
        c = comp.get(lib, lib[3:-2])
        nm = subprocess.run(["nm", "-P", "-A", os.path.join(libdir, lib)],
                            capture_output=True, text=True, check=True)
        for line in nm.stdout.splitlines():
            # "<lib>[<member>]: <symbol> <type> ..."
            head, _, rest = line.partition(": ")
            member = head[head.rfind("[") + 1:-1]
            f = src[c].get(member, c + "/" + member)
            p = rest.split()
            if len(p) < 2:
                continue
            if p[1] == "U":
                undef[f].add(p[0])
            elif p[1] in DEFINED:
                defs.setdefault(p[0], f)
    edges = collections.defaultdict(lambda: collections.defaultdict(list))
    for f, syms in undef.items():
        for s in sorted(syms):
            g = defs.get(s)
            if g and g != f:
                edges[f][g].append(s)
    return edges


def sccs(edges):
    """Tarjan's strongly connected components, iteratively."""
    nodes = sorted(set(edges) | {g for f in edges for g in edges[f]})
    index, low, on, stack, out = {}, {}, set(), [], []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return out


def ring(edges, comp):
    """One cycle through comp's first file, by breadth-first search."""
    members, start = set(comp), comp[0]
    prev, todo = {start: None}, [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(edges.get(v, {})):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in members and w not in prev:
                prev[w] = v
                todo.append(w)
    return comp


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "build")
    edges = read(os.path.join(ROOT, out) if not os.path.isabs(out) else out)
    found = sccs(edges)
    for comp in found:
        print("rings: %d files call each other in a ring: %s" %
              (len(comp), " ".join(comp)))
        path = ring(edges, comp)
        for a, b in zip(path, path[1:]):
            syms = edges[a][b]
            print("  %s -> %s (%s%s)" % (a, b, ", ".join(syms[:4]),
                                         ", …" if len(syms) > 4 else ""))
    if found:
        print("rings: break each ring (a callback, or a lower file both use)")
        return 1
    n = sum(len(v) for v in edges.values())
    print("rings: ok (%d file-to-file edges, no ring)" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
