#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The suite runner behind `make check`: C unit tests (TAP), fuzz-corpus
# replay, then the integration tests (pytest, as root, against real parts).
# Ends with one line "N passed, N failed". A skipped test counts as failed:
# a test that cannot run must say so loudly, not hide.
#
#   SUITES="unit fuzz integration"   which parts to run (default: all)
#   PYTEST_ARGS="-k mount"           extra pytest arguments
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-build}
SUITES=${SUITES:-unit fuzz integration}
export CELL_BUILD=$PWD/$OUT
passed=0
failed=0
failures=()

run_tap() {
	local t=$1 log
	log=$(mktemp)
	"$t" >"$log" 2>&1
	local rc=$?
	local p f
	p=$(grep -c '^ok ' "$log")
	f=$(grep -c '^not ok ' "$log")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed or exited early without a failing line
	fi
	if [ "$f" -ne 0 ]; then
		cat "$log"
		failures+=("$(basename "$t")")
	fi
	echo "unit $(basename "$t"): $p passed, $f failed"
	passed=$((passed + p))
	failed=$((failed + f))
	rm -f "$log"
}

for s in $SUITES; do
	case $s in
	unit)
		for t in "$OUT"/tests/test-*; do
			[ -x "$t" ] && run_tap "$t"
		done
		;;
	fuzz)
		for h in "$OUT"/fuzz/fuzz-*; do
			[ -x "$h" ] || continue
			name=$(basename "$h")
			corpus=tests/fuzz/corpus/${name#fuzz-}
			if out=$("$h" "$corpus" 2>&1); then
				passed=$((passed + 1))
				echo "fuzz $name: $out"
			else
				failed=$((failed + 1))
				failures+=("$name")
				echo "$out" | tail -30
				echo "fuzz $name: FAILED"
			fi
		done
		;;
	integration)
		if [ "$(id -u)" -ne 0 ]; then
			echo "integration tests need root" >&2
			failed=$((failed + 1))
			failures+=("integration (not root)")
			continue
		fi
		junit=$OUT/junit.xml
		rm -f "$junit"
		# shellcheck disable=SC2086
		/usr/bin/python3 -m pytest tests/integration -q -rfEs \
			-p no:cacheprovider --junitxml="$junit" ${PYTEST_ARGS:-}
		if [ -f "$junit" ]; then
			read -r t f er sk < <(/usr/bin/python3 - "$junit" <<'PY'
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
suites = [r] if r.tag == "testsuite" else r.findall("testsuite")
tot = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
print(tot["tests"], tot["failures"], tot["errors"], tot["skipped"])
PY
)
			bad=$((f + er + sk))
			passed=$((passed + t - bad))
			failed=$((failed + bad))
			[ "$bad" -ne 0 ] && failures+=("integration: $bad")
			[ "$t" -eq 0 ] && { failed=$((failed + 1)); failures+=("integration: no tests ran"); }
		else
			failed=$((failed + 1))
			failures+=("integration: pytest did not run")
		fi
		;;
	esac
done

if [ ${#failures[@]} -ne 0 ]; then
	echo "failing: ${failures[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
