#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Benchmark cell-net's pod network setup and teardown side by side with the
# CNI plugins from Debian's containernetworking-plugins (ptp + portmap, run
# through the CNI protocol with the same pod IP and one hostPort). Both run
# in a throwaway "cell" network namespace with a primary interface and a
# default route; the host's own network is not touched. Prints medians and
# the ratios (target for setup <= 0.2). Run as root; see bench/net.py.
#   BENCH_REPS=15 bench/net.sh
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "net.sh: run as root (network namespaces)" >&2
	exit 1
fi
OUT=${OUT:-build}
if [ ! -x /usr/lib/cni/ptp ] || [ ! -x /usr/lib/cni/portmap ]; then
	echo "net.sh: installing containernetworking-plugins" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		containernetworking-plugins >&2
fi
make -j"$(nproc)" "$OUT/bin/cell-net" >/dev/null
TAG=bench$$
CELL=wtnet-$TAG-cell
VPC=wtnet-$TAG-vpc
STATE=$(mktemp -d /tmp/wtnet-bench.XXXXXX)
cleanup() {
	for n in "$CELL" "$VPC" "wtnet-$TAG-cn" "wtnet-$TAG-cni"; do
		ip netns del "$n" 2>/dev/null || true
	done
	rm -rf "$STATE"
}
trap cleanup EXIT
ip netns add "$CELL"
ip netns add "$VPC"
ip -n "$VPC" link add tocell type veth peer name eth0 netns "$CELL"
ip -n "$VPC" link set tocell up
ip -n "$VPC" addr add 10.99.0.1/24 dev tocell
ip -n "$CELL" link set lo up
ip -n "$CELL" link set eth0 up
ip -n "$CELL" addr add 10.99.0.10/24 dev eth0
ip -n "$CELL" route add default via 10.99.0.1
# nsenter --net only: the namespaces both tools make are bind mounts that
# must land in this mount namespace.
nsenter --net="/var/run/netns/$CELL" -- /usr/bin/python3 bench/net.py \
	--binary "$OUT/bin/cell-net" --tag "$TAG" --state "$STATE"
