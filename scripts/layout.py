#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""README's "Source layout" table against the tree: every C file of
daemon/ and ctl/ is named there, and every file named there exists.

A cell names files as `daemon/a.c`, then more of the same directory as
`b.c`.

And the folder rules: a file of daemon/ includes only headers of its own
folder, of a folder below it (core < conflicts < io < loop < control <
daemon/main.c) or of include/, which holds pure contracts only (it
includes nothing of daemon/). meson's include paths enforce the same at
build time; this says which line breaks it.

Exits 1 and lists what differs; prints nothing otherwise."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
text = (root / "README.md").read_text()
m = re.search(r"^## Source layout\n(.*?)^## ", text, re.S | re.M)
if not m:
    sys.exit("layout: README.md has no '## Source layout' section")

named = set()
for row in m.group(1).splitlines():
    if not row.startswith("| `"):
        continue
    first = row.split("|")[1]
    directory = None
    for name in re.findall(r"`([^`]+)`", first):
        if "/" in name:
            directory, name = name.rsplit("/", 1)
        if directory and name.endswith(".c"):
            named.add(f"{directory}/{name}")

tree = {str(p.relative_to(root)) for d in ("daemon", "ctl") for p in (root / d).rglob("*.c")}
missing = sorted(tree - named)

RANK = {"include": 0, "daemon/core": 0, "daemon/conflicts": 1, "daemon/io": 2, "daemon/loop": 3,
        "daemon/control": 4, "daemon": 5}
headers = {}
for d in RANK:
    for h in (root / d).glob("*.h"):
        headers.setdefault(h.name, []).append(d)
bad = []
for d in RANK:
    for f in sorted((root / d).glob("*.[ch]")):
        for n, line in enumerate(f.read_text().splitlines(), 1):
            m = re.match(r'#include "([^"]+)"', line)
            if not m or m.group(1) not in headers:
                continue  # the build's generated header, or one of a library
            for where in headers[m.group(1)]:
                if RANK[where] > RANK[d] or (d == "include" and where != "include"):
                    bad.append(f"layout: {f.relative_to(root)}:{n}: includes {where}/{m.group(1)}, "
                               f"which is above {d}/")
for b in bad:
    print(b)
stale = sorted(named - tree)
for f in missing:
    print(f"layout: {f} is not in README's source layout")
for f in stale:
    print(f"layout: README names {f}, which does not exist")
sys.exit(1 if missing or stale or bad else 0)
