#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The file-level call graph among daemon/*.c, from the built objects,
and the public functions of daemon/*.c that nothing calls.

    scripts/callgraph.py BUILD

For each object under BUILD/daemon/*.p/ it reads, with nm, the global
symbols the object defines (functions and data) and the ones it leaves
undefined. File A uses file B when A's object needs a symbol B's object
defines. It prints one line per file ("a.c -> b.c, c.c"), then the strongly
connected components, and exits 1 if any of them holds more than one file:
files that call each other in a loop cannot be read, tested or layered one
at a time.

The objects are what the compiler kept, so static inline helpers in headers
and code compiled out by #if are not edges there; the #include lines add
them: a file that includes x.h depends on x.c (or on x.h, a header without
a .c of its name), and so does a header that includes it. Only objects of a daemon/*.c in
the source tree count: a generated source would have no file there. fault.c
and fake-kernel.c are empty unless -Dfault_injection=true; in such a build
(the one CI lints) they are part of the graph like any other file.

Dead public functions: a function daemon/X.c defines without static that
no other object needs is either dead or belongs static in X.c. Its users
are the other daemon/ objects, the daemon's main(), blkpolicyctl (which
compiles protocol.c), and what tests/unit and fuzz/ link: a function kept
for a unit test or a fuzzer is used. Each such function is printed and
the script exits 1. The unit tests' and fuzzers' objects must be in
BUILD (meson builds them always); without them the check would see
their functions as dead, so it fails instead.
"""
import glob
import os
import pathlib
import re
import subprocess
import sys

DEFINED = set("TDBRGSCVW")  # text, data, bss, read-only, small, common, weak


def symbols(obj):
    """(defined globals, undefined) of one object."""
    out = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True, text=True, check=True).stdout
    defined = {f[2] for f in (line.split() for line in out.splitlines()) if len(f) == 3 and f[1] in DEFINED}
    out = subprocess.run(["nm", "--undefined-only", "-g", obj], capture_output=True, text=True, check=True).stdout
    undefined = {line.split()[-1] for line in out.splitlines() if line.strip()}
    return defined, undefined


def functions(obj):
    """The global functions (text symbols) an object defines."""
    out = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True, text=True, check=True).stdout
    return {f[2] for f in (line.split() for line in out.splitlines()) if len(f) == 3 and f[1] == "T"}


def users(build):
    """What the objects outside the daemon's libraries need: main, blkpolicyctl,
    the unit tests and the fuzzers. None of tests/unit or fuzz/: None."""
    groups = {
        "main": glob.glob(os.path.join(build, "daemon", "blkpolicyd.p", "*.o")),
        "ctl": glob.glob(os.path.join(build, "ctl", "*.p", "*.o")),
        "tests/unit": glob.glob(os.path.join(build, "tests", "test-*.p", "*.o")),
        "fuzz": glob.glob(os.path.join(build, "fuzz", "*.p", "*.o")),
    }
    if not groups["tests/unit"] or not groups["fuzz"]:
        return None
    needed = set()
    for objs in groups.values():
        for obj in objs:
            needed |= symbols(obj)[1]
    return needed


def dead_functions(build, found, syms):
    """{source: sorted functions no other object needs}."""
    needed = users(build)
    if needed is None:
        sys.exit(f"callgraph: no tests/unit or fuzz/ objects under {build}: build them first "
                 "(the dead-function check counts what they call)")
    for src, (_, undefined) in syms.items():
        needed |= undefined - functions(found[src])
    dead = {}
    for src, obj in found.items():
        unused = sorted(functions(obj) - needed - {"main"})
        if unused:
            dead[src] = unused
    return dead


def objects(build, srcdir):
    """{source name: object path}, and the objects that are not ours."""
    found, ignored = {}, []
    for obj in sorted(glob.glob(os.path.join(build, "daemon", "*.p", "*.o"))):
        # meson names an object of daemon/core/x.c "core_x.c.o"
        src = os.path.basename(obj)[: -len(".o")].replace("_", "/", 1)
        if src.endswith(".c") and os.path.exists(os.path.join(srcdir, "daemon", src)):
            found[src] = obj  # an object per library: the same source twice is the same code
        else:
            ignored.append(obj)
    return found, ignored


def include_edges(srcdir):
    """{file: files it depends on by its #include lines}, a header standing
    for the .c of its name (a header without one is a node of its own):
    what nm cannot see, the types, field accesses and static inlines a file
    takes from a header."""
    daemon = pathlib.Path(srcdir, "daemon")
    include = pathlib.Path(srcdir, "include")
    node = {}
    for h in list(include.glob("*.h")) + list(daemon.rglob("*.h")):
        c = [f for f in daemon.rglob(h.stem + ".c")]
        node[h.name] = str(c[0].relative_to(daemon)) if c else str(h.relative_to(srcdir if h.parent == include
                                                                                     else daemon))
    edges = {}
    for f in list(daemon.rglob("*.[ch]")) + list(include.glob("*.h")):
        me = node[f.name] if f.suffix == ".h" else str(f.relative_to(daemon))
        for line in f.read_text().splitlines():
            m = re.match(r'#include "([^"]+)"', line)
            if m and m.group(1) in node and node[m.group(1)] != me:
                edges.setdefault(me, set()).add(node[m.group(1)])
    return edges


def sccs(graph):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(root):
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        n = stack.pop()
                        on.discard(n)
                        comp.append(n)
                        if n == node:
                            break
                    out.append(sorted(comp))
            elif nxt not in index:
                index[nxt] = low[nxt] = counter[0]
                counter[0] += 1
                stack.append(nxt)
                on.add(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
            elif nxt in on:
                low[node] = min(low[node], index[nxt])

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: callgraph.py BUILD")
    srcdir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found, ignored = objects(sys.argv[1], srcdir)
    if not found:
        sys.exit(f"callgraph: no daemon objects under {sys.argv[1]}/daemon/*.p/")
    syms = {src: symbols(obj) for src, obj in found.items()}
    owner = {}
    for src, (defined, _) in syms.items():
        for sym in defined:
            owner.setdefault(sym, src)
    graph = {src: {owner[s] for s in undefined if s in owner} - {src} for src, (_, undefined) in syms.items()}
    for src, dsts in include_edges(srcdir).items():
        graph.setdefault(src, set()).update(dsts)
        for d in dsts:
            graph.setdefault(d, set())

    for src in sorted(graph):
        print(f"{src} -> {', '.join(sorted(graph[src]))}")
    for obj in ignored:
        print(f"ignored: {obj} (no daemon/ source)")
    cycles = [c for c in sccs(graph) if len(c) > 1]
    for comp in cycles:
        print(f"cycle: {' '.join(comp)}")
        for src in comp:  # what to move or invert to break it
            for dst in sorted(graph[src] & set(comp)):
                used = sorted(s for s in syms[src][1] if owner.get(s) == dst) if src in syms else []
                print(f"  {src} -> {dst}: {' '.join(used) or '#include'}")
    dead = dead_functions(sys.argv[1], found, syms)
    for src, names in sorted(dead.items()):
        print(f"dead: {src}: {' '.join(names)} (called by no other file, main, blkpolicyctl, "
              "tests/unit or fuzz/: make it static or remove it)")
    n_dead = sum(len(v) for v in dead.values())
    print(f"callgraph: {len(graph)} files, {len(cycles)} cycles, {n_dead} dead public functions")
    return 1 if cycles or n_dead else 0


if __name__ == "__main__":
    sys.exit(main())
