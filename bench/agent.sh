#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Benchmark cell-agent (see bench/agent.py): time to a running unit against
# runc, status requests/s over mutual TLS, idle RSS. Run as root on Debian 12.
#   BENCH_REPS=10 bench/agent.sh
#   BENCH_ONLY=metrics bench/agent.sh   (only the metrics scrape cost)
#   BENCH_ONLY=start bench/agent.sh     (only the start time, every pair)
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh >/dev/null
make -j"$(nproc)" >/dev/null
mkdir -p build/bench
cc -O2 -Wall -Wextra -o build/bench/statusload bench/statusload.c -lssl -lcrypto
exec /usr/bin/python3 bench/agent.py
