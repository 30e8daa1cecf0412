#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Install the Debian 12 packages that building, testing and benchmarking
# need. Idempotent; run as root. Both README commands call it.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
	echo "deps.sh: run as root (it installs Debian packages)" >&2
	exit 1
fi
PKGS=(
	# build
	build-essential pkg-config clang clang-format
	shellcheck # scripts/lint.sh: every shell script in the tree
	libcurl4-openssl-dev libssl-dev libjansson-dev libarchive-dev
	libisal-dev libzstd-dev zlib1g-dev libyaml-dev libcap-dev
	libmnl-dev libiptc-dev # netsetup: rtnetlink and iptables without ip/iptables processes
	libseccomp-dev # the units' seccomp filters (agent/pod/seccomp-policy.c compiles them)
	golang-github-containers-common # its seccomp.json is built in as the default profile
	dpkg-dev # apt-get source: civetweb is built from Debian's source package
	# tests: real parts
	docker-registry apache2-utils busybox-static skopeo umoci runc
	containerd stargz-snapshotter # ctr-remote converts test images to eStargz
	python3-pytest python3-requests python3-cryptography python3-websocket
	python3-prometheus-client # agent: the metrics tests parse with its text parser
	python3-botocore # cloudinit: checks the fake IMDS against a real client
	zstd attr curl jq iproute2 util-linux kmod e2fsprogs time procps
	ca-certificates
	mmdebstrap # cloudinit: the Debian root canonical cloud-init is compared in
	awscli # boot: proves the fake SSM endpoint against the real AWS CLI
	xorriso # boot: ISO images with an Azure ovf-env.xml for loop mounts
	# image-build: static musl binaries, Debian images, the qemu boot test
	musl-tools nasm autoconf automake libtool extlinux fdisk qemu-utils
	gperf # static-deps.sh: libseccomp's build
	qemu-system-x86 cloud-image-utils cpio # cpio: the lean image's initramfs
	nfs-ganesha nfs-ganesha-vfs # the image test's NFS server (the shared image cache)
	# arm64 cells (issue 30): the cross toolchain and musl for aarch64 (musl's
	# Debian package for arm64 through multiarch: its aarch64-linux-musl-gcc
	# wrapper), the kernel's arm64 headers, arm64 programs run here
	# (qemu-user), the UEFI boot test (qemu-system-aarch64, EDK2), and the
	# EFI system partition's tools
	gcc-aarch64-linux-gnu linux-libc-dev-arm64-cross musl-dev:arm64
	qemu-user-static qemu-system-arm qemu-efi-aarch64 dosfstools mtools
)
# Debian's arm64 packages (musl-dev:arm64 above; the arm64 image's kernel,
# busybox and boot loader, downloaded by image-build/lean.sh, never
# installed) come through dpkg's multiarch.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
	dpkg --add-architecture arm64
	apt-get update -q
fi
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing+=("$p")
done
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps.sh: all ${#PKGS[@]} packages present"
else
	echo "deps.sh: installing ${missing[*]}"
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
	# The registry and NFS server packages start system services (:5000,
	# :2049); tests run their own.
	for svc in docker-registry nfs-ganesha; do
		if command -v systemctl >/dev/null &&
			systemctl is-active -q "$svc" 2>/dev/null; then
			systemctl disable --now "$svc" || true
		fi
	done
fi

# civetweb: Debian's source package (signed by the archive), exactly this
# version, with our small patch (scripts/civetweb.patch: unmasked client
# frames refused with 1002, RFC 6455 5.1; TLS handshakes
# done by the agent, see agent/api/tls.c), unpacked under .deps/ (not in git).
# The Makefile builds it against OpenSSL 3 (no dlopen) into a static
# library. Debian 12's binary package was built for OpenSSL 1.1.
CIVETWEB_VERSION=1.15+dfsg-4
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
patch="$root/scripts/civetweb.patch"
stamp="$CIVETWEB_VERSION $(sha256sum <"$patch" | cut -d' ' -f1)"
if [ "$(cat "$deps/civetweb/.cell-stamp" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
# A deb-src twin of each Debian archive entry the machine uses (deb822).
src=/etc/apt/sources.list.d/cell-deb-src.sources
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/*.sources &&
	! grep -qs '^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list; then
	awk 'BEGIN { RS = ""; ORS = "\n\n" }
	     /Signed-By: \/usr\/share\/keyrings\/debian-archive-keyring.gpg/ &&
	     /Types:[^\n]*deb/ { sub(/Types:[^\n]*/, "Types: deb-src"); print }' \
		/etc/apt/sources.list.d/*.sources >"$src.tmp"
	if ! grep -q 'deb-src' "$src.tmp"; then
		sed -n 's/^deb \(.*debian.*\)/deb-src \1/p' /etc/apt/sources.list \
			>"${src%.sources}.list"
		rm -f "$src.tmp"
	else
		mv "$src.tmp" "$src"
	fi
	apt-get update -q
fi
work=$(mktemp -d "$deps/civetweb.XXXXXX" 2>/dev/null ||
	{ mkdir -p "$deps" && mktemp -d "$deps/civetweb.XXXXXX"; })
chmod 755 "$work" # apt fetches as _apt
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get source -q "civetweb=$CIVETWEB_VERSION" >/dev/null)
dir="$work/civetweb-${CIVETWEB_VERSION%-*}"
got=$(dpkg-parsechangelog -l "$dir/debian/changelog" -S Version)
if [ "$got" != "$CIVETWEB_VERSION" ]; then
	echo "deps.sh: civetweb source is $got, want $CIVETWEB_VERSION" >&2
	exit 1
fi
patch -d "$dir" -p1 --quiet <"$patch"
echo "$stamp" >"$dir/.cell-stamp"
rm -rf "$deps/civetweb"
mv "$dir" "$deps/civetweb"
echo "deps.sh: civetweb $CIVETWEB_VERSION unpacked and patched in $deps/civetweb"
