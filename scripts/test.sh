#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs what is missing, builds blkpolicyd twice (warnings as errors;
# ASan+UBSan) and runs every test in both builds. Privileged tests (loop
# devices) need root: without it they skip with a message, except under
# CI=true, where they fail.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --test

meson_setup() {
        local dir=$1; shift
        if [ -d "$dir" ]; then
                meson setup --reconfigure "$dir" "$@" >/dev/null
        else
                meson setup "$dir" "$@" >/dev/null
        fi
}

meson_setup build -Dwerror=true -Dfault_injection=true
meson_setup build-sanitize -Dwerror=true -Dfault_injection=true -Db_sanitize=address,undefined -Db_lundef=false \
        -Dc_args=-fno-sanitize-recover=all -Dbuildtype=debug

# The VM suites' downloads and kernel build (on a cold cache: about 15 of
# the run's minutes) go on in the background, at the lowest priority, while
# the meson suites run; the VM suites wait for them (tests/vm/warm-cache.py).
warm_pid=""
if [ "$(id -u)" -eq 0 ]; then
        nice -n 19 python3 tests/vm/warm-cache.py > build/warm-cache.log 2>&1 &
        warm_pid=$!
fi

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

status=0
for dir in build build-sanitize; do
        echo "=== $dir"
        ninja -C "$dir"
        meson test -C "$dir" --print-errorlogs || status=1
done

# The Debian package: built from a copy of the tree, listed, lintian'ed.
echo "=== package"
python3 tests/package.py . build | tee build/package.log || status=1

# A suite that needs root: it runs as root, fails under CI=true without
# it, and otherwise skips saying why. Its "LABEL: N passed, N failed" line
# goes to build/LABEL.log for the summary.
root_suite() {
        local label=$1 why=$2; shift 2
        echo "=== $label"
        if [ "$(id -u)" -eq 0 ]; then
                "$@" | tee "build/$label.log" || status=1
        elif [ "${CI:-}" = "true" ]; then
                echo "$label: 0 passed, 1 failed (CI=true needs root: $why)" | tee "build/$label.log"; status=1
        else
                echo "SKIP: $label needs root ($why); run with sudo"
                echo "$label: 0 passed, 0 failed" > "build/$label.log"
        fi
}

# The OCI image under podman, run as the DaemonSet runs it, on loops of its own,
# while the VM cache warms.
root_suite container "podman, privileged containers, loop devices" python3 tests/container.py --deb build/blkpolicyd.deb
# The Ansible rollout in waves, against podman targets of the same image.
root_suite rollout "podman, privileged containers, loop devices, ansible" python3 tests/rollout.py --deb build/blkpolicyd.deb

if [ -n "$warm_pid" ]; then
        echo "=== warm cache"
        wait "$warm_pid" || true     # a step that failed is done again, and reported, by its suite
        cat build/warm-cache.log
fi

# Real kernels: Debian's 6.1 and 6.12 under QEMU.
root_suite vm "apt-get download of the kernels" python3 tests/vm/vmtest.py --blkpolicyd build/daemon/blkpolicyd
# Set 2's virtio read-ahead on the real kernels: 6.12 leaves it, 7.3's 8192 becomes 128 and comes back.
root_suite readahead "apt-get download of the kernels" python3 tests/vm/readahead.py --blkpolicyd build/daemon/blkpolicyd
# Storage stacks on the same kernels (#31): dm, LVM, dm-crypt, md, dm-multipath and NVMe
# multipath, built in the guest with Debian's own tools (apt-get download, not installed).
root_suite stacks "apt-get download of the kernels and of dmsetup, lvm2, mdadm, cryptsetup" python3 tests/vm/stacktest.py --blkpolicyd build/daemon/blkpolicyd
# A trial end to end (#28): scsi_debug ends on mq-deadline, null_blk on none, SIGTERM mid-trial puts back.
root_suite trial "apt-get download of the kernels" python3 tests/vm/trialtest.py --blkpolicyd build/daemon/blkpolicyd
# The .deb under a real systemd and udevd: Debian 12 (debootstrap) on 6.12.
root_suite systemd "debootstrap, chroot dpkg -i" python3 tests/vm/systemdtest.py --deb build/blkpolicyd.deb

# Static analysis: cppcheck and clang-tidy with the tree's configs.
echo "=== lint"
scripts/lint.sh build | tee build/lint.log || status=1

python3 - build/meson-logs/testlog.json build-sanitize/meson-logs/testlog.json package lint container rollout vm readahead stacks trial systemd <<'PY'
import json, os, re, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
for path in sys.argv[1:3]:
    for line in open(path):
        r = json.loads(line)["result"]
        counts["passed" if r == "OK" else "skipped" if r == "SKIP" else "failed"] += 1
# each LABEL's "LABEL: N passed, N failed" line, in build/LABEL.log
for label in sys.argv[3:]:
    log = f"build/{label}.log"
    m = os.path.exists(log) and re.search(label + r": (\d+) passed, (\d+) failed", open(log).read())
    if m:
        counts["passed"] += int(m.group(1))
        counts["failed"] += int(m.group(2))
    else:
        counts["failed"] += 1
print(f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
PY
exit $status
