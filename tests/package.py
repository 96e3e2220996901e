#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Builds the Debian package from a copy of the tree (dpkg-buildpackage -us
-uc -b, about 10 s here), lists it with dpkg-deb -c, and runs lintian: no
errors allowed. Run by scripts/test.sh outside meson, since it builds the
project again. With a second argument, the .deb is kept there (the systemd
VM test installs it).

  python3 tests/package.py SRC [KEEP_DIR]"""
import os
import shutil
import subprocess
import sys
import tempfile

top = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
keep = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else None
# a script scripts/test.sh runs, not a pytest file: its "package: N passed,
# N failed" line comes from the harness the VM suites share
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blkptest.results import Results  # noqa: E402

res = Results()
check = res.check


EXPECTED = [
    "./usr/sbin/blkpolicyd", "./usr/bin/blkpolicyctl", "./lib/systemd/system/blkpolicyd.service",
    "./lib/systemd/system/blkpolicyd-settle.service",
    "./lib/udev/rules.d/90-blkpolicyd.rules", "./etc/blkpolicyd/blkpolicyd.conf",
    "./usr/lib/blkpolicyd/policies.d/20-fast-virtual.policy", "./etc/blkpolicyd/policies.d/",
    # the newest shipped set's number, and where the sets it superseded go
    "./usr/lib/blkpolicyd/policies.d/policy-set", "./usr/lib/blkpolicyd/policy-sets/",
    # set 2 is the newest; set 1, frozen, beside it for the hosts pinned to it
    "./usr/lib/blkpolicyd/policies.d/21-virtio-trial.policy", "./usr/lib/blkpolicyd/policies.d/22-virtio-read-ahead.policy",
    "./usr/lib/blkpolicyd/policy-sets/1/20-fast-virtual.policy", "./usr/lib/blkpolicyd/policy-sets/1/policy-set",
    "./usr/share/man/man8/blkpolicyd.8.gz", "./usr/share/man/man8/blkpolicyctl.8.gz",
    "./usr/share/man/man5/blkpolicyd.conf.5.gz", "./usr/share/man/man5/blkpolicyd.policy.5.gz",
    "./usr/share/bash-completion/completions/blkpolicyctl",
    # the alert rules and dashboard, for a fleet's Prometheus and Grafana
    "./usr/share/doc/blkpolicyd/examples/blkpolicyd.rules.yml",
    "./usr/share/doc/blkpolicyd/examples/blkpolicyd.json",
]

with tempfile.TemporaryDirectory(prefix="blkpolicyd-deb-") as tmp:
    src = os.path.join(tmp, "blkpolicyd-0.1.0")
    shutil.copytree(top, src, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", "build", "build-*", "__pycache__"))
    r = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, capture_output=True, text=True)
    check("dpkg-buildpackage -us -uc -b", r.returncode == 0, (r.stdout + r.stderr)[-3000:])
    deb = os.path.join(tmp, "blkpolicyd_0.1.0_" + subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip() + ".deb")
    if os.path.exists(deb):
        listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True).stdout
        files = {line.split()[5] for line in listing.splitlines() if len(line.split()) >= 6}
        missing = [f for f in EXPECTED if f not in files]
        check("dpkg-deb -c lists the expected files", not missing, f"missing: {missing}\n{listing}")
        lint = subprocess.run(["lintian", "--allow-root", deb], capture_output=True, text=True)
        errors = [line for line in lint.stdout.splitlines() if line.startswith("E:")]
        check("lintian reports no errors", lint.returncode in (0, 1) and not errors, lint.stdout + lint.stderr)
        info = subprocess.run(["dpkg-deb", "-I", deb], capture_output=True, text=True).stdout
        check("postinst and prerm from debhelper are in the package, and the preinst that pins set 1 on "
              "an upgrade from before the sets", "postinst" in info and "prerm" in info and "preinst" in info, info)
        if keep:
            shutil.copy2(deb, os.path.join(keep, "blkpolicyd.deb"))

res.finish("package: ")
