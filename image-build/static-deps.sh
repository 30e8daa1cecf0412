#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Build the libraries our binaries link, as static musl libraries, from
# Debian's source packages (pinned versions, fetched with `apt-get source`,
# checked against the archive's signatures), with Debian's musl-gcc.
#
#   [ARCH=amd64|arm64] image-build/static-deps.sh [PREFIX]
#
# PREFIX (default $CELL_STATIC_PREFIX, else /var/cache/cell-image/musl for
# amd64 and /var/cache/cell-image/musl-arm64 for arm64) gets include/,
# lib/*.a and lib/pkgconfig/; sources are unpacked in PREFIX.src/. ARCH
# (default: this machine's) is the target: arm64 is cross-built with
# Debian's gcc-aarch64-linux-gnu and musl-dev:arm64 (its
# aarch64-linux-musl-gcc wrapper), the same sources and options.
# Nothing goes into git. Each library is built once: a stamp file holding
# its pinned version skips it on the next run. `make static` links against
# the result (see docs/image-build.md). Features are cut to what we use:
# curl speaks only HTTP and HTTPS over OpenSSL, libarchive reads tar with
# gzip/zstd, OpenSSL has no engines, modules or legacy ciphers.
set -euo pipefail

die() {
	echo "static-deps: $*" >&2
	exit 1
}

ARCH=${ARCH:-$(dpkg --print-architecture)}
# Per target: the compiler, configure's host triplet, OpenSSL's target,
# the kernel's asm headers, binutils (a cross ar/ranlib: the host's does
# not index another machine's objects) and isa-l's arch.
case $ARCH in
amd64 | x86_64)
	ARCH=amd64 CC=musl-gcc HOST=x86_64-linux-musl OSSL_TARGET=linux-x86_64
	ASM=/usr/include/x86_64-linux-gnu/asm TOOL='' ISAL_ARCH=
	DEFAULT_PREFIX=/var/cache/cell-image/musl
	;;
arm64 | aarch64)
	# -mno-outline-atomics: gcc's aarch64 libgcc picks LSE atomics at run
	# time through glibc's __getauxval, which musl lacks; inline ARMv8.0
	# atomics run on every arm64 CPU. In CC, so every build system has it.
	ARCH=arm64 CC="aarch64-linux-musl-gcc -mno-outline-atomics"
	HOST=aarch64-linux-musl
	OSSL_TARGET=linux-aarch64 ASM=/usr/aarch64-linux-gnu/include/asm
	TOOL=aarch64-linux-gnu- ISAL_ARCH=aarch64
	DEFAULT_PREFIX=/var/cache/cell-image/musl-arm64
	;;
*) die "ARCH=$ARCH: amd64 or arm64" ;;
esac
PREFIX=${1:-${CELL_STATIC_PREFIX:-$DEFAULT_PREFIX}}
SRC=$PREFIX.src
JOBS=${JOBS:-2}

# source package, version (as `apt-cache showsrc` prints it)
PINS=(
	"zlib 1:1.2.13.dfsg-1"
	"libzstd 1.5.4+dfsg2-5"
	"openssl 3.0.20-1~deb12u2"
	"curl 7.88.1-10+deb12u15"
	"jansson 2.14-2"
	"libyaml 0.2.5-1"
	"libarchive 3.6.2-1+deb12u5"
	"libisal 2.30.0-5"
	"libcap2 1:2.66-4+deb12u3"
	"libmnl 1.0.4-3"
	"iptables 1.8.9-2"
	"libseccomp 2.5.4-1+deb12u1"
)

command -v "${CC%% *}" >/dev/null || die "${CC%% *} missing: run scripts/deps.sh"
[ -d "$ASM" ] || die "$ASM missing: run scripts/deps.sh"
command -v dpkg-source >/dev/null || die "dpkg-source missing (dpkg-dev)"
mkdir -p "$PREFIX/include" "$PREFIX/lib/pkgconfig" "$SRC"
# The prefix is shared by every checkout on the machine: one build at a
# time (two configures in one source tree delete each other's conftests).
exec 9>"$PREFIX/.lock"
flock 9

# musl ships no kernel headers; borrow Debian's (they are libc-neutral).
for d in linux asm-generic mtd; do
	ln -sfn "/usr/include/$d" "$PREFIX/include/$d"
done
ln -sfn "$ASM" "$PREFIX/include/asm"

export CC
export AR=${TOOL}ar RANLIB=${TOOL}ranlib STRIP=${TOOL}strip
export CFLAGS="-O2 -fPIC -fstack-protector-strong -I$PREFIX/include"
export CPPFLAGS="-I$PREFIX/include"
export LDFLAGS="-L$PREFIX/lib"
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
export PKG_CONFIG_LIBDIR="$PREFIX/lib/pkgconfig"

# Where a source package's files are looked for when the Debian mirror
# answers 404 for one (a partial mirror or proxy): the same pool path under
# each of these, the file checked against the SHA-256 that Debian's signed
# Sources index gives (so any mirror will do: the bytes are Debian's).
# Ubuntu's archive carries the same upstream tarballs under the same names.
SOURCE_MIRRORS=${CELL_SOURCE_MIRRORS-http://archive.ubuntu.com/ubuntu}

# Pins whose Debian patches a static build does without, so that the upstream
# tarball alone (checked as above) may stand in when the Debian part of the
# source package is gone: libmnl's patches are documentation only.
UPSTREAM_OK=" libmnl "

# pinned_gone NAME VERSION WHY: the pinned source cannot be had; say what to
# do (the pins are in PINS at the top of this script).
pinned_gone() {
	local upstream=${2#*:}
	die "$3: the pinned source $1=$2 is gone from this archive." \
		"Pick a version 'apt-cache showsrc $1' lists and change PINS in" \
		"$0 (deb-src entries in /etc/apt/sources.list.d, then" \
		"apt-get update), or set CELL_SOURCE_MIRRORS to a mirror that" \
		"still has it, or unpack upstream's $1-${upstream%-*} into $SRC/"
}

# fetch_file URL FILE SHA256: FILE from URL or from the same pool path on a
# SOURCE_MIRRORS entry, kept only when its SHA-256 matches.
fetch_file() {
	local url=$1 file=$2 sum=$3 pool m
	pool=pool/${url#*/pool/}
	for m in "${url%%/pool/*}" $SOURCE_MIRRORS; do
		if curl -fsL --retry 2 -o "$file.part" "$m/$pool" &&
			echo "$sum  $file.part" | sha256sum -c --status; then
			mv "$file.part" "$file"
			[ "$m" = "${url%%/pool/*}" ] ||
				echo "static-deps: $file from $m (SHA-256 as" \
					"Debian's index)" >&2
			return 0
		fi
	done
	rm -f "$file.part"
	return 1
}

# fetch_pieces NAME VERSION: apt-get source failed (a mirror without some
# of the files): fetch each file apt would, checked, then unpack with
# dpkg-source; with only the upstream tarball, unpack that alone for an
# UPSTREAM_OK pin.
fetch_pieces() {
	local name=$1 version=$2 uris url file sum dsc='' orig='' missing=''
	uris=$(apt-get source -q --print-uris --only-source "$name=$version" \
		2>/dev/null | grep "^'") ||
		pinned_gone "$name" "$version" "apt-cache knows no such source"
	while read -r url file _ sum; do
		url=${url//\'/}
		sum=${sum#SHA256:}
		[ ${#sum} -eq 64 ] || die "no SHA-256 for $file in apt's index"
		if fetch_file "$url" "$file" "$sum"; then
			case $file in
			*.asc) ;;
			*.dsc) dsc=$file ;;
			*.orig.tar.*) orig=$file ;;
			esac
		else
			missing+=" $file"
		fi
	done <<<"$uris"
	if [ -z "$missing" ] && [ -n "$dsc" ]; then
		dpkg-source -q -x "$dsc" >&2 || die "dpkg-source -x $dsc failed"
	elif [ -n "$orig" ] && [[ $UPSTREAM_OK == *" $name "* ]]; then
		echo "static-deps: $name: Debian's part ($missing) is gone;" \
			"building upstream's $orig alone" >&2
		tar -xf "$orig"
	else
		pinned_gone "$name" "$version" "no mirror has$missing"
	fi
}

# fetch NAME VERSION: unpack Debian's source package (patches applied) and
# print its directory.
fetch() {
	local name=$1 version=$2 upstream dir
	upstream=${version#*:}
	upstream=${upstream%-*}
	dir=$(find "$SRC" -maxdepth 1 -type d -name "$name-${upstream%%+*}*" |
		head -n1)
	if [ -z "$dir" ]; then
		(cd "$SRC" && apt-get source -q --only-source "$name=$version" \
			>&2) || (cd "$SRC" && fetch_pieces "$name" "$version") ||
			exit 1
		dir=$(find "$SRC" -maxdepth 1 -type d \
			-name "$name-${upstream%%+*}*" | head -n1)
	fi
	[ -n "$dir" ] || die "no source directory for $name"
	echo "$dir"
}

configure_static() {
	# Some Debian source packages ship no generated configure.
	[ -f configure ] || autoreconf -fi >/dev/null 2>&1
	sh ./configure --host=$HOST --prefix="$PREFIX" --libdir="$PREFIX/lib" \
		--disable-shared --enable-static "$@" >config.out 2>&1 ||
		{ tail -n 30 config.out >&2; die "configure failed in $PWD"; }
}

build_zlib() {
	CFLAGS="$CFLAGS" ./configure --static --prefix="$PREFIX" \
		--libdir="$PREFIX/lib" >/dev/null
	make -j"$JOBS" libz.a >/dev/null
	make install >/dev/null
}

build_libzstd() {
	make -C lib -j"$JOBS" libzstd.a-mt >/dev/null
	make -C lib install-static install-includes install-pc \
		PREFIX="$PREFIX" LIBDIR="$PREFIX/lib" >/dev/null
}

build_openssl() {
	./Configure "$OSSL_TARGET" --prefix="$PREFIX" --libdir=lib \
		--openssldir=/etc/ssl no-shared no-tests no-engine \
		no-module no-legacy no-dso no-async no-comp no-afalgeng no-ktls \
		no-idea no-seed no-camellia no-aria no-sm2 no-sm3 no-sm4 \
		no-whirlpool no-rc2 no-rc4 no-rc5 no-bf no-cast no-mdc2 no-srp \
		no-gost no-dtls no-ssl3 no-cmp no-ts no-capieng \
		-I"$PREFIX/include" >/dev/null
	make -j"$JOBS" build_libs >/dev/null
	make install_dev >/dev/null
}

build_curl() {
	configure_static --with-openssl="$PREFIX" --with-zlib="$PREFIX" \
		--with-ca-bundle=/etc/ssl/certs/ca-certificates.crt \
		--with-ca-path=/etc/ssl/certs \
		--enable-http --disable-ftp --disable-file --disable-ldap \
		--disable-ldaps --disable-rtsp --disable-dict --disable-telnet \
		--disable-tftp --disable-pop3 --disable-imap --disable-smtp \
		--disable-gopher --disable-mqtt --disable-smb --disable-manual \
		--disable-ntlm --disable-alt-svc --disable-docs \
		--without-libpsl --without-brotli --without-zstd \
		--without-nghttp2 --without-libidn2 --without-librtmp \
		--without-libssh2 --without-gssapi
	make -C lib -j"$JOBS" >/dev/null
	make -C lib install >/dev/null
	make -C include install >/dev/null
	make install-pkgconfigDATA >/dev/null
}

build_jansson() {
	configure_static
	make -j"$JOBS" >/dev/null
	make install >/dev/null
}

build_libyaml() {
	build_jansson
}

build_libarchive() {
	# Debian's patches touch configure.ac: regenerate everything with the
	# installed autotools now, or make does half of it (a libtool mismatch).
	autoreconf -fi >/dev/null 2>&1
	configure_static --without-xml2 --without-expat --without-openssl \
		--without-nettle --without-lzma --without-bz2lib --without-lz4 \
		--without-libb2 --without-iconv --without-cng --without-mbedtls \
		--disable-acl --disable-xattr --disable-bsdtar --disable-bsdcpio \
		--disable-bsdcat --with-zlib --with-zstd
	make -j"$JOBS" libarchive.la >/dev/null
	make install-libLTLIBRARIES install-includeHEADERS \
		install-pkgconfigDATA >/dev/null
}

build_libisal() {
	# aarch64's assembly goes through the compiler (AS), which must see
	# the prefix's kernel headers (asm/hwcap.h) too.
	make -f Makefile.unx -j"$JOBS" CC="$CC" AR="$AR" have_threads=n \
		${ISAL_ARCH:+arch=$ISAL_ARCH host_cpu=$ISAL_ARCH} \
		${ISAL_ARCH:+AS="$CC -D__ASSEMBLY__ -I$PREFIX/include"} \
		lib >/dev/null
	mkdir -p "$PREFIX/include/isa-l"
	cp include/*.h "$PREFIX/include/isa-l/"
	cp bin/isa-l.a "$PREFIX/lib/libisal.a"
}

build_libcap2() {
	make -C libcap -j"$JOBS" CC="$CC" AR="$AR" RANLIB="$RANLIB" \
		BUILD_CC=gcc SHARED=no GOLANG=no PAM_CAP=no USE_GPERF=no \
		libcap.a >/dev/null
	install -m 644 libcap/libcap.a "$PREFIX/lib/"
	mkdir -p "$PREFIX/include/sys"
	install -m 644 libcap/include/sys/capability.h "$PREFIX/include/sys/"
}

# libseccomp: the agent builds the units' seccomp filters with it. Its
# build needs gperf (a Debian build dependency of the package).
build_libseccomp() {
	build_jansson
}

build_libmnl() {
	build_jansson
}

build_iptables() {
	# Only libiptc (and the libxtables it needs); no binaries.
	configure_static --disable-nftables --disable-bpf-compiler \
		--disable-nfsynproxy --disable-libipq --disable-devel \
		--enable-libipq=no --with-xtlibdir=/usr/lib/xtables
	make -C libiptc -j"$JOBS" >/dev/null
	install -m 644 libiptc/.libs/libip4tc.a libiptc/.libs/libip6tc.a \
		"$PREFIX/lib/"
	mkdir -p "$PREFIX/include/libiptc"
	cp include/libiptc/*.h "$PREFIX/include/libiptc/"
	cp include/libiptc.h include/libip6tc.h "$PREFIX/include/" 2>/dev/null ||
		true
	for pc in libip4tc libip6tc; do
		sed -e "s|^prefix=.*|prefix=$PREFIX|" \
			-e "s|^libdir=.*|libdir=$PREFIX/lib|" \
			-e "s|^includedir=.*|includedir=$PREFIX/include|" \
			"libiptc/$pc.pc" >"$PREFIX/lib/pkgconfig/$pc.pc"
	done
}

for pin in "${PINS[@]}"; do
	name=${pin%% *}
	version=${pin#* }
	stamp=$PREFIX/.stamp-$name
	if [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
		continue
	fi
	dir=$(fetch "$name" "$version")
	echo "static-deps: $name $version"
	# set -e holds inside the subshell (it would not in an "||" list).
	trap 'echo "static-deps: $name failed" >&2' ERR
	(
		cd "$dir"
		"build_$name"
	)
	echo "$version" >"$stamp"
done
echo "static-deps: all ${#PINS[@]} libraries ($ARCH) in $PREFIX"
