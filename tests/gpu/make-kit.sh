#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build $OUT/gpu-kit for tests/gpu/run-gpu-check.sh: cell-monitor and
# cdi-runjson with every shared library they load (the glibc loader
# included, so they run on a machine with another libc or none of our
# deps), and a static busybox for the unit's rootfs. `make gpu-kit` calls
# this; carry build/gpu-kit to the GPU machine.
set -eu
OUT=${OUT:-build}
KIT=$OUT/gpu-kit
rm -rf "$KIT"
mkdir -p "$KIT/bin" "$KIT/lib"
cp "$OUT/bin/cell-monitor" "$OUT/gpu/cdi-runjson" "$KIT/bin/"
for b in "$KIT"/bin/*; do
	ldd "$b" | awk '/=> \//{print $3} /^\t\//{print $1}'
done | sort -u | while read -r lib; do
	cp -L "$lib" "$KIT/lib/"
done
BUSYBOX=${BUSYBOX:-$(command -v busybox || true)}
if [ -n "$BUSYBOX" ] && file -L "$BUSYBOX" | grep -q 'statically linked'; then
	cp -L "$BUSYBOX" "$KIT/busybox"
else
	echo "make-kit: no static busybox (apt-get install busybox-static);" \
		"the check will use the GPU machine's own" >&2
fi
ls -la "$KIT" "$KIT/bin" "$KIT/lib"
du -sh "$KIT"
