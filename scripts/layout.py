#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""README's "Source layout" table against the tree: every C file of
daemon/ and ctl/ is named there, and every file named there exists.

A cell names files as `daemon/a.c`, then more of the same directory as
`b.c`. Exits 1 and lists what differs; prints nothing otherwise."""
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

tree = {str(p.relative_to(root)) for d in ("daemon", "ctl") for p in (root / d).glob("*.c")}
missing = sorted(tree - named)
stale = sorted(named - tree)
for f in missing:
    print(f"layout: {f} is not in README's source layout")
for f in stale:
    print(f"layout: README names {f}, which does not exist")
sys.exit(1 if missing or stale else 0)
