#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs the Debian packages blkpolicyd needs to build (and, with --test,
# to run its tests) that are not installed yet. Idempotent; apt-get only
# runs when something is missing.
set -euo pipefail

build=(gcc meson ninja-build pkgconf libudev-dev libsystemd-dev libinih-dev libnl-3-dev libcjson-dev python3 bash-completion)
test=(strace util-linux fio systemd groff-base man-db debhelper dpkg-dev lintian valgrind cppcheck clang-tidy qemu-system-x86 busybox-static cpio kmod xz-utils liburing-dev debootstrap e2fsprogs
      # the test suites are pytest files (tests/conftest.py, tests/blkptest)
      python3-pytest
      # tests/prometheus.py: node_exporter's textfile collector serves the metrics, Prometheus scrapes them
      prometheus prometheus-node-exporter
      # tests/vm/dd_kernel.py builds a kernel: the VM test bed's dispatch_direct one
      make patch flex bison bc libelf-dev libssl-dev
      # contrib/container: the image is an mmdebstrap root imported by podman; runc, since
      # crun refuses a hybrid cgroup hierarchy (docs/service.md, "In a container")
      # podman kube play builds its pause image around catatonit, which podman only recommends
      mmdebstrap podman runc catatonit
      # contrib/kubernetes's manifests are checked against the API's schemas; contrib/ansible's rollout runs
      # against podman targets through the containers.podman connection, in Debian's ansible, not ansible-core
      python3-jsonschema python3-yaml ansible-core ansible)

want=("${build[@]}")
[ "${1:-}" = "--test" ] && want+=("${test[@]}")

missing=()
for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
        echo "Missing packages: ${missing[*]}" >&2
        echo "Run as root (sudo) to install them, or: sudo apt-get install ${missing[*]}" >&2
        exit 1
fi
echo "Installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
