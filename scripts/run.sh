#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs what is missing, builds blkpolicyd and runs it live on this
# machine in dry-run mode: every decision is logged, nothing is written.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
# debugfs tells poll queues from default ones (null_blk, NVMe)
if [ "$(id -u)" -eq 0 ] && ! mountpoint -q /sys/kernel/debug; then
        mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null || true
fi
exec python3 tools/demo.py build/daemon/blkpolicyd policies
