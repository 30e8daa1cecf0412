#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Benchmark cell-cloudinit side by side with Debian's cloud-init 22.4: both
# apply the same document (10 write_files and one runcmd) from a NoCloud seed
# to the same Debian root (scripts/canonical-root.sh, cached), each on a fresh
# overlay in private namespaces, with the written layer on ext4 and on tmpfs.
# Prints medians, the ratio (target <= 0.05) and both peak RSS. Run as root
# on Debian 12; see bench/cloudinit.py.
#   BENCH_REPS=7 bench/cloudinit.sh
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "cloudinit.sh: run as root (mmdebstrap, overlayfs, namespaces)" >&2
	exit 1
fi
OUT=${OUT:-build}
ROOT=$(scripts/canonical-root.sh)
make -j"$(nproc)" "$OUT/bin/cell-cloudinit" >/dev/null
exec /usr/bin/python3 bench/cloudinit.py "$ROOT" "$OUT/bin/cell-cloudinit"
