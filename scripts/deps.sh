#!/bin/bash
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
	libcurl4-openssl-dev libssl-dev libjansson-dev libarchive-dev
	libisal-dev libzstd-dev zlib1g-dev libyaml-dev libcivetweb-dev libcap-dev
	libmnl-dev libiptc-dev # netsetup: rtnetlink and iptables without ip/iptables processes
	# tests: real parts
	docker-registry apache2-utils busybox-static skopeo umoci runc
	python3-pytest python3-requests python3-cryptography python3-websocket
	python3-botocore # cloudinit: checks the fake IMDS against a real client
	zstd attr curl jq iproute2 util-linux kmod e2fsprogs time procps
	ca-certificates
	mmdebstrap # cloudinit: the Debian root canonical cloud-init is compared in
	awscli # boot: proves the fake SSM endpoint against the real AWS CLI
	xorriso # boot: ISO images with an Azure ovf-env.xml for loop mounts
	# image-build: static musl binaries, Debian images, the qemu boot test
	musl-tools nasm autoconf automake libtool shellcheck extlinux fdisk qemu-utils
	qemu-system-x86 cloud-image-utils
)
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps.sh: all ${#PKGS[@]} packages present"
	exit 0
fi
echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
# The registry package starts a system service on :5000; tests run their own.
if command -v systemctl >/dev/null && systemctl is-active -q docker-registry 2>/dev/null; then
	systemctl disable --now docker-registry || true
fi
