#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Fetch kube-router as pinned in image-build/kube-router.conf, the way KOPS'
# nodeup fetches an asset: download, check the SHA-256, only then use it.
#
#   image-build/kube-router.sh DIR
#
# Writes DIR/kube-router-<sha256> (the binary out of the release tarball)
# and prints its path; a second run with the same hash reuses it. Exits
# non-zero, leaving nothing in DIR, when no SHA-256 is given, the download
# fails, or the download's SHA-256 is not the pinned one. The environment's
# KUBE_ROUTER_URL and KUBE_ROUTER_SHA256 win over the file's (the tests
# serve a stand-in; a release build passes the hash it read from
# kube-router's checksum file). KUBE_ROUTER_ARCH (amd64, arm64) picks the
# asset and its pinned hash. Image recipes call this first, before any
# other step, so a wrong asset stops the build before it has cost anything.
set -euo pipefail

die() {
	echo "kube-router: $*" >&2
	exit 1
}

[ $# -eq 1 ] || die "usage: kube-router.sh DIR"
env_url=${KUBE_ROUTER_URL:-}
env_sum=${KUBE_ROUTER_SHA256:-}
# shellcheck source=image-build/kube-router.conf
. "$(dirname "$0")/kube-router.conf"
url=${env_url:-$KUBE_ROUTER_URL}
sum=${env_sum:-$KUBE_ROUTER_SHA256}
sum=${sum,,}

if [ -z "$sum" ]; then
	die "no SHA-256 for kube-router $KUBE_ROUTER_VERSION" \
		"($KUBE_ROUTER_ARCH): refusing to" \
		"build an image with it. Read it from $KUBE_ROUTER_CHECKSUMS" \
		"(the line for $KUBE_ROUTER_ASSET) and pass" \
		"KUBE_ROUTER_SHA256=<hex>, or build without KUBE_ROUTER=1"
fi
[[ $sum =~ ^[0-9a-f]{64}$ ]] || die "KUBE_ROUTER_SHA256 is not 64 hex digits"

mkdir -p "$1"
bin=$(cd "$1" && pwd)/kube-router-$sum
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
tmp=$(mktemp -d "$1/.kube-router.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "kube-router: fetching $url" >&2
curl -fsSL --retry 2 --max-filesize $((256 << 20)) -o "$tmp/asset" "$url" ||
	die "download of $url failed"
got=$(sha256sum "$tmp/asset" | cut -d' ' -f1)
[ "$got" = "$sum" ] ||
	die "$url has sha256:$got, not the pinned sha256:$sum: refusing it"
# The release is a tarball holding the binary at its top; nothing else in
# it is used.
tar -xzf "$tmp/asset" -C "$tmp" kube-router ||
	die "$url holds no kube-router at its top"
chmod 0755 "$tmp/kube-router"
mv "$tmp/kube-router" "$bin"
echo "kube-router: $KUBE_ROUTER_VERSION sha256:$sum" >&2
echo "$bin"
