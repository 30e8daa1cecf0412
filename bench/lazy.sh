#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Lazy pulling (eStargz, ctr-remote's) against the full pull, through the
# agent, behind a 25 MB/s proxy: dispatch -> a pod's first log line, ->
# every file of the image read, bytes before the first line (see
# bench/lazy.py). Run as root on Debian 12.
#   BENCH_MB=300 BENCH_RATE_MBS=25 BENCH_REPS=3 bench/lazy.sh
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh >/dev/null
make -j"$(nproc)" all >/dev/null
BENCH_DEBIAN_ROOT=$(scripts/canonical-root.sh)
export BENCH_DEBIAN_ROOT
exec /usr/bin/python3 bench/lazy.py
