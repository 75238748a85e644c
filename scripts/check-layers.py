#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layer rule of user/ (docs/design.md), checked.

Folders are layers, top to bottom:

    cli                         command-line front ends
    trace | capture             commands over saved traces | the capture runner
    sources                     the source table
    sources/<one each>          cuda, nccl, nvtx, gpu, python, sched, ...
    out                         Perfetto writer, split, sink, windows, summary
    core                        session, options, model, ingest, attach
    lib/elf                     ELF files and symbols
    lib                         small helpers

A file may include, and an object may call, only its own folder or a
folder below it; folders side by side in one layer (trace and capture,
two sources) touch neither. Inside a folder, modules (NAME.c with
NAME.h) form no circle. Edges come from two places: the quoted includes
of every user/ file, and, when an object folder is given, what each
object's undefined symbols resolve to (`nm` of the release objects), so
a call declared by hand (an `extern` in a .c file) is seen too.

Usage: check-layers.py [BUILD_DIR]   (objects under BUILD_DIR/obj)
Prints each offending pair and exits 1 on any; prints the edge counts
and exits 0 on none.
"""
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER = os.path.join(TOP, "user")

# Rank of each folder: higher may use lower; equal ranks are siblings.
RANKS = {
    "cli": 70,
    "trace": 60, "capture": 60,
    "sources": 50,
    "out": 30,
    "core": 20,
    "lib/elf": 15,
    "lib": 10,
}
SOURCE_RANK = 40  # sources/<name>: each its own sibling

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(rel):
    """The layer folder of a path relative to user/, e.g. sources/gpu."""
    parts = rel.split("/")[:-1]
    if parts[:1] == ["sources"] and len(parts) >= 2:
        return "sources/" + parts[1]
    if parts[:2] == ["lib", "elf"]:
        return "lib/elf"
    return "/".join(parts[:1]) if parts else ""


def rank(folder):
    if folder in RANKS:
        return RANKS[folder]
    if folder.startswith("sources/"):
        return SOURCE_RANK
    return None


def module_of(rel):
    """A module is NAME.c with NAME.h in one folder."""
    return os.path.splitext(rel)[0]


def user_files():
    out = []
    for root, _, names in os.walk(USER):
        for n in names:
            if n.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(root, n), USER))
    return sorted(out)


def include_edges(files):
    """(from file, to file, what) for each quoted include of a user/ file."""
    known = set(files)
    edges = []
    problems = []
    for f in files:
        with open(os.path.join(USER, f)) as fh:
            text = fh.read()
        for inc in INCLUDE.findall(text):
            if inc in known:
                edges.append((f, inc, "includes"))
            elif os.path.basename(inc) in {os.path.basename(k) for k in known} \
                    and not os.path.exists(os.path.join(TOP, "bpf", inc)):
                problems.append("%s: include \"%s\" names a user/ header without its folder"
                                % ("user/" + f, inc))
    return edges, problems


def nm(path, *flags):
    res = subprocess.run(["nm", "-P", *flags, path], capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("check-layers: nm %s failed: %s" % (path, res.stderr.strip()))
    return [line.split()[:2] for line in res.stdout.splitlines() if line.strip()]


def symbol_edges(objdir, files):
    """(from source, to source, 'calls SYM') from the objects' symbols."""
    srcs = [f for f in files if f.endswith(".c")]
    defined = {}
    undefined = {}
    for f in srcs:
        obj = os.path.join(objdir, os.path.splitext(f)[0] + ".o")
        if not os.path.exists(obj):
            sys.exit("check-layers: %s missing: build first (make)" % obj)
        for name, kind in nm(obj, "-g", "--defined-only"):
            defined.setdefault(name, f)
        undefined[f] = [name for name, kind in nm(obj, "-u")]
    edges = []
    for f, names in undefined.items():
        for name in names:
            to = defined.get(name)
            if to and to != f:
                edges.append((f, to, "calls " + name))
    return edges


def find_cycles(nodes, succ):
    """Strongly connected components of more than one node (Tarjan)."""
    index = {}
    low = {}
    stack = []
    on = set()
    comps = []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(succ.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            pushed = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    pushed = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if pushed:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def cycle_path(comp, succ):
    """One circle through a component, as a readable chain."""
    members = set(comp)
    start = comp[0]
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(succ.get(v, ())):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    objdir = os.path.join(build if os.path.isabs(build) else os.path.join(TOP, build), "obj")
    files = user_files()
    bad = []
    for f in files:
        if rank(folder_of(f)) is None:
            bad.append("user/%s: in no layer folder (scripts/check-layers.py RANKS)" % f)
    edges, problems = include_edges(files)
    bad += problems
    n_inc = len(edges)
    if os.path.isdir(objdir):
        edges += symbol_edges(objdir, files)
    else:
        print("check-layers: %s absent: includes only" % objdir)
    n_sym = len(edges) - n_inc

    seen = set()
    succ = {}
    for a, b, what in edges:
        fa, fb = folder_of(a), folder_of(b)
        ma, mb = module_of(a), module_of(b)
        if ma != mb:
            succ.setdefault(ma, set()).add(mb)
        if fa == fb:
            continue
        ra, rb = rank(fa), rank(fb)
        if ra is None or rb is None or ra > rb:
            continue
        kind = "sideways" if ra == rb else "upward"
        key = (a, b, what.split()[0])
        if key in seen:
            continue
        seen.add(key)
        bad.append("%s: user/%s %s user/%s (%s -> %s)" % (kind, a, what, b, fa, fb))

    for comp in find_cycles({module_of(f) for f in files}, succ):
        bad.append("circle: " + " -> ".join(cycle_path(comp, succ))
                   + "  (%d modules)" % len(comp))

    for line in bad:
        print(line)
    if bad:
        print("check-layers: %d violations of the layer rule (docs/design.md)" % len(bad))
        print("layers: 0 passed, 1 failed")
        return 1
    print("check-layers: %d files, %d include and %d call edges, all downward, no circle"
          % (len(files), n_inc, n_sym))
    print("layers: 1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
