#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# make tsan: the agent's threaded integration tests against a
# ThreadSanitizer build ($OUT, build-tsan; `make tsan` builds it first).
# Every instrumented process (cell-agent and its helpers) writes its reports
# to $OUT/tsan/report.<pid>; any report fails the run, whatever the tests
# said. tests/tsan.supp holds the races that are civetweb's own, each with
# its reason.
#
#   TSAN_TESTS="test_agent_api.py ..."   which files of tests/integration
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-build-tsan}
TSAN_TESTS=${TSAN_TESTS:-test_agent_api.py test_agent_exec.py test_agent_logs.py test_agent_flood.py}
reports=$PWD/$OUT/tsan
rm -rf "$reports"
mkdir -p "$reports"
# exitcode=0: a process with a race still exits as it would (the tests
# check exit codes); the reports decide. history_size: the other thread's
# stack in a report.
export TSAN_OPTIONS="log_path=$reports/report suppressions=$PWD/tests/tsan.supp exitcode=0 history_size=4 second_deadlock_stack=1"
export CELL_BUILD=$PWD/$OUT
tests=()
for t in $TSAN_TESTS; do
	tests+=("tests/integration/$t")
done
/usr/bin/python3 -m pytest -q -rfEs -p no:cacheprovider "${tests[@]}"
rc=$?
mapfile -t found < <(find "$reports" -type f -name 'report*')
if [ ${#found[@]} -ne 0 ]; then
	cat "${found[@]}"
	echo "tsan: ${#found[@]} process(es) reported (above; files in $reports)"
	rc=1
fi
[ $rc -eq 0 ] && echo "tsan: no reports (${TSAN_TESTS})"
exit $rc
