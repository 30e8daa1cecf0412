#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Timed fuzzing: every libFuzzer harness in $OUT/libfuzzer (make fuzz) runs
# for FUZZ_SECONDS, seeded with its corpus in tests/fuzz/corpus/<name>
# (read only: new inputs go to $OUT/fuzz-work/<name>), as many at once as
# there are CPUs. A crash, leak, hang (-timeout) or memory blow-up fails
# the run; the input that did it is kept in $OUT/fuzz-crashes/<name>/ and
# the line to replay it is printed. Ends with "N passed, N failed".
#
#   FUZZ_SECONDS=30     per harness (make fuzz-run; CI uses fewer)
#   FUZZ_HARNESSES="fuzz-auth fuzz-ref"   a subset
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
jobs=$(nproc)
passed=0
failed=0
failures=()

harnesses=()
for h in "$OUT"/libfuzzer/fuzz-*; do
	[ -x "$h" ] || continue
	name=$(basename "$h")
	if [ -n "${FUZZ_HARNESSES:-}" ] && [[ " $FUZZ_HARNESSES " != *" $name "* ]]; then
		continue
	fi
	harnesses+=("$name")
done
if [ ${#harnesses[@]} -eq 0 ]; then
	echo "fuzz-run: no harnesses in $OUT/libfuzzer (make fuzz)"
	echo "0 passed, 1 failed"
	exit 1
fi

# One harness: its log in $OUT/fuzz-work/<name>.log, its status in .rc.
run_one() {
	local name=$1 work=$OUT/fuzz-work/$1 crashes=$OUT/fuzz-crashes/$1
	rm -rf "$work" "$crashes"
	mkdir -p "$work" "$crashes"
	"$OUT/libfuzzer/$name" -max_total_time="$FUZZ_SECONDS" -timeout=25 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$crashes/" "$work" "tests/fuzz/corpus/${name#fuzz-}" \
		>"$work.log" 2>&1
	echo $? >"$work.rc"
}

mkdir -p "$OUT/fuzz-work"
running=0
for name in "${harnesses[@]}"; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	run_one "$name" &
	running=$((running + 1))
done
wait

for name in "${harnesses[@]}"; do
	log=$OUT/fuzz-work/$name.log
	rc=$(cat "$OUT/fuzz-work/$name.rc" 2>/dev/null || echo 1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	mapfile -t found < <(find "$OUT/fuzz-crashes/$name" -type f)
	if [ "$rc" -eq 0 ] && [ ${#found[@]} -eq 0 ]; then
		passed=$((passed + 1))
		echo "fuzz-run $name: ok, ${execs:-?} inputs in ${FUZZ_SECONDS} s"
	else
		failed=$((failed + 1))
		failures+=("$name")
		grep -E -A30 '^==[0-9]+==|^SUMMARY|ERROR: libFuzzer' "$log" | head -60
		for f in "${found[@]}"; do
			echo "fuzz-run $name: kept $f (replay: $OUT/libfuzzer/$name $f)"
		done
		echo "fuzz-run $name: FAILED (exit $rc; log $log)"
	fi
done
if [ ${#failures[@]} -ne 0 ]; then
	echo "failing: ${failures[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
