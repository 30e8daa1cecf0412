#!/bin/bash
# The main job on built-in defaults, no internet needed: install what is
# needed, build, start a throwaway local registry (Debian's docker-registry
# on 127.0.0.1), push a small image made from busybox-static, pull it with
# cell-pull into a flattened rootfs and an overlay mount, then run a local
# cell (cell-agent with throwaway PKI) with a sample pod: status, logs,
# exec. Run as root on Debian 12.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
make -j"$(nproc)"
exec /usr/bin/python3 scripts/demo.py "$@"
