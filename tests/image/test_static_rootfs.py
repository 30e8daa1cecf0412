# SPDX-License-Identifier: Apache-2.0
"""The static musl binaries (`make static`, the Alpine cell's) in a root file
system that holds no libc at all: only our binaries and a few data files.

The agent is started in its own mount namespace, chrooted into that root
(proc, sys, dev mounted; nothing else from the host), and driven over
mutual TLS like the controller drives it: it pulls busybox from a real
registry on loopback and runs a pod whose log is read back. Run by
`make image-test` (after `make static`); CELL_STATIC_BUILD selects the
build (default build-static/).
"""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time

import pytest

from conftest import STATIC_BUILD
from images import Image, busybox_layer, push
from test_agent_api import Agent, free_port, make_boot, wait_ping
from wire import pod_params, unit

# The binaries an Alpine cell carries; cell-boot and cell-net when built.
REQUIRED = ["cell-agent", "cell-monitor", "cell-pull", "cell-cloudinit", "cell-net",
            "cell-boot"]
OPTIONAL = ["cell-unpack", "cell-pull-cached", "cell-imds"]
PT_INTERP = 3
FAST = {"CELL_AGENT_BACKOFF_UNIT_MS": "50", "CELL_CGROUP_NEST": "1"}


def static_bins() -> list:
    found = []
    for name in REQUIRED + OPTIONAL:
        path = os.path.join(STATIC_BUILD, "bin", name)
        if os.access(path, os.X_OK):
            found.append(path)
        elif name in REQUIRED:
            pytest.fail(f"{path} missing: run make static", pytrace=False)
    return found


def elf_interp(path: str):
    """The program interpreter an ELF file asks for (None: none, so it
    loads no libc), or False when the file is not ELF."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF":
            return False
        assert head[4] == 2, f"{path}: not a 64-bit ELF"
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            ptype, _flags, off, _va, _pa, size = struct.unpack("<IIQQQQ", f.read(40))
            if ptype == PT_INTERP:
                f.seek(off)
                return f.read(size).rstrip(b"\0").decode()
    return None


@pytest.fixture
def rootfs(tmp_path):
    r = tmp_path / "rootfs"
    for d in ("usr/local/bin", "proc", "sys", "dev", "tmp", "run", "etc", "var/lib/cell"):
        (r / d).mkdir(parents=True)
    for b in static_bins():
        shutil.copy2(b, r / "usr/local/bin")
    (r / "etc/resolv.conf").write_text("nameserver 127.0.0.1\n")
    (r / "etc/hosts").write_text("127.0.0.1 localhost\n")
    return r


def test_rootfs_holds_no_libc(rootfs):
    sizes = []
    for dirpath, _dirs, files in os.walk(rootfs):
        for name in files:
            path = os.path.join(dirpath, name)
            assert not name.startswith(("libc.", "libc-", "ld-", "ld-musl")), path
            interp = elf_interp(path)
            if interp is not False:
                assert interp is None, f"{path} asks for {interp}"
                sizes.append((name, os.path.getsize(path)))
    assert {n for n, _ in sizes} >= set(REQUIRED)
    for name, size in sorted(sizes):
        print(f"static {name}: {size} bytes ({size / 1048576:.1f} MiB)")


def test_binaries_run_in_the_empty_root(rootfs):
    """Each binary starts and answers its usage in the chroot (so nothing
    it loads at start-up is missing)."""
    for name in os.listdir(rootfs / "usr/local/bin"):
        p = subprocess.run(["chroot", str(rootfs), f"/usr/local/bin/{name}", "--help"],
                           capture_output=True, timeout=30)
        out = (p.stdout + p.stderr).decode(errors="replace")
        assert p.returncode in (0, 1, 2) and "usage" in out.lower(), (name, p.returncode, out)


# Inside a private mount namespace: the root made a mount point (as a
# cell's / is: the runtime makes it a slave mount), the kernel's file
# systems in it, then the agent chrooted into it (exec all the way: the Popen pid is the
# agent's).
IN_ROOT = """set -e
r=$1; shift
mount --bind "$r" "$r"
mount -t proc proc "$r/proc"
mount --rbind /sys "$r/sys"
mount --rbind /dev "$r/dev"
mount -t tmpfs tmpfs "$r/tmp"
mount -t tmpfs tmpfs "$r/run"
exec chroot "$r" /usr/local/bin/cell-agent "$@"
"""


def start_in_root(rootfs, registry) -> Agent:
    d = rootfs / "var/lib/cell"
    ca, cli, _boot = make_boot(str(d))
    port = free_port()
    log_path = str(rootfs.parent / "agent.log")
    args = ["unshare", "-m", "--propagation", "private", "sh", "-c", IN_ROOT, "sh",
            str(rootfs), "--port", str(port), "--boot-dir", "/var/lib/cell/boot",
            "--state-dir", "/var/lib/cell/state", "--image-cache", "/var/lib/cell/cache",
            "-v", "--insecure-registry", registry.host]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **FAST}
    with open(log_path, "wb") as log:
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             env=env, start_new_session=True)
    a = Agent(p, port, str(d), ca, cli.cert_path, cli.key_path, log_path)
    wait_ping(a, timeout=30)
    return a


def test_static_agent_runs_a_pod_in_a_root_without_libc(rootfs, registry):
    push(registry, "t/bb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    img = registry.ref("t/bb", "v1")
    a = start_in_root(rootfs, registry)
    try:
        assert os.readlink(f"/proc/{a.proc.pid}/root") == str(rootfs)
        with open(f"/proc/{a.proc.pid}/maps") as f:
            libs = {line.split()[-1] for line in f if ".so" in line}
        assert not libs, libs
        c = a.client()
        c.update_pod(pod_params("ns_pod", units=[unit(
            "web", img, command=["/bin/sh", "-c", "echo hello from musl; exec sleep 1000"])]))
        st = c.wait_status(lambda s: any("running" in (u.get("state") or {})
                                         for u in s["unitStatus"]), timeout=60)
        assert st["unitStatus"][0]["name"] == "web"
        deadline = time.monotonic() + 10
        while c.logs("web") != b"hello from musl\n" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.logs("web") == b"hello from musl\n"
        # The pod's monitor is the static one from the root, too.
        mons = [p for p in os.listdir("/proc") if p.isdigit() and
                _exe(p).endswith("/usr/local/bin/cell-monitor") and
                os.readlink(f"/proc/{p}/root") == str(rootfs)]
        assert mons, "no cell-monitor from the root is running"
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        units = os.path.join(a.dir, "state", "units")
        deadline = time.monotonic() + 20
        while os.listdir(units) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not os.listdir(units)
    finally:
        rc = a.stop()
    assert rc == 0, a.log()[-3000:]


def _exe(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""
