#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Build a bootable Debian 12 cell image (docs/image-build.md).
#
#   image-build/debian.sh [--custom] OUTDIR
#
# Writes OUTDIR/cell-debian.raw and .qcow2 (or cell-debian-custom.* with
# --custom), plus the kernel and initrd beside them for direct kernel boot.
# The root file system comes from Debian's archive with mmdebstrap:
# systemd, Debian's kernel, a small initramfs, the libraries our binaries
# are linked against (found from the built binaries, not listed by hand),
# CA certificates; then our binaries and units (`make install`), the shared
# configuration (common.sh), extlinux on an MBR disk.
#
# KUBE_ROUTER=1 adds kube-router (image-build/kube-router.conf; the build
# stops first thing without its SHA-256 or on a mismatch) and Debian's
# ipset, iptables and conntrack.
#
# --custom builds the "bring your own image" comparison instead: the same
# system with Debian's cloud-init and curl, and none of our files; the
# user data installs the release (image-build/init/custom-image.cloud-config).
#
# GPU=1 (cell images only) builds cell-debian-gpu: the same plus NVIDIA's
# driver (Debian's non-free nvidia-driver, built by DKMS for the image's
# kernel) and nvidia-container-toolkit from NVIDIA's repository, whose
# nvidia-ctk writes the CDI spec the agent reads (docs/image-build.md, "GPU
# cells"). Needs NVIDIA's repository reachable; not part of make image.
#
# Needs root, mmdebstrap, extlinux, qemu-utils and a built tree (`make`).
set -euo pipefail
# shellcheck source=image-build/common.sh
. "$(dirname "$0")/common.sh"

custom=
if [ "${1:-}" = --custom ]; then
	custom=1
	shift
fi
[ $# -eq 1 ] || img_die "usage: debian.sh [--custom] OUTDIR"
out=$(mkdir -p "$1" && cd "$1" && pwd)
GPU=${GPU:-}
[ -z "$GPU" ] || [ -z "$custom" ] || img_die "GPU=1 is for the cell image"
name=cell-debian${custom:+-custom}${GPU:+-gpu}
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SIZE_MB=${SIZE_MB:-1024}
BUILD=${BUILD:-$IMG_REPO/build}
# First, before anything else: kube-router's download, checked.
[ -n "$custom" ] || img_kube_router "$out"

[ "$(id -u)" -eq 0 ] || img_die "run as root"
for t in mmdebstrap extlinux qemu-img mkfs.ext4 sfdisk; do
	command -v $t >/dev/null || img_die "$t missing: run scripts/deps.sh"
done
[ -x "$BUILD/bin/cell-agent" ] || img_die "build first: make"

# The Debian packages that hold the libraries our binaries (and the pull
# module, and the libcurl cell-cloudinit loads) are linked against.
runtime_packages() {
	local f libs
	# Both spellings: dpkg knows each file by the path its package ships
	# (/lib or /usr/lib, merged /usr aliases them).
	libs=$(for f in "$BUILD"/bin/* "$BUILD"/lib/cell/*.so; do
		# cellctl is the controller's tool, not the cell's.
		case $f in */cellctl) continue ;; esac
		[ -e "$f" ] || continue
		ldd "$f" | awk '$3 ~ /^\// { print $3 }'
	done | sort -u | while read -r l; do
		echo "$l"
		readlink -f "$l"
	done)
	# shellcheck disable=SC2086 # one path per word
	{ dpkg -S $libs 2>/dev/null || true; } | cut -d: -f1 | sort -u |
		grep -v -x -e libc6 -e libgcc-s1 | tr '\n' ,
}

pkgs=systemd,systemd-sysv,systemd-resolved,udev,kmod,e2fsprogs
pkgs+=,linux-image-amd64,initramfs-tools,zstd,ca-certificates
pkgs+=,libcurl4,$(runtime_packages)
[ -z "$IMG_KUBE_ROUTER_PACKAGES" ] || pkgs+=,$IMG_KUBE_ROUTER_PACKAGES
if [ -n "$custom" ]; then
	pkgs+=,cloud-init,curl,python3-minimal
fi
# GPU cells: the driver from Debian's non-free archive, the toolkit from
# NVIDIA's (signed by its key, fetched here into a keyring of our own).
sources=("deb ${MIRROR%/debian}/debian-security $SUITE-security main")
components=main
keyring_opt=()
if [ -n "$GPU" ]; then
	NVIDIA_REPO=${NVIDIA_REPO:-https://nvidia.github.io/libnvidia-container/stable/deb}
	components="main contrib non-free non-free-firmware"
	pkgs+=,linux-headers-amd64,nvidia-driver,firmware-misc-nonfree
	pkgs+=,nvidia-container-toolkit
	gpu_key=$out/.nvidia-container-toolkit.gpg
	[ -s "$gpu_key" ] || curl -fsSL "$NVIDIA_REPO/../gpgkey" |
		gpg --dearmor >"$gpu_key" || img_die "NVIDIA's key: $NVIDIA_REPO"
	sources=("deb ${MIRROR%/debian}/debian-security $SUITE-security $components"
		"deb [signed-by=$gpu_key] $NVIDIA_REPO/\$(ARCH) /")
	keyring_opt=(--keyring=/usr/share/keyrings --keyring="$gpu_key")
fi
img_log "$name: packages $pkgs"

root=$(mktemp -d "$out/.root.XXXXXX")
trap 'rm -rf "$root"' EXIT

# The initramfs holds only the drivers a cloud's root disk needs, compressed
# with zstd (the fastest to unpack under emulation too).
# shellcheck disable=SC2016 # $1 is mmdebstrap's, expanded by its hook
initramfs_conf='mkdir -p "$1/etc/initramfs-tools/conf.d" &&
	printf "MODULES=list\nCOMPRESS=zstd\n" \
		>"$1/etc/initramfs-tools/conf.d/cell.conf" &&
	printf "%s\n" virtio_pci virtio_blk virtio_scsi sd_mod nvme \
		xen_blkfront ext4 >"$1/etc/initramfs-tools/modules"'

# The Debian part is the slow one (20 minutes on a loaded machine): kept as
# a tarball beside the images, named by what went into it, and reused while
# the package list and the hook stay the same. Delete OUTDIR/.base-* for
# the archive's newer packages.
key=$(printf '%s\n' "$SUITE" "$MIRROR" "$pkgs" "$initramfs_conf" ${GPU:+"${sources[*]}"} |
	sha256sum | cut -c1-16)
base=$out/.base-$name-$key.tar
if [ ! -f "$base" ]; then
	rm -f "$out/.base-$name-"*.tar
	mmdebstrap --variant=minbase --format=tar --include="$pkgs" \
		--components="$components" "${keyring_opt[@]}" \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--setup-hook="$initramfs_conf" "$SUITE" "$base.tmp" "$MIRROR" \
		"${sources[@]}" >&2
	mv "$base.tmp" "$base"
fi
tar -C "$root" --numeric-owner --xattrs --xattrs-include='*' -xpf "$base"

img_install_config "$root" systemd
# DNS from the DHCP lease; pods copy the upstream list (never resolved's
# 127.0.0.53 stub, which is unreachable from a pod's network namespace).
ln -sf /run/systemd/resolve/resolv.conf "$root/etc/resolv.conf"
units="systemd-networkd.service systemd-resolved.service cell-rprivate.service"
if [ -n "$custom" ]; then
	install -D -m 0644 "$IMG_FILES/cloud-cfg-cell.cfg" \
		"$root/etc/cloud/cloud.cfg.d/90-cell.cfg"
else
	img_install_cell "$root"
	img_install_kube_router "$root"
	# iptables on the legacy backend: cell-net's libiptc writes the legacy
	# tables, and kube-router's rules must land beside them.
	if [ -n "$IMG_KUBE_ROUTER" ]; then
		chroot "$root" update-alternatives --set iptables \
			/usr/sbin/iptables-legacy >&2
		chroot "$root" update-alternatives --set ip6tables \
			/usr/sbin/ip6tables-legacy >&2
	fi
	# A systemd image: no OpenRC scripts (systemctl would take them for
	# SysV scripts of the same name), no controller tool.
	rm -f "$root/usr/local/bin/cellctl" "$root/etc/init.d/cell-agent" \
		"$root/etc/init.d/cell-cloudinit"
	units+=" cell-cloudinit.service cell-agent.service"
fi
# shellcheck disable=SC2086 # a list of unit names
systemctl --root="$root" enable $units >/dev/null
# Nobody logs in on a cell: no gettys (the console is for logs).
systemctl --root="$root" mask getty@tty1.service serial-getty@ttyS0.service \
	>/dev/null
img_trim "$root"

cp "$root"/boot/vmlinuz-* "$out/$name.vmlinuz"
cp "$root"/boot/initrd.img-* "$out/$name.initrd"
img_disk "$root" "$out/$name" "$SIZE_MB"
img_log "$name: $(du -sh --apparent-size "$root" | cut -f1) root file system"
ls -l "$out/$name".* >&2
