# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Steps every image recipe shares (debian.sh, alpine.sh): sourced, not run.
# Each function takes the root filesystem being built as $1.

IMG_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IMG_REPO=$(cd "$IMG_DIR/.." && pwd)
IMG_FILES=$IMG_DIR/files
# The kernel command line of every cell: the serial console last, so that
# /dev/console (systemd's and OpenRC's status, the agent's log) is ttyS0,
# where the clouds' console-log APIs read.
# Set by img_kube_router (KUBE_ROUTER=1); empty: no kube-router.
IMG_KUBE_ROUTER=
IMG_KUBE_ROUTER_PACKAGES=
IMG_CMDLINE="console=tty0 console=ttyS0,115200n8 net.ifnames=0 quiet"
# The target (img_arch): Debian's name, the suffix of image and build
# names, apt's ":arch" for another machine's packages, how to run one of
# its programs here, the disk's tools.
IMG_ARCH=amd64
IMG_SUFFIX=
IMG_PKG=
IMG_RUN=
IMG_EFI_ARCH=
IMG_TOOLS=extlinux

# img_arch [ARCH]: amd64 (default: this machine) or arm64 (Graviton). An
# arm64 cell's serial console is ttyS0 on EC2 (last, so /dev/console when
# it exists) and ttyAMA0 (PL011) on qemu's virt machine; no VGA.
# shellcheck disable=SC2034 # read by the recipes that source this file
img_arch() {
	IMG_ARCH=${1:-$(dpkg --print-architecture)}
	case $IMG_ARCH in
	amd64 | x86_64) IMG_ARCH=amd64 ;;
	arm64 | aarch64)
		IMG_ARCH=arm64 IMG_SUFFIX=-arm64 IMG_EFI_ARCH=aa64
		IMG_TOOLS="mkfs.vfat mcopy mmd"
		IMG_CMDLINE="console=ttyAMA0,115200 console=ttyS0,115200n8 net.ifnames=0 quiet"
		;;
	*) img_die "ARCH=$IMG_ARCH: amd64 or arm64" ;;
	esac
	if [ "$IMG_ARCH" != "$(dpkg --print-architecture)" ]; then
		IMG_PKG=:$IMG_ARCH
		IMG_RUN=qemu-${IMG_ARCH/arm64/aarch64}-static
		IMG_TOOLS+=" $IMG_RUN"
	fi
}

img_die() {
	echo "image-build: $*" >&2
	exit 1
}

img_log() {
	echo "image-build: $*" >&2
}

# img_install_cell ROOT [make args...]: our binaries, the pull module, the
# docs and the init files, as `make install` lays them out under
# /usr/local (the same paths the custom-image release tarball uses).
img_install_cell() {
	local root=$1
	shift
	make -C "$IMG_REPO" -s install DESTDIR="$root" PREFIX=/usr/local "$@" >&2
}

# img_install_config ROOT INIT: sysctls, modules, console logging, / made
# rprivate; INIT is systemd, openrc or none (the lean image's own init).
img_install_config() {
	local root=$1 init=$2
	install -D -m 0644 "$IMG_FILES/sysctl-cell.conf" \
		"$root/etc/sysctl.d/90-cell.conf"
	install -D -m 0644 "$IMG_FILES/modules-cell.conf" \
		"$root/etc/modules-load.d/cell.conf"
	case $init in
	systemd)
		install -D -m 0644 "$IMG_FILES/cell-rprivate.service" \
			"$root/etc/systemd/system/cell-rprivate.service"
		install -D -m 0644 "$IMG_FILES/journald-cell.conf" \
			"$root/etc/systemd/journald.conf.d/cell.conf"
		install -D -m 0644 "$IMG_FILES/networkd-primary.network" \
			"$root/etc/systemd/network/10-primary.network"
		install -D -m 0644 "$IMG_FILES/networkd-cell.conf" \
			"$root/etc/systemd/networkd.conf.d/cell.conf"
		;;
	openrc)
		install -D -m 0755 "$IMG_FILES/cell-rprivate.openrc" \
			"$root/etc/init.d/cell-rprivate"
		;;
	none) ;; # the lean image: its rc.boot does all of it
	*) img_die "unknown init $init" ;;
	esac
	# Unique per instance: made at first boot, never baked in.
	rm -f "$root/etc/machine-id" "$root/var/lib/dbus/machine-id"
	: >"$root/etc/machine-id"
	rm -f "$root"/etc/ssh/ssh_host_*
	echo cell >"$root/etc/hostname"
}

# img_trim ROOT: what a cell never reads (docs, man pages, locales, apt's
# lists and caches, kernel modules for hardware no cloud VM has).
img_trim() {
	local root=$1 mods
	rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* \
		"$root"/usr/share/info/* "$root"/usr/share/lintian \
		"$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* \
		"$root"/var/cache/debconf/*-old "$root"/var/log/*.log
	find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 \
		! -name 'locale.alias' -exec rm -rf {} + 2>/dev/null || true
	for mods in "$root"/lib/modules/*/kernel; do
		[ -d "$mods" ] || continue
		rm -rf "$mods"/sound "$mods"/drivers/{gpu,media,infiniband} \
			"$mods"/drivers/{staging,bluetooth,isdn,iio,usb,hid} \
			"$mods"/drivers/{input,video,mmc,mtd,platform,thunderbolt} \
			"$mods"/drivers/net/{wireless,can,usb} \
			"$mods"/net/{wireless,mac80211,bluetooth}
	done
}

# img_disk ROOT OUT SIZE_MB: a raw disk (MBR, one bootable ext4 partition
# from 1 MiB, extlinux in it) at OUT.raw and its qcow2 at OUT.qcow2; the
# root file system's size in MiB at OUT.root-mib. The
# file system is made from ROOT with mkfs.ext4 -d (no loop device); only
# extlinux's install mounts it, in a private mount namespace.
img_disk() {
	local root=$1 out=$2 size_mb=$3 uuid part
	uuid=$(cat /proc/sys/kernel/random/uuid)
	part=$out.part
	rm -f "$part" "$out.raw" "$out.qcow2"
	# What the boot test prints as SIZE … root=<MiB>.
	du -s -m --apparent-size "$root" | cut -f1 >"$out.root-mib"
	mkdir -p "$root/boot/extlinux"
	img_extlinux_conf "$root" "$uuid" >"$root/boot/extlinux/extlinux.conf"
	printf 'UUID=%s / ext4 rw,noatime,errors=remount-ro 0 1\n' "$uuid" \
		>"$root/etc/fstab"
	truncate -s $((size_mb - 1))M "$part"
	# No journal resize inode, no 64bit: smaller, and extlinux reads it.
	mkfs.ext4 -q -F -U "$uuid" -L cellroot -O ^64bit -E root_owner=0:0 \
		-d "$root" "$part" || img_die "mkfs.ext4 failed"
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare -m sh -c '
		set -e
		mnt=$(mktemp -d)
		mount -o loop "$1" "$mnt"
		extlinux --install "$mnt/boot/extlinux" >/dev/null 2>&1
		umount "$mnt"
		rmdir "$mnt"' sh "$part" || img_die "extlinux --install failed"
	truncate -s "${size_mb}M" "$out.raw"
	printf 'label: dos\nstart=2048, type=83, bootable\n' |
		sfdisk -q "$out.raw" || img_die "sfdisk failed"
	dd if=/usr/lib/EXTLINUX/mbr.bin of="$out.raw" conv=notrunc \
		status=none
	dd if="$part" of="$out.raw" bs=1M seek=1 conv=notrunc,sparse \
		status=none
	rm -f "$part"
	qemu-img convert -c -O qcow2 "$out.raw" "$out.qcow2"
}

# img_disk_efi ROOT OUT SIZE_MB BOOTLOADER: the UEFI disk (arm64): GPT, an
# EFI system partition (FAT, ESP_MB) with BOOTLOADER (systemd-boot) at the
# removable-media path \EFI\BOOT\BOOT<ARCH>.EFI, its loader entry, the
# kernel and initramfs of ROOT/boot (moved there: the firmware's loader
# reads only the ESP); the ext4 root after it. No loop device, no mount:
# mkfs.ext4 -d, mkfs.vfat and mtools write the partitions as files.
img_disk_efi() {
	local root=$1 out=$2 size_mb=$3 loader=$4 uuid esp part kernel initrd
	local esp_mb=${ESP_MB:-64}
	uuid=$(cat /proc/sys/kernel/random/uuid)
	esp=$out.esp
	part=$out.part
	rm -f "$esp" "$part" "$out.raw" "$out.qcow2"
	kernel=$(find "$root/boot" -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -n1)
	initrd=$(find "$root/boot" -maxdepth 1 -name 'initramfs-*' | sort -V | tail -n1)
	if [ ! -f "$kernel" ] || [ ! -f "$initrd" ] || [ ! -f "$loader" ]; then
		img_die "no kernel, initramfs or boot loader for the EFI disk"
	fi
	truncate -s "${esp_mb}M" "$esp"
	mkfs.vfat -F 32 -n CELLESP "$esp" >/dev/null || img_die "mkfs.vfat failed"
	export MTOOLS_SKIP_CHECK=1
	mmd -i "$esp" ::/EFI ::/EFI/BOOT ::/loader ::/loader/entries
	mcopy -i "$esp" "$loader" "::/EFI/BOOT/BOOT${IMG_EFI_ARCH^^}.EFI"
	mcopy -i "$esp" "$kernel" ::/vmlinuz
	mcopy -i "$esp" "$initrd" ::/initrd
	printf 'timeout 0\ndefault cell.conf\n' >"$out.loader.conf"
	printf 'title cell\nlinux /vmlinuz\ninitrd /initrd\noptions root=UUID=%s rw %s\n' \
		"$uuid" "$IMG_CMDLINE" >"$out.cell.conf"
	mcopy -i "$esp" "$out.loader.conf" ::/loader/loader.conf
	mcopy -i "$esp" "$out.cell.conf" ::/loader/entries/cell.conf
	rm -f "$out.loader.conf" "$out.cell.conf" "$kernel" "$initrd"
	du -s -m --apparent-size "$root" | cut -f1 >"$out.root-mib"
	printf 'UUID=%s / ext4 rw,noatime,errors=remount-ro 0 1\n' "$uuid" \
		>"$root/etc/fstab"
	truncate -s $((size_mb - esp_mb - 2))M "$part"
	mkfs.ext4 -q -F -U "$uuid" -L cellroot -E root_owner=0:0 \
		-d "$root" "$part" || img_die "mkfs.ext4 failed"
	truncate -s "${size_mb}M" "$out.raw"
	# ESP from 1 MiB, root after it; the backup GPT in the last 1 MiB.
	printf 'label: gpt\nstart=2048, size=%d, type=%s, name=esp\nstart=%d, size=%d, type=%s, name=root\n' \
		$((esp_mb * 2048)) C12A7328-F81F-11D2-BA4B-00A0C93EC93B \
		$(((esp_mb + 1) * 2048)) $(((size_mb - esp_mb - 2) * 2048)) \
		B921B045-1DF0-41C3-AF44-4C6F280D3FAE |
		sfdisk -q "$out.raw" || img_die "sfdisk failed"
	dd if="$esp" of="$out.raw" bs=1M seek=1 conv=notrunc,sparse status=none
	dd if="$part" of="$out.raw" bs=1M seek=$((esp_mb + 1)) \
		conv=notrunc,sparse status=none
	rm -f "$esp" "$part"
	qemu-img convert -c -O qcow2 "$out.raw" "$out.qcow2"
}

img_extlinux_conf() {
	local root=$1 uuid=$2 kernel initrd
	kernel=$(find "$root/boot" -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' |
		sort -V | tail -n1)
	initrd=$(find "$root/boot" -maxdepth 1 \( -name 'initrd.img-*' -o \
		-name 'initramfs-*' \) -printf '%f\n' | sort -V | tail -n1)
	cat <<EOF
DEFAULT cell
TIMEOUT 0
PROMPT 0
LABEL cell
	LINUX /boot/$kernel
	INITRD /boot/$initrd
	APPEND root=UUID=$uuid rw $IMG_CMDLINE
EOF
}

# img_kube_router OUTDIR: with KUBE_ROUTER=1, fetch and check kube-router as
# pinned in kube-router.conf (kube-router.sh); a recipe calls this before
# anything else. Sets IMG_KUBE_ROUTER (the checked binary, or empty) and
# IMG_KUBE_ROUTER_PACKAGES (what it runs, from Debian; comma-separated).
img_kube_router() {
	IMG_KUBE_ROUTER=
	IMG_KUBE_ROUTER_PACKAGES=
	[ "${KUBE_ROUTER:-0}" = 1 ] || return 0
	IMG_KUBE_ROUTER=$(KUBE_ROUTER_ARCH=$IMG_ARCH \
		"$IMG_DIR/kube-router.sh" "$1/.kube-router") ||
		img_die "no kube-router image without a checked kube-router"
	# shellcheck source=image-build/kube-router.conf disable=SC2034
	IMG_KUBE_ROUTER_PACKAGES=$(. "$IMG_DIR/kube-router.conf" &&
		echo "$KUBE_ROUTER_PACKAGES")
}

# img_install_kube_router ROOT: the binary img_kube_router checked, where
# the agent looks for it (PATH; agent/sup/netagent.c).
img_install_kube_router() {
	[ -n "$IMG_KUBE_ROUTER" ] || return 0
	install -D -m 0755 "$IMG_KUBE_ROUTER" "$1/usr/local/bin/kube-router"
}
