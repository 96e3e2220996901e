#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Builds blkpolicyd's OCI image from Debian packages only, with no registry:
# a Debian 12 minbase root made by mmdebstrap (cached), the project's .deb
# installed into it, contrib/container/rootfs/ copied over it, and the
# result imported by podman. docs/service.md, "Kubernetes", says how the
# image is run.
#
#   contrib/container/build-image.sh --deb FILE [--tag TAG] [--include PKG,PKG] [--refresh]
#
# --include adds Debian packages to the base (the Ansible test's targets
# need python3). --refresh builds the cached base again (new security
# updates). The base is cached in $BLKPOLICYD_VM_CACHE (as for the VM
# suites; /var/cache/blkpolicyd-vm) under a name made from the package list
# and the sources, so another list is another base; the .deb is installed
# anew every build.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
deb="" tag="" include="" refresh=false
while [ $# -gt 0 ]; do
        case $1 in
        --deb) deb=$2; shift 2 ;;
        --tag) tag=$2; shift 2 ;;
        --include) include=$2; shift 2 ;;
        --refresh) refresh=true; shift ;;
        *) echo "usage: $0 --deb FILE [--tag TAG] [--include PKG,PKG] [--refresh]" >&2; exit 2 ;;
        esac
done
[ -f "$deb" ] || { echo "$0: --deb FILE: no such file: '$deb'" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "$0: needs root (mmdebstrap, chroot, podman)" >&2; exit 1; }
for tool in mmdebstrap podman dpkg-deb; do
        command -v "$tool" >/dev/null || { echo "$0: $tool is missing (scripts/install-deps.sh --test)" >&2; exit 1; }
done

version=$(dpkg-deb -f "$deb" Version)
tag=${tag:-localhost/blkpolicyd:$version}

# What the .deb links against (its Depends, shlibs resolved at build time),
# plus what the image's scripts run: curl and jq for the node-status
# sidecar, ca-certificates for the API server's TLS.
depends=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/[(|].*//; s/ //g' | grep -v '^$')
packages=$(printf '%s\n' $depends curl jq ca-certificates ${include//,/ } | sort -u | paste -sd, -)
sources=("deb http://deb.debian.org/debian bookworm main"
         "deb http://deb.debian.org/debian bookworm-updates main"
         "deb http://deb.debian.org/debian-security bookworm-security main")
cache=${BLKPOLICYD_VM_CACHE:-/var/cache/blkpolicyd-vm}
key=$(printf '%s\n' "$packages" "${sources[@]}" | sha256sum | cut -c1-12)
base=$cache/image-base-bookworm-$key.tar

mkdir -p "$cache"
if $refresh || [ ! -s "$base" ]; then
        echo "building the base root (mmdebstrap bookworm minbase: $packages)"
        # Documentation and locales stay out, but the copyrights; the
        # dpkg.cfg.d file goes into the image, so the .deb installed below
        # is filtered the same way.
        mmdebstrap --variant=minbase --format=tar --include="$packages" \
                --dpkgopt='path-exclude=/usr/share/man/*' \
                --dpkgopt='path-exclude=/usr/share/doc/*' \
                --dpkgopt='path-include=/usr/share/doc/*/copyright' \
                --dpkgopt='path-exclude=/usr/share/locale/*' \
                --dpkgopt='path-exclude=/usr/share/info/*' \
                --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
                bookworm "$base.tmp" "${sources[@]}"
        mv "$base.tmp" "$base"
fi

root=$(mktemp -d /tmp/blkpolicyd-image.XXXXXX)
trap 'rm -rf "$root"' EXIT
tar -C "$root" -xf "$base"
cp "$deb" "$root/tmp/blkpolicyd.deb"
# The maintainer scripts run in the root as on a host; no systemd runs there,
# so they start nothing.
chroot "$root" dpkg -i /tmp/blkpolicyd.deb >/dev/null
rm "$root/tmp/blkpolicyd.deb"
[ ! -d "$here/rootfs" ] || cp -a "$here/rootfs/." "$root/"

# An imported image has no environment: `podman run` supplies a PATH,
# `podman kube play` does not (an exec of `blkpolicyctl` there was "not
# found in $PATH"), nor need a cluster's runtime. So the image sets one.
tar -C "$root" --numeric-owner -c . | podman import \
        --change 'ENTRYPOINT ["/usr/sbin/blkpolicyd"]' \
        --change 'CMD []' \
        --change 'STOPSIGNAL SIGTERM' \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change "LABEL org.opencontainers.image.title=blkpolicyd" \
        --change "LABEL org.opencontainers.image.version=$version" \
        --change "LABEL org.opencontainers.image.description=block device queue policy daemon" \
        - "$tag" >/dev/null
echo "$tag"
