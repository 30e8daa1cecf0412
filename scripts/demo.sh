#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The main job on built-in defaults, no internet needed: install what is
# needed, build, then run a local cell: two network namespaces joined by a
# veth (the controller side with a throwaway docker-registry holding an
# image made from busybox-static; the cell with cell-agent at its own
# address), certificates from `cellctl pki`, `cellctl run
# examples/hello.yaml`, then its status, logs and an exec. Run as root on
# Debian 12.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
make -j"$(nproc)"
exec /usr/bin/python3 scripts/demo.py "$@"
