#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Benchmark dispatch to a fleet (see bench/fleet.py): 10 cell-agents in
# their own network namespaces; the time from the first `cellctl run` to
# all pods running, and the controller-side CPU per pod, side by side with
# the same dispatch done by tests/pylib/wire.py (Python requests, one thread
# per cell, as a script would do it). Run as root on Debian 12.
#   FLEET_CELLS=10 BENCH_REPS=3 bench/fleet.sh
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh >/dev/null
make -j"$(nproc)" >/dev/null
exec /usr/bin/python3 bench/fleet.py
