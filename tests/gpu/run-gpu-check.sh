#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Issue 20's check on a machine with a real NVIDIA GPU: a unit gets the GPU
# through CDI and `nvidia-smi -L` inside it lists the GPU.
#
# What it needs from this tree: build/gpu-kit (`make gpu-kit` on the build
# machine: cell-monitor, cdi-runjson, their shared libraries and loader, a
# static busybox), carried to the GPU machine; without it, it tries `make
# gpu-kit` there. No registry, no network: the unit's rootfs is busybox plus
# the host glibc that nvidia-smi links against; the device nodes, nvidia-smi
# and libnvidia-ml come from a CDI spec, written by hand from what the host
# has (and, when nvidia-ctk is installed, also the one it generates). The
# run.json is made by the agent's own CDI code (tests/gpu/cdi-runjson.c) and
# run by cell-monitor, the agent's runtime. Every step is printed; ends in
# well under 5 minutes; prints "GPU CHECK: PASS" or "GPU CHECK: FAIL".
#
#   tests/gpu/run-gpu-check.sh            (as root, from the tree's root)
set -uo pipefail
set -x

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# Where the host's NVIDIA nodes are (a seam for a dry run without a GPU:
# a directory of mknod'd stand-ins and a fake nvidia-smi in PATH).
DEVDIR=${DEVDIR:-/dev}
KIT=${KIT:-$ROOT/build/gpu-kit}
W=$(mktemp -d /tmp/gpu-check.XXXXXX)
RESULT=FAIL
UNITS=()

finish() {
	set +e
	for u in "${UNITS[@]}"; do
		mon stop "$u" >/dev/null 2>&1
		sleep 0.5
		mon cleanup "$u" >/dev/null 2>&1
	done
	# The units' parent cgroup (empty once they are gone).
	find /sys/fs/cgroup -maxdepth 6 -depth -type d -name cell-gpu-check \
		-exec rmdir {} \; 2>/dev/null
	# Only $W is ours: nothing in it stays mounted once its units ended.
	if ! grep -q " $W/" /proc/self/mountinfo; then
		rm -rf "$W"
	else
		echo "left $W: something is still mounted below it"
	fi
	echo "GPU CHECK: $RESULT"
	[ "$RESULT" = PASS ] || exit 1
}
trap finish EXIT

step() { set +x; echo; echo "=== $* ==="; set -x; }

# ---------------------------------------------------------------------------
step "what this machine has"
date -u
uname -a
head -4 /etc/os-release
id
nproc
command -v nvidia-smi || { echo "no nvidia-smi: not a GPU machine"; exit 1; }
timeout 60 nvidia-smi -L
timeout 60 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ls -l "$DEVDIR"/nvidia* 2>&1
ls -l "$DEVDIR"/nvidia-caps 2>&1
CTK=$(command -v nvidia-ctk || true)
echo "nvidia-ctk: ${CTK:-absent}"
[ -n "$CTK" ] && timeout 20 "$CTK" --version
ldconfig -p | grep -E 'libnvidia-ml|libcuda\.' || echo "no libnvidia-ml in ldconfig"
stat -fc %T /sys/fs/cgroup
cat /proc/self/cgroup
grep -E 'cgroup|proc ' /proc/self/mountinfo | head -5
ls /etc/cdi /var/run/cdi 2>&1

# ---------------------------------------------------------------------------
step "the kit (cell-monitor, cdi-runjson)"
if [ ! -x "$KIT/bin/cell-monitor" ]; then
	echo "no $KIT: trying to build it here"
	(cd "$ROOT" && timeout 240 make -j"$(nproc)" gpu-kit) ||
		{ echo "cannot build the kit here: run 'make gpu-kit' on the build machine and carry build/gpu-kit"; exit 1; }
fi
ls -la "$KIT" "$KIT/bin" "$KIT/lib"
LOADER=$KIT/lib/ld-linux-x86-64.so.2
kitrun() { "$LOADER" --library-path "$KIT/lib" "$@"; }
mon() { kitrun "$KIT/bin/cell-monitor" "$@"; }
mon --version || exit 1

# ---------------------------------------------------------------------------
step "a rootfs: busybox, and the glibc nvidia-smi links against"
R=$W/rootfs
mkdir -p "$R/bin" "$R/tmp" "$R/usr/bin" "$R/proc" "$R/sys" "$R/dev"
BB=$KIT/busybox
[ -x "$BB" ] || BB=$(command -v busybox || true)
if [ -n "$BB" ]; then
	cp -L "$BB" "$R/bin/busybox"
	for a in sh ls cat echo head stat id env; do ln -sf busybox "$R/bin/$a"; done
else
	echo "no busybox: using the host's /bin/sh and its libraries"
	cp -L /bin/sh "$R/bin/sh"
	for t in ls cat; do cp -L "$(command -v $t)" "$R/bin/$t"; done
fi
SMI=$(command -v nvidia-smi)
# The loader and every library nvidia-smi, libnvidia-ml (which it
# dlopens) and a host sh need, at the host's paths, so that its own loader
# finds them.
for b in "$SMI" "$R/bin/sh" $(ldconfig -p | awk '/libnvidia-ml\.so/{print $NF}'); do
	ldd "$b" 2>/dev/null | awk '/=> \//{print $3} /^\t\//{print $1}'
done | sort -u | while read -r lib; do
	mkdir -p "$R$(dirname "$lib")"
	cp -L "$lib" "$R$lib"
done
# glibc's libraries dlopened by nvidia-smi's libc (name services) are not
# needed for -L; libnvidia-ml comes from the CDI spec.
find "$R" -maxdepth 4 | head -50

# ---------------------------------------------------------------------------
step "a CDI spec for this host's GPUs, written by hand"
mkdir -p "$W/cdi"
NODES=()
for n in nvidiactl nvidia-uvm nvidia-uvm-tools nvidia-modeset; do
	[ -c "$DEVDIR/$n" ] && NODES+=("{\"path\": \"/dev/$n\", \"hostPath\": \"$DEVDIR/$n\"}")
done
DEVS=()
for n in "$DEVDIR"/nvidia[0-9]*; do
	[ -c "$n" ] || continue
	b=$(basename "$n")
	DEVS+=("{\"name\": \"${b#nvidia}\", \"containerEdits\": {\"deviceNodes\": [{\"path\": \"/dev/$b\", \"hostPath\": \"$n\"}]}}")
done
MOUNTS=("{\"hostPath\": \"$SMI\", \"containerPath\": \"$SMI\", \"options\": [\"ro\", \"nosuid\", \"nodev\", \"bind\"]}")
LIBDIRS=""
for lib in $(ldconfig -p | awk '/libnvidia-ml\.so/{print $NF}' | sort -u); do
	MOUNTS+=("{\"hostPath\": \"$lib\", \"containerPath\": \"$lib\", \"options\": [\"ro\", \"nosuid\", \"nodev\", \"bind\"]}")
	LIBDIRS="$LIBDIRS:$(dirname "$lib")"
done
join() { local IFS=,; echo "$*"; }
cat > "$W/cdi/nvidia.json" <<JSON
{
  "cdiVersion": "0.5.0",
  "kind": "nvidia.com/gpu",
  "containerEdits": {
    "env": ["NVIDIA_VISIBLE_DEVICES=void"],
    "deviceNodes": [$(join "${NODES[@]}")],
    "mounts": [$(join "${MOUNTS[@]}")]
  },
  "devices": [$(join "${DEVS[@]}")]
}
JSON
cat "$W/cdi/nvidia.json"
[ ${#DEVS[@]} -gt 0 ] || { echo "no /dev/nvidiaN node"; exit 1; }

# ---------------------------------------------------------------------------
# One unit: base run.json → cdi-runjson (the agent's CDI code) → cell-monitor.
run_unit() { # name cdi-dirs
	local name=$1 dirs=$2 u=$W/$1
	mkdir -p "$u"
	UNITS+=("$u")
	cat > "$W/base-$name.json" <<JSON
{"id": "gpu-check-$name", "rootfs": "$R",
 "args": ["/bin/sh", "-c", "echo '--- nvidia-smi -L:'; $SMI -L; echo \"nvidia-smi rc=\$?\"; ls -l /dev/nvidia*; cat /proc/self/cgroup"],
 "env": ["PATH=/usr/bin:/bin:/usr/sbin:/sbin", "LD_LIBRARY_PATH=${LIBDIRS#:}"],
 "capabilities": ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_SETUID", "CAP_SETGID", "CAP_KILL"],
 "cgroup": {"path": "cell-gpu-check/$name-$$"},
 "log": {"path": "$u/log"}}
JSON
	CELL_NVIDIACTL=/nonexistent timeout 60 "$LOADER" --library-path "$KIT/lib" \
		"$KIT/bin/cdi-runjson" "$dirs" nvidia.com/gpu=all < "$W/base-$name.json" > "$u/run.json" ||
		{ echo "cdi-runjson failed"; return 1; }
	cat "$u/run.json"
	local nest
	for nest in "" 1; do
		# CELL_CGROUP_NEST=1: below our own cgroup, where a container
		# may write but not at the root.
		[ -n "$nest" ] && { echo "retrying nested below our own cgroup"; rm -f "$u"/state.json "$u"/exit.json "$u"/.exit.slot "$u"/monitor.*; }
		CELL_CGROUP_NEST=$nest timeout 60 "$LOADER" --library-path "$KIT/lib" \
			"$KIT/bin/cell-monitor" run "$u"
		for _ in $(seq 1 300); do
			[ -e "$u/exit.json" ] && break
			sleep 0.2
		done
		cat "$u/monitor.log" 2>/dev/null
		cat "$u/exit.json" 2>/dev/null; echo
		grep -q '"StartError"' "$u/exit.json" 2>/dev/null && grep -q cgroup "$u/exit.json" && continue
		break
	done
	echo "--- the unit's log ($name):"
	mon logs "$u/log" | tee "$W/out-$name.txt"
	grep -q '^GPU [0-9]*:' "$W/out-$name.txt"
}

step "nvidia-smi -L in a unit, hand-written spec"
if run_unit hand "$W/cdi"; then
	RESULT=PASS
fi

if [ -n "$CTK" ]; then
	step "the same with nvidia-ctk cdi generate's spec"
	mkdir -p "$W/cdi-ctk"
	timeout 60 "$CTK" cdi generate --output="$W/cdi-ctk/nvidia.yaml" &&
		head -60 "$W/cdi-ctk/nvidia.yaml"
	if run_unit ctk "$W/cdi-ctk"; then
		echo "nvidia-ctk spec: PASS"
	else
		echo "nvidia-ctk spec: FAIL (the hand-written one decides the result)"
	fi
fi

step "result"
cat "$W"/out-*.txt
