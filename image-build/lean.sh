#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Build the lean cell image (docs/image-build.md): what the Alpine cell
# (linux-virt, OpenRC, static binaries) was, from Debian's packages.
#
#   [ARCH=amd64|arm64] image-build/lean.sh OUTDIR
#
# Writes OUTDIR/cell-lean.raw and .qcow2 (and the kernel and initrd beside
# them); ARCH=arm64 (Graviton) writes cell-lean-arm64.*: the same recipe
# with Debian's arm64 packages (multiarch), `make static ARCH=arm64`'s
# binaries, and a UEFI disk (GPT, an EFI system partition with
# systemd-boot, the kernel and the initramfs) in place of extlinux's BIOS
# disk: arm64 instances boot UEFI only. No systemd, no udev, no package manager, no libc outside the
# packages kube-router needs: busybox (static) as init, shell and DHCP
# client; Debian's cloud kernel with the modules a cell uses and nothing
# else; an initramfs of busybox and the disk drivers; the static binaries of
# `make static`; CA certificates. The init is image-build/lean/: rc.boot
# (mounts, modules, sysctls, DHCP on the primary interface, cell-cloudinit),
# then cell-agent respawned by init, a console getty only with cell.getty=1.
#
# KUBE_ROUTER=1 adds kube-router (image-build/kube-router.conf: checked
# first, before anything else) and Debian's ipset, iptables, conntrack with
# the libraries they need.
#
# Needs root, apt-get (a Debian 12 host: the packages are the host's
# archive's), dpkg-deb, depmod, cpio, extlinux, qemu-utils, `make static`.
set -euo pipefail
# shellcheck source=image-build/common.sh
. "$(dirname "$0")/common.sh"

[ $# -eq 1 ] || img_die "usage: lean.sh OUTDIR"
out=$(mkdir -p "$1" && cd "$1" && pwd)
img_arch "${ARCH:-}"
name=cell-lean$IMG_SUFFIX
# First, before anything else: kube-router's download, checked.
img_kube_router "$out"
SIZE_MB=${SIZE_MB:-1024}
STATIC_BUILD=${STATIC_BUILD:-$IMG_REPO/build-static$IMG_SUFFIX}
LEAN=$IMG_DIR/lean

[ "$(id -u)" -eq 0 ] || img_die "run as root"
# shellcheck disable=SC2086 # a list of tools
for t in apt-get dpkg-deb depmod cpio qemu-img mkfs.ext4 sfdisk $IMG_TOOLS; do
	command -v "$t" >/dev/null || img_die "$t missing: run scripts/deps.sh"
done
[ -x "$STATIC_BUILD/bin/cell-agent" ] || img_die "build first: make static"

# The modules a cell loads, with what they need (modprobe finds that).
# Disks (the initramfs): virtio, Xen (older EC2), SCSI for GCE's
# virtio-scsi; NVMe (Nitro) and ext4 are built into the cloud kernel.
DISK_MODULES="virtio_pci virtio_blk virtio_scsi sd_mod xen_blkfront"
# The rest: the NICs (virtio, ENA, gVNIC, Xen), what the agent and cell-net
# use (overlay, veth, netfilter for libiptc, fuse for cell-pull's lazy
# layers: /dev/fuse is there once the module is), what kube-router uses
# (IPVS, ipset, conntrack, dummy, ipip, the bridge's netfilter hook), NFS for a
# shared image cache, the virtio RNG (entropy at boot for TLS), the file
# systems a cloud's user-data medium comes in (NoCloud's cidata, Azure's
# CD-ROM).
RUN_MODULES="virtio_net ena gve xen_netfront overlay veth fuse
	ip_tables iptable_nat iptable_filter iptable_mangle iptable_raw
	ip6_tables ip6table_nat ip6table_filter ip6table_mangle
	xt_MASQUERADE xt_conntrack xt_nat xt_mark xt_comment xt_addrtype
	xt_multiport xt_set xt_ipvs xt_statistic xt_physdev xt_NFLOG
	ipt_REJECT ip6t_REJECT nf_conntrack_netlink nfnetlink_log
	ip_set ip_set_hash_ip ip_set_hash_net ip_set_hash_ipport
	ip_set_hash_ipportip ip_set_hash_ipportnet ip_set_bitmap_port
	ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh ip_vs_lc ip_vs_wlc
	dummy ipip bridge br_netfilter
	nfs nfsv3 nfsv4 virtio_rng
	isofs vfat nls_cp437 nls_iso8859_1 udf sr_mod"

work=$(mktemp -d "$out/.lean.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
kdir=$work/kernel

# The packages, from the host's archive (bookworm and its security suite).
# Another architecture's through dpkg's multiarch (scripts/deps.sh adds it):
# "pkg:arm64" names, downloaded and unpacked, never installed.
kpkg=$(apt-cache depends "linux-image-cloud-$IMG_ARCH$IMG_PKG" |
	awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
[ -n "$kpkg" ] || img_die "no linux-image-cloud-$IMG_ARCH$IMG_PKG in apt's lists" \
	"(dpkg --add-architecture $IMG_ARCH; apt-get update)"
kpkg=${kpkg%:*}
kver=${kpkg#linux-image-}
kpkg+=$IMG_PKG
pkgs="busybox-static$IMG_PKG ca-certificates"
[ "$IMG_ARCH" = amd64 ] || pkgs+=" systemd-boot-efi$IMG_PKG"
if [ -n "$IMG_KUBE_ROUTER_PACKAGES" ]; then
	# shellcheck disable=SC2086 # a list of packages
	pkgs+=" $(apt-cache depends --recurse --no-recommends --no-suggests \
		--no-conflicts --no-breaks --no-replaces --no-enhances \
		${IMG_KUBE_ROUTER_PACKAGES//,/ } | grep -v '^[ <]' | sort -u |
		tr '\n' ' ')"
fi
img_log "$name: kernel $kver, packages $pkgs"
mkdir -p "$work/debs" "$root" "$kdir"
# shellcheck disable=SC2086 # a list of packages
(cd "$work/debs" && apt-get download -q $pkgs "$kpkg" >&2) ||
	img_die "apt-get download failed"

# Merged /usr, as Debian 12's packages expect.
mkdir -p "$root"/usr/{bin,sbin,lib,lib64} "$root"/{etc,dev,proc,sys,run,tmp} \
	"$root"/{boot,root,mnt} "$root"/var/{lib,log/containers,tmp}
for d in bin sbin lib lib64; do
	ln -s "usr/$d" "$root/$d"
done
chmod 1777 "$root/tmp" "$root/var/tmp"
chmod 0700 "$root/root"
for deb in "$work"/debs/*.deb; do
	case ${deb##*/} in
	"${kpkg%:*}"_* | systemd-boot-efi_*) dest=$kdir ;;
	*) dest=$root ;;
	esac
	dpkg-deb --fsys-tarfile "$deb" |
		tar -x --keep-directory-symlink --no-same-owner -C "$dest"
done

# busybox: every applet a link, except where a package put the real tool.
while read -r applet; do
	[ -e "$root/$applet" ] || [ -L "$root/$applet" ] ||
		ln -s /bin/busybox "$root/$applet"
done < <($IMG_RUN "$root/bin/busybox" --list-full)
# iptables from Debian: the legacy (xtables) backend, the one libiptc and
# so cell-net write; kube-router's rules must land in the same tables.
if [ -e "$root/usr/sbin/xtables-legacy-multi" ]; then
	for t in iptables iptables-save iptables-restore ip6tables \
		ip6tables-save ip6tables-restore; do
		ln -sf xtables-legacy-multi "$root/usr/sbin/$t"
	done
fi

# CA certificates: the bundle update-ca-certificates would make.
mkdir -p "$root/etc/ssl/certs"
find "$root/usr/share/ca-certificates" -name '*.crt' -print0 | sort -z |
	xargs -0 cat >"$root/etc/ssl/certs/ca-certificates.crt"

# The kernel and only the modules above (with their dependencies).
cp "$kdir/boot/vmlinuz-$kver" "$root/boot/"
depmod -b "$kdir" "$kver"
mods() {
	local m
	for m in "$@"; do
		modprobe -d "$kdir" -S "$kver" --show-depends "$m" ||
			img_die "module $m is not in $kver"
	done | awk '$1 == "insmod" { print $2 }' | sort -u
}
copy_mods() {
	local dest=$1 f
	shift
	mkdir -p "$dest/lib/modules/$kver"
	cp "$kdir/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} \
		"$dest/lib/modules/$kver/"
	# shellcheck disable=SC2068 # words: the module names
	for f in $(mods $@); do
		f=${f#"$kdir"}
		install -D -m 0644 "$kdir$f" "$dest$f"
	done
	depmod -b "$dest" "$kver"
}
# shellcheck disable=SC2086 # lists of module names
copy_mods "$root" $DISK_MODULES $RUN_MODULES

# The initramfs: busybox, the disk drivers, image-build/lean/initramfs-init.
ird=$work/initramfs
mkdir -p "$ird"/{bin,dev,proc,sys,newroot}
cp "$root/bin/busybox" "$ird/bin/"
for a in sh mount umount modprobe findfs sleep mkdir switch_root ls cat; do
	ln -s busybox "$ird/bin/$a"
done
install -m 0755 "$LEAN/initramfs-init" "$ird/init"
# shellcheck disable=SC2086 # a list of module names
copy_mods "$ird" $DISK_MODULES
(cd "$ird" && find . -print0 | sort -z |
	cpio --null -o -H newc --owner=0:0 --quiet | zstd -q -19 -T1) \
	>"$root/boot/initramfs-$kver"

# Our part: the static binaries, configuration, the init.
img_install_cell "$root" OUT="$STATIC_BUILD" STATIC=1 STRIP=1 ARCH="$IMG_ARCH"
img_install_kube_router "$root"
rm -rf "$root/usr/local/bin/cellctl" "$root/etc/init.d" "$root/usr/lib/systemd" \
	"$root/lib/systemd" "$root/etc/systemd"
img_install_config "$root" none
install -D -m 0644 "$LEAN/inittab" "$root/etc/inittab"
install -D -m 0644 "$LEAN/modules-nic.conf" "$root/etc/modules-load.d/nic.conf"
for f in rc.boot rc.shutdown agent.run getty.run udhcpc.script; do
	install -D -m 0755 "$LEAN/$f" "$root/etc/cell/$f"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:*:0:0:99999:7:::\n' >"$root/etc/shadow"
chmod 0600 "$root/etc/shadow"
printf 'root:x:0:\ntty:x:5:\n' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
: >"$root/etc/resolv.conf"
img_trim "$root"
rm -rf "$root/var/lib/dpkg" "$root/usr/share/ca-certificates" \
	"$root/usr/share/bug" "$root/usr/share/lintian"

cp "$root/boot/vmlinuz-$kver" "$out/$name.vmlinuz"
cp "$root/boot/initramfs-$kver" "$out/$name.initrd"
if [ "$IMG_ARCH" = amd64 ]; then
	img_disk "$root" "$out/$name" "$SIZE_MB"
else
	# The boot test's pods need this busybox as an image layer (a
	# multi-arch index): the image's own, beside it.
	cp "$root/bin/busybox" "$out/$name.busybox"
	img_disk_efi "$root" "$out/$name" "$SIZE_MB" \
		"$kdir/usr/lib/systemd/boot/efi/systemd-boot$IMG_EFI_ARCH.efi"
fi
img_log "$name: $(du -sh --apparent-size "$root" | cut -f1) root file system"
ls -l "$out/$name".* >&2
