#!/bin/bash
# Benchmark cell-cloudinit side by side with Debian's cloud-init: both apply
# the same document (10 write_files and one runcmd) from a NoCloud seed to
# the same throwaway Debian root (mmdebstrap, cached), in one run; prints
# medians, the ratio (target <= 0.05) and cell-cloudinit's peak RSS (target
# <= 4 MiB). Run as root on Debian 12; see bench/cloudinit.py.
#   BENCH_REPS=7 bench/cloudinit.sh
#   CELL_BENCH_ROOT=/var/tmp/cell-bench-cloudinit-root  (the cache)
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "cloudinit.sh: run as root (mmdebstrap, chroot, namespaces)" >&2
	exit 1
fi
ROOT=${CELL_BENCH_ROOT:-/var/tmp/cell-bench-cloudinit-root}
OUT=${OUT:-build}

if ! command -v mmdebstrap >/dev/null; then
	echo "cloudinit.sh: installing mmdebstrap" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >&2 ||
		{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >&2; }
fi
if [ ! -x "$ROOT/usr/bin/cloud-init" ]; then
	echo "cloudinit.sh: building a Debian root with cloud-init in $ROOT (once)" >&2
	rm -rf "$ROOT.new"
	# The archive this machine's apt uses (no mirror named: mmdebstrap
	# takes the host's sources).
	mmdebstrap --variant=minbase --include=cloud-init bookworm "$ROOT.new" >&2
	rm -rf "$ROOT"
	mv "$ROOT.new" "$ROOT"
fi
make -j"$(nproc)" "$OUT/bin/cell-cloudinit" >/dev/null
# A private mount and UTS namespace: /proc, /sys and /dev bound into the
# root vanish with it, and no hostname change reaches the host.
exec unshare --mount --uts -- /usr/bin/python3 bench/cloudinit.py \
	--root "$ROOT" --binary "$OUT/bin/cell-cloudinit"
