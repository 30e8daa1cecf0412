#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# make lint: formatting (clang-format, .clang-format in the tree), the
# banned-function list (unsafe or unbounded C library calls), the layering
# and ring checks, shellcheck, the SPDX lines.
set -u
cd "$(dirname "$0")/.." || exit 1
rc=0
tracked() {
	git ls-files 2>/dev/null ||
		find . -type f -not -path './build*' -not -path './.deps/*' \
			-not -path './.git/*' | sed 's|^\./||'
}
mapfile -t files < <(tracked | grep -E '\.[ch]$')
if ! clang-format --dry-run --Werror "${files[@]}"; then
	echo "lint: clang-format differences (run: clang-format -i <file>)"
	rc=1
fi
banned='\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|gets|system|popen)[[:space:]]*\('
if grep -nE "$banned" "${files[@]}" | grep -v 'lint: allow'; then
	echo "lint: banned functions above (use snprintf, memcpy with a bound, strtok_r, parse_int64, fork/exec)"
	rc=1
fi
# Layering (the Makefile's PUB_ and USES_ lists enforce the graph at build
# time, between components and between the agent's rooms; this names the
# plainest breaches): a file includes no other folder's -internal.h, and
# no header by a path (which would step around the include path). Tests
# may.
while read -r f; do
	dir=${f%/*}
	while read -r h; do
		[ -e "$dir/$h" ] && continue
		echo "$f: includes $h, another component's (or room's) internals"
		rc=1
	done < <(sed -n 's/^#include "\([^"]*-internal\.h\)".*/\1/p' "$f")
	if grep -n '^#include "[^"]*/' "$f"; then
		echo "$f: includes a header by its path (the Makefile's layering)"
		rc=1
	fi
done < <(printf '%s\n' "${files[@]}" | grep -v '^tests/')
# No ring of files (scripts/rings.py over the product archives' symbols,
# with nm): they are built first, into $OUT (build).
out=${OUT:-build}
mkdir -p "$out"
if ! make -j"$(nproc)" OUT="$out" libs >"$out/lint-make.log" 2>&1; then
	tail -20 "$out/lint-make.log"
	echo "lint: the archives did not build (the ring check needs them)"
	rc=1
elif ! /usr/bin/python3 scripts/rings.py "$out"; then
	rc=1
fi
# Every shell script in the tree, found by name (*.sh) or by its #! line;
# fuzz corpora are inputs, not our scripts. OpenRC service files are sh
# whose variables openrc-run reads (hence SC2034 off for them).
scripts=()
openrc=()
while read -r f; do
	case $(head -n1 "$f" 2>/dev/null | tr -d '\0') in
	'#!/sbin/openrc-run'*) openrc+=("$f") ;;
	'#!'*sh | '#!'*sh' '* | '#!'*'env bash'*) scripts+=("$f") ;;
	*) [[ $f == *.sh ]] && scripts+=("$f") ;;
	esac
done < <(tracked | grep -v '^tests/fuzz/corpus/')
if ! shellcheck -x "${scripts[@]}" ||
	! shellcheck -s sh -e SC2034 "${openrc[@]}"; then
	echo "lint: shellcheck findings above"
	rc=1
fi
# The licence (LICENSE, Apache-2.0): every source file names it in an SPDX
# line at its top (the second line under a #! line).
spdx='SPDX-License-Identifier: Apache-2.0'
missing=()
while read -r f; do
	case $f in
	*.c | *.h | *.py | *.sh | Makefile | */Makefile) ;;
	*) [[ $(head -c2 "$f" 2>/dev/null) == '#!' ]] || continue ;;
	esac
	head -n2 "$f" | grep -q "$spdx" || missing+=("$f")
done < <(tracked | grep -v '^tests/fuzz/corpus/')
if [ ${#missing[@]} -gt 0 ]; then
	printf '%s\n' "${missing[@]}"
	echo "lint: no '$spdx' line at the top of the files above"
	rc=1
fi
[ $rc -eq 0 ] && echo "lint: ok (${#scripts[@]} shell scripts, ${#openrc[@]} OpenRC scripts)"
exit $rc
