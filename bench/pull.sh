#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Benchmark cell-pull side by side with skopeo+umoci and tar -xzf; prints
# medians and ratios (see bench/pull.py). Run as root on Debian 12.
#   BENCH_MB=300 BENCH_LAYERS=5 BENCH_REPS=3 bench/pull.sh
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh >/dev/null
make -j"$(nproc)" >/dev/null
exec /usr/bin/python3 bench/pull.py
