#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Build (once) a throwaway Debian 12 root with Debian's cloud-init in it, for
# tests and benchmarks that compare cell-cloudinit with canonical cloud-init.
# Prints the root's path. The root is cached under CELL_TEST_CACHE
# (default /var/cache/cell-tests), keyed by a hash of the package list and
# this recipe, so a changed list builds a new root beside the old one.
#   scripts/canonical-root.sh            # build if missing, print the path
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
	echo "canonical-root.sh: run as root (mmdebstrap)" >&2
	exit 1
fi
CACHE=${CELL_TEST_CACHE:-/var/cache/cell-tests}
SUITE=bookworm
# sudo: so /etc/sudoers exists as on a real image; the rest is minbase.
PACKAGES=cloud-init,sudo
KEY=$(printf '%s\n' "recipe 1" "$SUITE" minbase "$PACKAGES" | sha256sum | cut -c1-16)
ROOT=$CACHE/debian-cloudinit-$KEY
if [ -x "$ROOT/usr/bin/cloud-init" ] && [ -e "$ROOT/.cell-complete" ]; then
	echo "$ROOT"
	exit 0
fi
if ! command -v mmdebstrap >/dev/null; then
	echo "canonical-root.sh: installing mmdebstrap" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >&2 ||
		{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >&2; }
fi
mkdir -p "$CACHE"
# One builder at a time (the suite runs twice, release and ASan).
exec 9>"$CACHE/.lock-$KEY"
flock 9
if [ -e "$ROOT/.cell-complete" ]; then
	echo "$ROOT"
	exit 0
fi
echo "canonical-root.sh: building $ROOT (once; about a minute)" >&2
t0=$(date +%s)
rm -rf "$ROOT.new"
# No mirror named: mmdebstrap takes this machine's apt sources (the archive
# that is reachable). The package cache is dropped: only the root is kept.
mmdebstrap --variant=minbase --include="$PACKAGES" --skip=cleanup/reproducible \
	"$SUITE" "$ROOT.new" >&2
rm -rf "$ROOT"
mv "$ROOT.new" "$ROOT"
touch "$ROOT/.cell-complete"
echo "canonical-root.sh: built in $(($(date +%s) - t0)) s" >&2
echo "$ROOT"
