#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite, from a fresh Debian 12 machine: installs what it
# needs, checks style, builds, runs the suite (unit, fuzz-corpus replay,
# integration against real parts), each fuzz harness under libFuzzer for
# FUZZ_SECONDS, then the same suite built with ASan+UBSan. Ends with one
# line "N passed, N failed" summing all runs.
#
#   SKIP_ASAN=1   skip the sanitizer run (quicker local iterations)
#   SKIP_FUZZ=1   skip the timed fuzzing
#   FUZZ_SECONDS  per harness (5; `make fuzz-run` defaults to 30)
#   SKIP_IMAGE=1  skip `make image-test` (the static binaries, kube-router's
#                 checked download, the lean, Debian and custom images
#                 built and booted under qemu: minutes, more on a fresh
#                 machine that builds the static libraries and images)
set -u
cd "$(dirname "$0")/.." || exit 1
scripts/deps.sh || { echo "0 passed, 1 failed"; exit 1; }
jobs=$(nproc)
total_p=0
total_f=0

summary() { # parse the runner's last line
	local line
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -1)
	if [ -z "$line" ]; then
		total_f=$((total_f + 1))
		return
	fi
	total_p=$((total_p + $(echo "$line" | cut -d' ' -f1)))
	total_f=$((total_f + $(echo "$line" | cut -d' ' -f3)))
}

if scripts/lint.sh; then total_p=$((total_p + 1)); else total_f=$((total_f + 1)); fi

mkdir -p build build-asan
echo "== suite (release build)"
if make -j"$jobs" tests >build/make.log 2>&1; then
	OUT=build tests/run.sh 2>&1 | tee build/check.log
	summary build/check.log
else
	tail -40 build/make.log
	total_f=$((total_f + 1))
fi

# Each libFuzzer harness for a bounded time (a clang build of its own);
# FUZZ_SECONDS per harness keeps CI within its 30 minutes.
if [ "${SKIP_FUZZ:-0}" != 1 ]; then
	echo "== timed fuzzing (libFuzzer, ${FUZZ_SECONDS:-5} s per harness)"
	mkdir -p build-fuzz
	if make -j"$jobs" fuzz >build-fuzz/make.log 2>&1; then
		OUT=build-fuzz FUZZ_SECONDS=${FUZZ_SECONDS:-5} scripts/fuzz-run.sh 2>&1 |
			tee build-fuzz/fuzz.log
		summary build-fuzz/fuzz.log
	else
		tail -40 build-fuzz/make.log
		total_f=$((total_f + 1))
	fi
fi

if [ "${SKIP_ASAN:-0}" != 1 ]; then
	echo "== suite (ASan+UBSan build)"
	san="-fsanitize=address,undefined -fno-sanitize-recover=all"
	if make -j"$jobs" OUT=build-asan CFLAGS="-O1 -g -fno-omit-frame-pointer" \
		SAN="$san" tests >build-asan/make.log 2>&1; then
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
			UBSAN_OPTIONS=print_stacktrace=1 \
			OUT=build-asan tests/run.sh 2>&1 | tee build-asan/check.log
		summary build-asan/check.log
	else
		tail -40 build-asan/make.log
		total_f=$((total_f + 1))
	fi
fi

# The images, last: a broken image shows the day it breaks. Its TIME and
# SIZE lines are in build/image-test.log.
if [ "${SKIP_IMAGE:-0}" != 1 ]; then
	echo "== images (make image-test)"
	mkdir -p build
	make image-test >build/image-test.log 2>&1
	rc=$?
	grep -E '^(TIME|SIZE|RATIO) |passed|failed|error' build/image-test.log
	if [ $rc -eq 0 ]; then
		total_p=$((total_p + 1))
	else
		tail -40 build/image-test.log
		total_f=$((total_f + 1))
	fi
fi

echo "$total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
