# SPDX-License-Identifier: Apache-2.0
# cell: the on-instance runtime of a Kip cell. See HACKING.md.
#
#   make            build every binary into $(OUT)/bin
#   make check      build and run the whole suite (unit, fuzz replay,
#                   integration); ends with "N passed, N failed"
#   make asan       the same suite under ASan+UBSan (OUT=build-asan)
#   make tsan       the agent's threaded tests under TSan (OUT=build-tsan)
#   make lint       clang-format check and the banned-function check, the
#                   layering and ring checks (builds the archives first)
#   make fuzz       libFuzzer builds of every harness (clang)
#   make fuzz-run   each harness under libFuzzer for FUZZ_SECONDS (30)

VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
OUT ?= build
CC ?= cc
PKGS := libcurl jansson libarchive openssl libzstd yaml-0.1 zlib libseccomp
PKG_CONFIG := pkg-config
# STATIC=1 (set by `make static`): musl, every library linked statically
# from STATIC_PREFIX (image-build/static-deps.sh), libcurl linked into
# cell-cloudinit rather than loaded (-DCELL_STATIC).
STATIC ?=
# ARCH: the target, Debian's name (amd64, arm64; x86_64 and aarch64 are
# taken too), default this machine's. Another machine's is a cross build,
# static only: `make static ARCH=arm64` (Debian's gcc-aarch64-linux-gnu
# with musl-dev:arm64's aarch64-linux-musl-gcc) into build-static-arm64/.
HOST_ARCH := $(shell dpkg --print-architecture 2>/dev/null || uname -m)
# Only from the command line: an ARCH exported for other builds (a kernel
# tree's) must not turn this one into a cross build.
ifneq ($(filter environment environment\ override,$(origin ARCH)),)
ARCH := $(HOST_ARCH)
endif
ARCH ?= $(HOST_ARCH)
override ARCH := $(patsubst x86_64,amd64,$(patsubst aarch64,arm64,$(ARCH)))
override HOST_ARCH := $(patsubst x86_64,amd64,$(patsubst aarch64,arm64,$(HOST_ARCH)))
# The kernel's name for it (`uname -m` on such a machine): release tarballs
# are named by it, so that a cell's `$(uname -m)` picks its own.
MACHINE_amd64 := x86_64
MACHINE_arm64 := aarch64
MACHINE := $(MACHINE_$(ARCH))
MUSL_CC_amd64 := musl-gcc
# -mno-outline-atomics: see image-build/static-deps.sh (no __getauxval).
MUSL_CC_arm64 := aarch64-linux-musl-gcc -mno-outline-atomics
# binutils for the target (the host's ar cannot index an aarch64 object).
TOOL_PREFIX := $(if $(filter $(HOST_ARCH),$(ARCH)),,$(MACHINE)-linux-gnu-)
ifeq ($(MACHINE),)
$(error ARCH=$(ARCH): amd64 or arm64)
endif
AR := $(TOOL_PREFIX)ar
STRIP_PROG := $(TOOL_PREFIX)strip
# Static builds of another architecture keep apart from this one's.
STATIC_SUFFIX := $(if $(filter amd64,$(ARCH)),,-$(ARCH))
STATIC_PREFIX ?= /var/cache/cell-image/musl$(STATIC_SUFFIX)
ifneq ($(ARCH),$(HOST_ARCH))
ifneq ($(STATIC),1)
ifeq ($(filter static clean lint,$(MAKECMDGOALS)),)
$(error ARCH=$(ARCH) is a cross build: static only (make static ARCH=$(ARCH); make release STATIC=1 ARCH=$(ARCH)))
endif
endif
endif
ifeq ($(STATIC),1)
PKG_CONFIG := PKG_CONFIG_LIBDIR=$(STATIC_PREFIX)/lib/pkgconfig pkg-config --static
# So that `make install STATIC=1` and `make release STATIC=1` use (and
# never rebuild with another compiler) what `make static` built.
ifeq ($(origin CC),default)
CC := $(MUSL_CC_$(ARCH))
endif
ifeq ($(origin OUT),file)
OUT := build-static$(STATIC_SUFFIX)
endif
endif
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -lisal \
	-lcap -lpthread $(shell $(PKG_CONFIG) --libs libmnl libip4tc libip6tc 2>/dev/null)
# civetweb from Debian's source package, unpacked and patched by
# scripts/deps.sh in .deps/ (nothing of it in git), built here against
# OpenSSL 3 (linked, not dlopened) with our worker stack size and thread cap.
CIVETWEB := .deps/civetweb
CIVETWEB_DEFS := -DOPENSSL_API_3_0 -DNO_SSL_DL -DUSE_WEBSOCKET -DUSE_IPV6 \
	-DNO_CGI -DNO_FILES -DNO_CACHING -DUSE_STACK_SIZE=262144 \
	-DMAX_WORKER_THREADS=128 \
	-DSTOP_FLAG_NEEDS_LOCK \
	-DSOCKET_TIMEOUT_QUANTUM=100
# STOP_FLAG_NEEDS_LOCK: mg_stop's flag, read by every worker, atomic.
# SOCKET_TIMEOUT_QUANTUM: civetweb's polls look at that flag once a quantum
# (2000 ms by default); its master thread polls nothing here (the TLS gate
# listens), so each SIGTERM stop and SIGHUP re-exec waited 2 s in mg_stop:
# 100 ms, for 10 empty polls a second in one idle thread.

WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wwrite-strings \
	-Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter -Wno-format-truncation \
	-Werror=implicit-function-declaration -Werror=vla \
	-Werror=return-type -Werror=incompatible-pointer-types
CFLAGS ?= -O2 -g
SAN ?=
HARDEN := -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=3 -fstack-protector-strong
ALL_CFLAGS = -std=gnu11 $(WARN) $(CFLAGS) $(SAN) -D_GNU_SOURCE \
	-DCELL_VERSION='"$(VERSION)"' $(COMP_INC) $(PKG_CFLAGS) \
	-fno-strict-aliasing $(HARDEN) -MMD -MP
# --as-needed: each binary loads only the libraries it calls (cell-agent and
# cell-monitor never map libcurl or libarchive; see agent/base/pullproc.h).
ALL_LDFLAGS := $(LDFLAGS) $(SAN) -Wl,--as-needed
ifneq ($(STATIC),1)
# RELR (glibc 2.36, binutils 2.38): the PIE's relative relocations packed
# into a bitmap. cell-agent's .rela.dyn went from 466 KiB, all read at
# start and kept resident, to 7 KiB: 0.45 MiB of every agent's and every
# monitor's RSS (issue 28). musl's static build has no relocations.
ALL_LDFLAGS += -Wl,-z,pack-relative-relocs
endif
ifeq ($(STATIC),1)
# -isystem: the prefix links Debian's kernel headers, whose few macros that
# musl's headers also define (NGROUPS_MAX) must not warn.
# Sections per function and --gc-sections: a helper carries only the code
# it reaches, not every object its library archive pulls in.
ALL_CFLAGS += -DCELL_STATIC -isystem $(STATIC_PREFIX)/include \
	-ffunction-sections -fdata-sections
ALL_LDFLAGS += -static -L$(STATIC_PREFIX)/lib -Wl,--gc-sections
endif

# Each component is a library plus a thin main.c.
COMMON_SRC := $(wildcard common/*.c)
PULL_SRC := $(filter-out imagepull/main.c imagepull/cached-main.c,\
	$(wildcard imagepull/*.c))
CINIT_SRC := $(filter-out cloudinit/main.c,$(wildcard cloudinit/*.c))
NET_SRC := $(filter-out netsetup/main.c,$(wildcard netsetup/*.c))
BOOT_SRC := $(filter-out boot/main.c,$(wildcard boot/*.c))
CTL_SRC := $(filter-out controller/main.c,$(wildcard controller/*.c))
# The agent's rooms (HACKING.md "Layering"); its mains sit above them.
AGENT_ROOMS := agent/pod agent/base agent/api agent/sup
AGENT_SRC := $(foreach r,$(AGENT_ROOMS),$(wildcard $(r)/*.c))
RUNTIME_SRC := $(filter-out runtime/main.c,$(wildcard runtime/*.c))

# ---- Layering (HACKING.md "Layering"): which component may use which ----
# A component sees common/, its own folder (a quoted include looks beside
# the file first) and the public headers of the components it may use,
# which $(OUT)/include/<component>/ holds (links to the headers listed
# here, nothing else); each binary links only those archives. So an
# include of another component's -internal.h, or of a component not
# allowed, fails to compile, and a call across the graph fails to link.
PUB_imagepull := imagepull/pull.h imagepull/unpack.h
PUB_runtime := runtime/runtime.h runtime/sysctl.h runtime/seccomp-profile.h
PUB_netsetup := netsetup/netsetup.h
PUB_cloudinit := cloudinit/cloudinit.h
# Inside the agent each room is layered the same way: pod/ (the spec, the
# pod's pure decisions and setups), base/ (what both sides stand on), then
# api/ and sup/, which see each other not at all: the API reaches the
# supervisor through api.h's struct api_backend, which main.c fills with
# supervisor.h's calls. Only the mains see supervisor.h and api.h.
PUB_agent/pod := $(filter-out %-internal.h,$(wildcard agent/pod/*.h))
PUB_agent/base := $(filter-out %-internal.h,$(wildcard agent/base/*.h))
PUB_agent/api := agent/api/api.h
PUB_agent/sup := agent/sup/supervisor.h
USES_agent/pod := runtime imagepull
USES_agent/base := agent/pod
USES_agent/api := agent/base agent/pod runtime
USES_agent/sup := agent/base agent/pod runtime netsetup imagepull
USES_agent := agent/api agent/sup agent/base agent/pod runtime netsetup \
	imagepull
USES_boot := cloudinit
USES_netsetup := cloudinit
USES_cloudinit :=
USES_imagepull :=
USES_runtime :=
USES_controller :=
USES_common :=
PUB_HDRS := $(addprefix $(OUT)/include/,$(foreach c,imagepull runtime \
	netsetup cloudinit $(AGENT_ROOMS),$(PUB_$(c))))
uses_inc = -Icommon $(foreach u,$(USES_$(1)),-I$(OUT)/include/$(u))
INC_agent/api := -I$(CIVETWEB)/include # the agent alone serves HTTP
# (a room's pattern is longer than agent/%, and so wins for its objects)
$(foreach c,agent $(AGENT_ROOMS) boot netsetup cloudinit imagepull runtime \
	controller common,$(eval $(OUT)/obj/$(c)/%.o: COMP_INC = $(call uses_inc,$(c)) \
	$(INC_$(c))))
# Tests and fuzz harnesses reach into every component's internals.
$(OUT)/obj/tests/%.o: COMP_INC = -Icommon -Iimagepull -Icloudinit \
	$(addprefix -I,$(AGENT_ROOMS)) \
	-Iruntime -Inetsetup -Iboot -Icontroller -I$(CIVETWEB)/include

.SECONDARY: $(PUB_HDRS)
$(OUT)/include/%.h: %.h
	@mkdir -p $(dir $@)
	$(Q)ln -sfr $< $@

COMMON_LIB := $(OUT)/lib/libcommon.a
PULL_LIB := $(OUT)/lib/libimagepull.a
CINIT_LIB := $(OUT)/lib/libcloudinit.a
BOOT_LIB := $(OUT)/lib/libboot.a
AGENT_LIB := $(OUT)/lib/libagent.a
RUNTIME_LIB := $(OUT)/lib/libruntime.a
NET_LIB := $(OUT)/lib/libnetsetup.a
CTL_LIB := $(OUT)/lib/libcellctl.a
CIVETWEB_LIB := $(OUT)/lib/libcivetweb.a
# Each binary's archives, users before what they use.
LIBS_agent := $(AGENT_LIB) $(RUNTIME_LIB) $(NET_LIB) $(PULL_LIB) \
	$(CIVETWEB_LIB) $(COMMON_LIB)
LIBS_boot := $(BOOT_LIB) $(CINIT_LIB) $(COMMON_LIB)
LIBS_netsetup := $(NET_LIB) $(CINIT_LIB) $(COMMON_LIB)
LIBS_cloudinit := $(CINIT_LIB) $(COMMON_LIB)
LIBS_imagepull := $(PULL_LIB) $(COMMON_LIB)
LIBS_runtime := $(RUNTIME_LIB) $(COMMON_LIB)
LIBS_controller := $(CTL_LIB) $(COMMON_LIB)
# Tests link everything.
LIBS := $(CTL_LIB) $(AGENT_LIB) $(RUNTIME_LIB) $(CIVETWEB_LIB) $(BOOT_LIB) $(PULL_LIB) $(NET_LIB) \
	$(CINIT_LIB) $(COMMON_LIB)

BINS := $(OUT)/bin/cell-pull $(OUT)/bin/cell-pull-cached
BINS += $(if $(wildcard cloudinit/main.c),$(OUT)/bin/cell-cloudinit)
BINS += $(if $(wildcard netsetup/main.c),$(OUT)/bin/cell-net)
BINS += $(if $(wildcard agent/main.c),$(OUT)/bin/cell-agent)
BINS += $(if $(wildcard boot/main.c),$(OUT)/bin/cell-boot)
BINS += $(if $(wildcard runtime/main.c),$(OUT)/bin/cell-monitor)
BINS += $(if $(wildcard controller/main.c),$(OUT)/bin/cellctl)
# cellctl's instance data (Kip's JSON format), beside the binary's prefix.
CTL_DATA := $(OUT)/share/cell/aws-us-east-1.json
BINS += $(if $(wildcard controller/main.c),$(CTL_DATA))
BINS += $(if $(wildcard agent/unpack-main.c),$(OUT)/bin/cell-unpack)
BINS += $(if $(wildcard agent/imds-main.c),$(OUT)/bin/cell-imds)
UNIT_SRC := $(wildcard tests/unit/test-*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUT)/tests/%,$(UNIT_SRC))
FUZZ_SRC := $(wildcard tests/fuzz/fuzz-*.c)
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(OUT)/fuzz/%,$(FUZZ_SRC))
FUZZ_LIBFUZZER := $(patsubst tests/fuzz/%.c,$(OUT)/libfuzzer/%,$(FUZZ_SRC))

obj = $(patsubst %.c,$(OUT)/obj/%.o,$(1))

.PHONY: gpu-kit libs
# The product archives alone (scripts/lint.sh reads them for rings).
libs: $(COMMON_LIB) $(PULL_LIB) $(CINIT_LIB) $(BOOT_LIB) $(AGENT_LIB) \
	$(RUNTIME_LIB) $(NET_LIB) $(CTL_LIB)
.PHONY: all check asan tsan lint fuzz fuzz-bins fuzz-run clean tests deps install release \
	static static-test image image-files image-test image-boot-test \
	kube-router-test soak soak-tls soak-tls-asan arm64-static-test
# Keep test objects between builds (they are intermediate to pattern rules).
.SECONDARY: $(call obj,$(UNIT_SRC) $(FUZZ_SRC) tests/fuzz/replay.c)
all: $(BINS)

V ?= 0
ifeq ($(V),0)
Q := @
endif

$(OUT)/obj/%.o: %.c | $(PUB_HDRS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(COMMON_LIB): $(call obj,$(COMMON_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(PULL_LIB): $(call obj,$(PULL_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(CINIT_LIB): $(call obj,$(CINIT_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(CIVETWEB)/.cell-stamp:
	@echo "civetweb's source is missing: run scripts/deps.sh" >&2; exit 1
# Whatever may include civetweb.h waits for its source, so that a fresh
# clone's `make` says the line above rather than "civetweb.h: No such file".
$(call obj,$(wildcard agent/*.c agent/*/*.c) $(UNIT_SRC) $(FUZZ_SRC) \
	tests/fuzz/replay.c): | $(CIVETWEB)/.cell-stamp

$(CIVETWEB)/src/civetweb.c: $(CIVETWEB)/.cell-stamp
$(OUT)/civetweb/civetweb.o: $(CIVETWEB)/src/civetweb.c $(CIVETWEB)/.cell-stamp Makefile
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) -std=gnu11 $(CFLAGS) $(SAN) $(HARDEN) $(CIVETWEB_DEFS) -w \
		-I$(CIVETWEB)/include $(PKG_CFLAGS) -c -o $@ $<

$(CIVETWEB_LIB): $(OUT)/civetweb/civetweb.o
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(BOOT_LIB): $(call obj,$(BOOT_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(NET_LIB): $(call obj,$(NET_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(AGENT_LIB): $(call obj,$(AGENT_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(RUNTIME_LIB): $(call obj,$(RUNTIME_SRC)) $(OUT)/obj/runtime/seccomp-default.o
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# The default seccomp profile is read into the binaries at build time
# (runtime/seccomp-default.S): Debian's golang-github-containers-common.
SECCOMP_DEFAULT_JSON ?= /usr/share/containers/seccomp.json
$(OUT)/obj/runtime/seccomp-default.o: runtime/seccomp-default.S $(SECCOMP_DEFAULT_JSON)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AS      $<")
	$(Q)$(CC) -DSECCOMP_DEFAULT_JSON='"$(SECCOMP_DEFAULT_JSON)"' -c -o $@ $<
$(SECCOMP_DEFAULT_JSON):
	@echo "make: the default seccomp profile $@ is missing:" \
		"install golang-github-containers-common (scripts/deps.sh)" \
		"or set SECCOMP_DEFAULT_JSON=FILE" >&2
	@exit 1

$(CTL_LIB): $(call obj,$(CTL_SRC))
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(CTL_DATA): controller/data/aws-us-east-1.json
	@mkdir -p $(dir $@)
	$(Q)cp $< $@

$(OUT)/bin/cellctl: $(call obj,controller/main.c) $(LIBS_controller)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# cell-agent links its libraries statically (Debian's -dev packages ship
# the archives): only the code it uses is mapped, which keeps the idle RSS
# under 8 MiB (docs/agent.md "Performance"). An OpenSSL update means
# rebuilding it.
AGENT_LDLIBS := -Wl,-Bstatic -lssl -lcrypto -ljansson -lyaml -lcap -lseccomp \
	-Wl,-Bdynamic -lpthread \
	$(shell pkg-config --libs libmnl libip4tc libip6tc 2>/dev/null) # no archives
ifeq ($(STATIC),1)
AGENT_LDLIBS := $(PKG_LIBS) # everything static already
endif
$(OUT)/bin/cell-agent: $(call obj,agent/main.c) $(LIBS_agent)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(AGENT_LDLIBS)

# cell-unpack: the deploy-package extractor the agent runs as a child.
$(OUT)/bin/cell-unpack: $(call obj,agent/unpack-main.c) $(LIBS_agent)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# cell-imds: the metadata proxy the agent runs as a child for a pod with
# an instance profile (common and its own judge only).
$(OUT)/bin/cell-imds: $(call obj,agent/imds-main.c) $(AGENT_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# cell-monitor is exec'd for every unit start: with jansson and libcap
# linked in, the dynamic loader maps libc only (docs/agent.md "Performance").
MONITOR_LDLIBS := -Wl,-Bstatic -ljansson -lcap -Wl,-Bdynamic
ifeq ($(STATIC),1)
MONITOR_LDLIBS := $(PKG_LIBS)
endif
$(OUT)/bin/cell-monitor: $(call obj,runtime/main.c) $(LIBS_runtime)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(MONITOR_LDLIBS)

$(OUT)/bin/cell-cloudinit: $(call obj,cloudinit/main.c) $(LIBS_cloudinit)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(OUT)/bin/cell-boot: $(call obj,boot/main.c) $(LIBS_boot)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(OUT)/bin/cell-net: $(call obj,netsetup/main.c) $(LIBS_netsetup)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(OUT)/bin/cell-pull: $(call obj,imagepull/main.c) $(LIBS_imagepull)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# cell-pull-cached: the agent's curl-free front of cell-pull (cached.c);
# --as-needed keeps libcurl and libarchive out of its NEEDED list.
# Static libcrypto and jansson, as cell-agent: it starts on every unit
# start, and the loader's work is what it exists to save.
$(OUT)/bin/cell-pull-cached: $(call obj,imagepull/cached-main.c) $(LIBS_imagepull)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(if $(filter 1,$(STATIC)),$(PKG_LIBS),\
		-Wl,-Bstatic -lcrypto -ljansson -Wl,-Bdynamic -lpthread)

$(OUT)/tests/%: $(call obj,tests/unit/%.c) $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The GPU check's kit (tests/gpu/make-kit.sh): cell-monitor, cdi-runjson
# and the shared libraries they load, for a machine without our deps.
$(OUT)/gpu/cdi-runjson: $(call obj,tests/gpu/cdi-runjson.c) $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

gpu-kit: $(OUT)/bin/cell-monitor $(OUT)/gpu/cdi-runjson
	OUT=$(OUT) tests/gpu/make-kit.sh

# Fuzz harnesses: the same file linked with a replay main (runs in every
# `make check`) or, with clang, with libFuzzer.
$(OUT)/fuzz/%: $(call obj,tests/fuzz/%.c) $(call obj,tests/fuzz/replay.c) $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The tree is compiled once with clang's coverage and ASan+UBSan (make fuzz
# sets OUT=$(FUZZ_OUT), CC=clang); each harness links libFuzzer's main.
$(OUT)/libfuzzer/%: $(call obj,tests/fuzz/%.c) $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS)

tests: $(BINS) $(UNIT_BINS) $(FUZZ_REPLAY)

check: tests
	OUT=$(OUT) tests/run.sh

ASAN_MAKE = $(MAKE) OUT=build-asan CFLAGS="-O1 -g -fno-omit-frame-pointer" \
	SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
asan:
	$(ASAN_MAKE) check

# libFuzzer builds of every harness into $(FUZZ_OUT)/libfuzzer (clang;
# its warnings do not fail this build, gcc's -Werror build is the gate);
# fuzz-run runs each for FUZZ_SECONDS from its corpus (scripts/fuzz-run.sh):
# a crash fails and its input is kept in $(FUZZ_OUT)/fuzz-crashes.
FUZZ_OUT ?= build-fuzz
FUZZ_SECONDS ?= 30
fuzz:
	$(MAKE) OUT=$(FUZZ_OUT) CC=clang HARDEN= \
		CFLAGS="-O1 -g -fno-omit-frame-pointer -Wno-error \
		-Wno-unknown-warning-option" \
		SAN="-fsanitize=fuzzer-no-link,address,undefined" fuzz-bins
fuzz-bins: $(FUZZ_LIBFUZZER)

fuzz-run: fuzz
	OUT=$(FUZZ_OUT) FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz-run.sh

# ThreadSanitizer: the agent's threaded integration tests (scripts/tsan.sh
# says which) against a -fsanitize=thread build; any report fails.
# cell-monitor stays uninstrumented: it has one thread, and setns() into a
# unit's mount namespace fails (EINVAL) in a process with TSan's own.
tsan:
	$(MAKE) OUT=build-tsan CFLAGS="-O1 -g -fno-omit-frame-pointer" \
		SAN="-fsanitize=thread" tests
	$(MAKE) build/bin/cell-monitor
	cp build/bin/cell-monitor build-tsan/bin/cell-monitor
	OUT=build-tsan scripts/tsan.sh

# A long run against leaks (issue 14), not in check or CI: SOAK_MINUTES
# (default 30) of churn, then leaked processes, mounts, cgroups, fds and RSS.
# Then 50 rounds of spec changes with the agent killed (-9) at random
# moments (issue 18; `make check` runs 4).
soak: all
	CELL_BUILD=$(abspath $(OUT)) /usr/bin/python3 tests/soak/soak.py
	CELL_BUILD=$(abspath $(OUT)) CELL_DURABLE_ROUNDS=$${CELL_DURABLE_ROUNDS:-50} \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider \
		tests/integration/test_agent_durable.py -k random_moments

# The TLS front under kill -9 restarts (issue 28): MINUTES (5) of clients
# that hold, open and abandon TLS connections while the agent is killed and
# started again on the same pod; soak-tls-asan under ASan+UBSan. `make
# check` runs 40 s of it (tests/integration/test_agent_tls_restart.py).
MINUTES ?= 5
soak-tls: all
	CELL_BUILD=$(abspath $(OUT)) TLS_SOAK_MINUTES=$(MINUTES) \
		/usr/bin/python3 tests/soak/tls_restart.py
soak-tls-asan:
	$(ASAN_MAKE) soak-tls

# make install PREFIX=/usr/local DESTDIR=: binaries, docs, and the systemd
# units and OpenRC scripts from image-build/init with their paths filled in.
# STRIP=1: the binaries without their debug information (images, releases).
PREFIX ?= /usr/local
SYSTEMD_DIR ?= /etc/systemd/system
OPENRC_DIR ?= /etc/init.d
RELEASE := cell-$(VERSION)-linux-$(MACHINE).tar.gz
# The self-update's file (boot/update.c): cell-agent-<version> for x86-64
# (the name Kip's itzo_url servers always had), -arm64 added for arm64.
AGENT_RELEASE := cell-agent-$(VERSION)$(if $(filter amd64,$(ARCH)),,-$(ARCH))

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/cell \
		$(DESTDIR)$(PREFIX)/share/doc/cell $(DESTDIR)$(SYSTEMD_DIR) \
		$(DESTDIR)$(OPENRC_DIR)
	install -m 0755 $(if $(filter 1,$(STRIP)),-s \
		--strip-program=$(STRIP_PROG)) \
		$(filter $(OUT)/bin/%,$(BINS)) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 README.md docs/*.md \
		image-build/init/custom-image.cloud-config \
		$(DESTDIR)$(PREFIX)/share/doc/cell/
	for f in image-build/init/systemd/*.service; do \
		sed 's|@PREFIX@|$(PREFIX)|g' $$f > \
		$(DESTDIR)$(SYSTEMD_DIR)/$$(basename $$f) && \
		chmod 0644 $(DESTDIR)$(SYSTEMD_DIR)/$$(basename $$f) || exit 1; \
	done
	for f in image-build/init/openrc/*; do \
		sed 's|@PREFIX@|$(PREFIX)|g' $$f > \
		$(DESTDIR)$(OPENRC_DIR)/$$(basename $$f) && \
		chmod 0755 $(DESTDIR)$(OPENRC_DIR)/$$(basename $$f) || exit 1; \
	done

# The release tarball (paths from /, PREFIX=/usr/local) and its .sha256,
# what the custom-image cloud-config downloads. `make release STATIC=1`
# (after `make static`): the static musl binaries, in
# build-static/, which need no library package on the stock image.
release: all
	rm -rf $(OUT)/release
	$(MAKE) install DESTDIR=$(abspath $(OUT))/release PREFIX=/usr/local
	tar -C $(OUT)/release --owner=0 --group=0 --sort=name \
		-czf $(OUT)/$(RELEASE) .
	cp $(OUT)/release/usr/local/bin/cell-agent $(OUT)/$(AGENT_RELEASE)
	cd $(OUT) && sha256sum $(RELEASE) > $(RELEASE).sha256 && \
		sha256sum $(AGENT_RELEASE) > $(AGENT_RELEASE).sha256

# Static musl binaries for the Alpine cell (docs/image-build.md): the
# libraries come from Debian's source packages, built once into
# STATIC_PREFIX (outside git) by image-build/static-deps.sh.
# ARCH=arm64: the same, cross-built (build-static-arm64/, its own prefix).
static:
	ARCH=$(ARCH) image-build/static-deps.sh $(STATIC_PREFIX)
	$(MAKE) OUT=build-static$(STATIC_SUFFIX) CC="$(MUSL_CC_$(ARCH))" STATIC=1 \
		ARCH=$(ARCH) STATIC_PREFIX=$(STATIC_PREFIX) all

# Bootable images (docs/image-build.md), kept outside git in IMAGE_OUT and
# rebuilt when a binary or a recipe changes: `lean` (image-build/lean.sh:
# busybox init, the cloud kernel, the static binaries), `debian` (the
# systemd cell image) and `custom` (stock Debian with cloud-init, the
# comparison), `lean-arm64` (the lean image for arm64: `make static
# ARCH=arm64`'s binaries, Debian's arm64 packages, a UEFI disk). `make image
# IMAGE=lean` builds one; KUBE_ROUTER=1 (with KUBE_ROUTER_SHA256) puts
# kube-router into lean and debian.
IMAGE_OUT ?= /var/cache/cell-image/out
IMAGE ?= lean lean-arm64 debian custom
image_file = $(IMAGE_OUT)/$(if $(filter custom,$(1)),cell-debian-custom,cell-$(1)).qcow2
IMAGE_COMMON := image-build/common.sh $(wildcard image-build/files/*) \
	image-build/kube-router.sh image-build/kube-router.conf
# The custom image holds none of our files (its user data installs the
# release), so only the recipe rebuilds it; the built binaries must be there
# (the recipe lists the libraries they link), but a newer one rebuilds
# nothing.
IMAGE_RECIPE := image-build/debian.sh $(IMAGE_COMMON)
IMAGE_DEPS := $(BINS) $(IMAGE_RECIPE) $(wildcard image-build/init/*/* \
	image-build/init/*)
LEAN_DEPS := image-build/lean.sh $(IMAGE_COMMON) $(wildcard image-build/lean/*) \
	$(wildcard build-static/bin/*)
$(IMAGE_OUT)/cell-debian.qcow2: $(IMAGE_DEPS)
	image-build/debian.sh $(IMAGE_OUT)
$(IMAGE_OUT)/cell-debian-custom.qcow2: $(IMAGE_RECIPE) | $(BINS)
	image-build/debian.sh --custom $(IMAGE_OUT)
$(IMAGE_OUT)/cell-lean.qcow2: $(LEAN_DEPS)
	ARCH=amd64 image-build/lean.sh $(IMAGE_OUT)
LEAN_ARM64_DEPS := image-build/lean.sh $(IMAGE_COMMON) \
	$(wildcard image-build/lean/*) $(wildcard build-static-arm64/bin/*)
$(IMAGE_OUT)/cell-lean-arm64.qcow2: $(LEAN_ARM64_DEPS)
	ARCH=arm64 image-build/lean.sh $(IMAGE_OUT)
# The lean images take `make static`'s binaries: built first, then a make
# that sees them (their times decide whether the image is rebuilt).
image:
ifneq ($(filter lean,$(IMAGE)),)
	$(MAKE) static ARCH=amd64
endif
ifneq ($(filter lean-arm64,$(IMAGE)),)
	$(MAKE) static ARCH=arm64
endif
	$(MAKE) image-files IMAGE="$(IMAGE)"
image-files: $(foreach i,$(IMAGE),$(call image_file,$(i)))

# Not in `make check` (minutes of emulation; scripts/test.sh runs it unless
# SKIP_IMAGE=1): the static binaries in a root without libc, kube-router's
# checked download, then the images booted under qemu (KVM when it works,
# else TCG) and driven from the host. Prints TIME and SIZE lines.
# One after the other (each builds into build-static/ or build/).
image-test:
	$(MAKE) static-test
	$(MAKE) arm64-static-test
	$(MAKE) kube-router-test
	$(MAKE) image-boot-test

# The static binaries alone, in a root without libc (no image, no qemu).
static-test: static
	CELL_STATIC_BUILD=$(abspath build-static) /usr/bin/python3 -m pytest \
		tests/image/test_static_rootfs.py -q -rfEs -s $(PYTEST_ARGS)

# The arm64 static binaries here through qemu-user: aarch64 ELF, no
# interpreter, --help; cell-pull picks linux/arm64/v8 from an index.
arm64-static-test:
	$(MAKE) static ARCH=arm64
	CELL_STATIC_ARM64_BUILD=$(abspath build-static-arm64) /usr/bin/python3 \
		-m pytest tests/image/test_arm64_static.py -q -rfEs $(PYTEST_ARGS)

# kube-router's pinned download (a stand-in on loopback; seconds).
kube-router-test:
	/usr/bin/python3 -m pytest tests/image/test_kube_router.py -q -rfEs \
		$(PYTEST_ARGS)

# The boot part alone (no static test): the images under qemu. The images
# and the release one after the other: both build build/ (make -j).
image-boot-test:
	$(MAKE) image
	$(MAKE) release
	CELL_IMAGE_OUT=$(IMAGE_OUT) /usr/bin/python3 -m pytest \
		tests/image/test_boot.py -q -rfEs -s $(PYTEST_ARGS)

lint:
	scripts/lint.sh

clean:
	rm -rf build build-asan build-static build-static-arm64 build-tsan build-fuzz

-include $(shell find $(OUT)/obj -name '*.d' 2>/dev/null)
