#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Lazy pulling (eStargz) against the full pull through a 25 MB/s proxy:
# time to the first read, bytes before it, time to read every file (see
# bench/lazy.py). Run as root on Debian 12.
#   BENCH_MB=300 BENCH_BASE_MB=40 BENCH_RATE_MBS=25 bench/lazy.sh
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh >/dev/null
make -j"$(nproc)" >/dev/null
exec /usr/bin/python3 bench/lazy.py
