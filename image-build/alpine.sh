#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Build a bootable Alpine cell image (docs/image-build.md): the production
# layout, with OpenRC and the static musl binaries of `make static`.
#
#   image-build/alpine.sh OUTDIR
#
# UNTESTED beyond its parts: Alpine's archive cannot be reached from the
# machines this was written on, so this script has never run to the end.
# What is proven is what it installs: the static binaries (tests/image/
# test_static_rootfs.py runs a pod with them in a root holding no libc),
# the OpenRC scripts (image-build/init/openrc, as `make install` writes
# them) and every step it shares with debian.sh through common.sh (config
# files, trimming, the extlinux disk).
#
# Needs root, apk.static (Alpine's apk-tools-static, unpacked anywhere; APK
# names it), extlinux, qemu-utils, and `make static` done.
set -euo pipefail
# shellcheck source=image-build/common.sh
. "$(dirname "$0")/common.sh"

[ $# -eq 1 ] || img_die "usage: alpine.sh OUTDIR"
out=$(mkdir -p "$1" && cd "$1" && pwd)
name=cell-alpine
ALPINE=${ALPINE:-v3.18}
MIRROR=${MIRROR:-https://dl-cdn.alpinelinux.org/alpine}
APK=${APK:-apk.static}
SIZE_MB=${SIZE_MB:-256}
STATIC_BUILD=${STATIC_BUILD:-$IMG_REPO/build-static}

[ "$(id -u)" -eq 0 ] || img_die "run as root"
command -v "$APK" >/dev/null || img_die "$APK missing (Alpine's apk-tools-static)"
[ -x "$STATIC_BUILD/bin/cell-agent" ] || img_die "build first: make static"

root=$(mktemp -d "$out/.root.XXXXXX")
trap 'rm -rf "$root"' EXIT

# Alpine's base, its virt kernel (virtio, NVMe, ENA, gVNIC) and an initramfs
# with only the cloud disk drivers; CA certificates for registries. The
# static binaries need no library package at all.
mkdir -p "$root/etc/apk" "$root/etc/mkinitfs"
printf '%s/%s/main\n%s/%s/community\n' "$MIRROR" "$ALPINE" "$MIRROR" "$ALPINE" \
	>"$root/etc/apk/repositories"
echo 'features="base ext4 virtio nvme"' >"$root/etc/mkinitfs/mkinitfs.conf"
"$APK" --root "$root" --initdb --allow-untrusted --update-cache \
	add alpine-base openrc linux-virt mkinitfs e2fsprogs \
	ca-certificates util-linux-misc >&2

img_install_cell "$root" OUT="$STATIC_BUILD" STATIC=1 STRIP=1
img_install_config "$root" openrc
# DHCP on the primary interface only; the pod IP is cell-net's.
cat >"$root/etc/network/interfaces" <<'EOF'
auto lo
iface lo inet loopback

auto eth0
iface eth0 inet dhcp
EOF
# Log to the serial console, no login prompts.
sed -i -e '/^tty[0-9]/d' -e '/^ttyS0/d' "$root/etc/inittab"
for s in devfs dmesg mdev hwdrivers; do
	ln -sf "/etc/init.d/$s" "$root/etc/runlevels/sysinit/$s"
done
for s in modules sysctl hostname bootmisc syslog networking cell-rprivate; do
	ln -sf "/etc/init.d/$s" "$root/etc/runlevels/boot/$s"
done
for s in cell-cloudinit cell-agent; do
	ln -sf "/etc/init.d/$s" "$root/etc/runlevels/default/$s"
done
img_trim "$root"

cp "$root"/boot/vmlinuz-virt "$out/$name.vmlinuz"
cp "$root"/boot/initramfs-virt "$out/$name.initrd"
img_disk "$root" "$out/$name" "$SIZE_MB"
ls -l "$out/$name".* >&2
