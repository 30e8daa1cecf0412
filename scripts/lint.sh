#!/bin/bash
# make lint: formatting (clang-format, .clang-format in the tree) and the
# banned-function list (unsafe or unbounded C library calls).
set -u
cd "$(dirname "$0")/.."
rc=0
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*')
if ! clang-format --dry-run --Werror $files; then
	echo "lint: clang-format differences (run: clang-format -i <file>)"
	rc=1
fi
banned='\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|gets|system|popen)[[:space:]]*\('
if grep -nE "$banned" $files | grep -v 'lint: allow'; then
	echo "lint: banned functions above (use snprintf, memcpy with a bound, strtok_r, parse_int64, fork/exec)"
	rc=1
fi
if ! shellcheck -x image-build/*.sh; then
	echo "lint: shellcheck findings in image-build/"
	rc=1
fi
[ $rc -eq 0 ] && echo "lint: ok"
exit $rc
