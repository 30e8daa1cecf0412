# SPDX-License-Identifier: Apache-2.0
"""The container boundary against hostile images and pods (issue 18): an
image's /etc/passwd that is a FIFO or a device node, the kernel keyring,
a container raising its own cgroup limits, and the kubelet's rules for
groups, image VOLUMEs, StopSignal and hostPath types."""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import time

import pytest

from images import CharDev, Dir, Fifo, File, Image, Layer, busybox_layer, push
from wire import WireError, pod_params
from test_agent_api import start_agent
from test_agent_pod import (FAST, cell, image, sh, state_of, unmount_below,  # noqa: F401
                            wait_state, wait_units_gone)

GROUP = "root:x:0:\napp:x:1000:\n"
PASSWD = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/:/bin/sh\n"


def etc_image(registry, tag: str, passwd, group) -> str:
    push(registry, "t/etc", tag,
         Image([busybox_layer(), Layer([passwd, group])], config={"Cmd": ["/bin/sh"]}))
    return registry.ref("t/etc", tag)


@pytest.mark.parametrize("bad", ["passwd", "group"])
@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_etc_file_that_is_not_regular(cell, registry, image, bad, kind):
    """A FIFO or a device node as the image's /etc/passwd or /etc/group: the
    unit fails with a reason that names the file, and the agent stays
    responsive (the next spec is applied, SIGTERM ends it)."""
    node = (Fifo(f"etc/{bad}") if kind == "fifo"
            else CharDev(f"etc/{bad}", 1, 5))  # /dev/zero: endless if read
    files = {"passwd": File("etc/passwd", PASSWD), "group": File("etc/group", GROUP)}
    files[bad] = node
    img = etc_image(registry, f"{bad}-{kind}", files["passwd"], files["group"])
    a, c = cell()
    c.update_pod(pod_params("ns_pod", units=[sh(img, "x", "exec sleep 1000")]))
    st = c.wait_status(lambda s: state_of(s, "x").get("waiting", {}).get("startFailure"),
                       timeout=30)
    reason = state_of(st, "x")["waiting"]["reason"]
    assert f"/etc/{bad}" in reason and "not a regular file" in reason, reason
    # Still responsive: a new spec is applied.
    c.update_pod(pod_params("ns_pod", units=[sh(image, "y", "exec sleep 1000")],
                            terminationGracePeriodSeconds=0))
    wait_state(c, "y", "running")


# ---- the probe: a static program put into the image ----

PROBE_SRC = os.path.join(os.path.dirname(__file__), "boundary_probe.c")


@pytest.fixture(scope="module")
def probe_bin(tmp_path_factory) -> bytes:
    out = str(tmp_path_factory.mktemp("probe") / "probe")
    subprocess.run(["gcc", "-static", "-O1", "-o", out, PROBE_SRC], check=True,
                   timeout=120)
    with open(out, "rb") as f:
        return f.read()


@pytest.fixture
def probe_image(registry, probe_bin) -> str:
    push(registry, "t/probe", "v1",
         Image([busybox_layer(), Layer([File("probe", probe_bin, mode=0o755)])],
               config={"Cmd": ["/bin/sh"]}))
    return registry.ref("t/probe", "v1")


def probe_lines(c, name: str) -> dict:
    """The probe's "<what> <result>" lines from the unit's log."""
    out = {}
    try:
        text = c.logs(name).decode()
    except WireError:  # not started yet
        return out
    for line in text.splitlines():
        what, _, res = line.partition(" ")
        out[what] = res
    return out


# ---- the kernel keyring ----

_NR = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
KEY_SPEC_USER_KEYRING = -4
KEYCTL_SEARCH, KEYCTL_INVALIDATE = 10, 21
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def add_user_key(desc: bytes, payload: bytes) -> int:
    r = _libc.syscall(ctypes.c_long(_NR[0]), ctypes.c_char_p(b"user"), ctypes.c_char_p(desc),
                      ctypes.c_char_p(payload), ctypes.c_size_t(len(payload)),
                      ctypes.c_int(KEY_SPEC_USER_KEYRING))
    assert r > 0, os.strerror(ctypes.get_errno())
    return r


def find_user_key(desc: bytes) -> int:
    return _libc.syscall(ctypes.c_long(_NR[1]), ctypes.c_int(KEYCTL_SEARCH),
                         ctypes.c_int(KEY_SPEC_USER_KEYRING), ctypes.c_char_p(b"user"),
                         ctypes.c_char_p(desc), ctypes.c_int(0))


def drop_key(serial: int) -> None:
    _libc.syscall(ctypes.c_long(_NR[1]), ctypes.c_int(KEYCTL_INVALIDATE),
                  ctypes.c_int(serial))


def test_container_cannot_reach_host_keys(cell, probe_image):
    """Host root's user keyring is out of a default container's reach: it
    cannot find, read, describe, change or link host root's key, and adds
    no key that shows in the host's /proc/keys."""
    desc = b"cell-test-host-key-%d" % os.getpid()
    serial = add_user_key(desc, b"host-secret")
    try:
        a, c = cell()
        probe = f"/probe keys {desc.decode()} {serial}"
        c.update_pod(pod_params("ns_pod", units=[
            sh(probe_image, "k", f"{probe}; echo done; exec sleep 1000")]))
        c.wait_status(lambda s: "done" in probe_lines(c, "k"), timeout=30)
        # The unit itself, then a command exec'd into it.
        out, err, code = c.exec("k", ["/bin/sh", "-c", probe]).collect(timeout=30)
        for text in (c.logs("k").decode(), out.decode()):
            got = dict(line.partition(" ")[::2] for line in text.splitlines())
            got.pop("done", None)
            assert set(got) >= {"get-user-keyring", "search", "read", "describe", "update",
                                "link", "add-session", "add-user"}, (got, err)
            for what, res in got.items():
                assert not res.startswith("ok"), (what, res, got)
        with open("/proc/keys") as f:
            keys = f.read()
        assert "ctr-key" not in keys
        buf = ctypes.create_string_buffer(64)
        n = _libc.syscall(ctypes.c_long(_NR[1]), ctypes.c_int(11), ctypes.c_int(serial),
                          buf, ctypes.c_size_t(64))  # KEYCTL_READ
        assert buf.raw[:n] == b"host-secret"
    finally:
        drop_key(serial)
        for left in (b"ctr-key-user",):
            s = find_user_key(left)
            if s > 0:
                drop_key(s)


# ---- a container raising its own cgroup limits ----

def run_dir(d: str, name: str) -> str:
    units = os.path.join(d, "state", "units", name)
    runs = sorted((r for r in os.listdir(units) if r.isdigit()), key=int)
    return os.path.join(units, runs[-1])


def unit_cgroup_files(d: str, name: str) -> dict:
    """The unit's limits as the host sees them, in every hierarchy."""
    with open(os.path.join(run_dir(d, name), "state.json")) as f:
        dirs = json.load(f)["cgroups"]
    got = {}
    for cg in dirs:
        for f in ("memory.limit_in_bytes", "memory.max", "pids.max"):
            p = os.path.join(cg, f)
            if os.path.exists(p):
                with open(p) as fh:
                    got[f] = fh.read().strip()
    return got


def test_container_cannot_raise_its_own_limits(cell, probe_image):
    """The attack: unshare user+mount+cgroup namespaces, mount cgroup v1
    memory and pids (and cgroup2), raise the limits there, then allocate
    more than the unit's 64 MiB. The host-side limits stay, and the
    allocation is OOM-killed."""
    a, c = cell()
    script = ("mkdir -p /tmp; /probe cgroup 1073741824; echo raised; "
              "while [ ! -e /tmp/go ]; do sleep 0.05; done; exec /probe alloc 200")
    c.update_pod(pod_params("ns_pod", restart_policy="Never", units=[
        sh(probe_image, "hog", script,
           resources={"Limits": {"memory": "64Mi"}, "Requests": None})]))
    c.wait_status(lambda s: "raised" in probe_lines(c, "hog"), timeout=60)
    limits = unit_cgroup_files(a.dir, "hog")
    with open(os.path.join(run_dir(a.dir, "hog"), "rootfs", "tmp", "go"), "w"):
        pass
    st = wait_state(c, "hog", "terminated", timeout=60)
    got = probe_lines(c, "hog")
    assert limits.get("memory.limit_in_bytes", limits.get("memory.max")) == str(64 << 20), \
        (limits, got)
    assert "survived" not in got, got
    t = state_of(st, "hog")["terminated"]
    assert (t["reason"], t["exitCode"]) == ("OOMKilled", 137), (t, got)


# ---- a decompression bomb on a small state disk ----

def free_mib(path: str) -> float:
    sv = os.statvfs(path)
    return sv.f_bavail * sv.f_frsize / (1 << 20)


@pytest.fixture
def small_disk(tmp_path):
    """A 96 MiB tmpfs for the agent's state and image cache."""
    d = tmp_path / "small"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(d)], check=True)
    try:
        yield str(d)
    finally:
        unmount_below(str(d))
        subprocess.run(["umount", "-l", str(d)], check=True)


@pytest.mark.parametrize("flat", [False, True])
def test_decompression_bomb_keeps_the_reserve(registry, image, small_disk, flat):
    """A small layer that inflates to 192 MiB on a 96 MiB disk: the pull
    stops at the reserve (never fills the disk, not on any retry), removes
    what it unpacked, and the unit's reason says the image does not fit."""
    bomb = Layer([File("bomb.bin", b"\0" * (192 << 20))])
    assert bomb.size < (1 << 20)
    push(registry, "t/bomb", "v1", Image([busybox_layer(), bomb], config={"Cmd": ["/bin/sh"]}))
    ref = registry.ref("t/bomb", "v1")
    a = start_agent(os.path.join(small_disk, "agent"), "--insecure-registry", registry.host,
                    "--pull-keep-free", "24Mi", env=FAST)
    try:
        c = a.client()
        annotations = ({"pod.elotl.co/image-overlay-rootfs": "false"} if flat else {})
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "b", "exit 0")],
                                annotations=annotations))
        lowest = free_mib(small_disk)
        seen = []
        deadline = time.monotonic() + 60
        # Several back-off retries: each stops at the reserve.
        while time.monotonic() < deadline:
            lowest = min(lowest, free_mib(small_disk))
            st = c.status()
            w = state_of(st, "b").get("waiting", {})
            if "does not fit" in w.get("reason", "") and w["reason"] not in seen[-1:]:
                seen.append(w["reason"])
            if len(seen) >= 1 and a.log().count("does not fit") >= 3:
                break
            time.sleep(0.02)
        assert seen, a.log()[-3000:]
        assert "ErrImagePull" in seen[0] and "reserve" in seen[0], seen
        assert a.log().count("does not fit") >= 3, a.log()[-3000:]
        # Never into the reserve (less the 4 MiB between two looks).
        assert lowest >= 24 - 8, (lowest, seen)
        # What the failed pulls unpacked is gone again.
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        wait_units_gone(a)
        assert free_mib(small_disk) > 96 - 24, free_mib(small_disk)
    finally:
        assert a.stop() == 0, a.log()[-3000:]


# ---- the kubelet's groups, the image's VOLUMEs and StopSignal ----

def test_id_lists_the_primary_group(cell, image):
    """The Kubernetes docs' security-context demo ("Configure a Security
    Context"): `id` prints uid=1000 gid=3000 groups=2000,3000,4000 (the
    fsGroup, the primary group and supplementalGroups; the kernel sorts
    them), as under the kubelet."""
    a, c = cell()
    sc = {"namespaceOptions": None, "runAsUser": 1000, "runAsGroup": 3000,
          "supplementalGroups": [4000], "fsGroup": 2000, "sysctls": []}
    c.update_pod(pod_params("ns_pod", restart_policy="Never", securityContext=sc,
                            units=[sh(image, "id", "id")]))
    wait_state(c, "id", "terminated")
    out = c.logs("id").decode()
    assert "uid=1000 gid=3000 groups=2000,3000,4000" in out, out


def test_image_volumes_and_stop_signal(cell, registry, tmp_path):
    """VOLUME directories exist in the unit (a new one owned by the unit's
    user, one the image has keeps its owner), and stopping the unit sends
    the image's StopSignal."""
    push(registry, "t/vol", "v1", Image(
        [busybox_layer(), Layer([Dir("kept", mode=0o700, uid=7, gid=8)])],
        config={"Cmd": ["/bin/sh"], "User": "1000:1001", "StopSignal": "SIGUSR1",
                "Volumes": {"/data/new": {}, "/kept": {}}}))
    ref = registry.ref("t/vol", "v1")
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    a, c = cell()
    script = ("stat -c '%n %u:%g %a' /data/new /kept; "
              "trap 'echo usr1 > /out/sig; exit 0' USR1; trap 'echo term > /out/sig; exit 1' TERM; "
              "echo ready; while true; do sleep 0.1; done")
    c.update_pod(pod_params(
        "ns_pod", volumes=[{"name": "out", "hostPath": {"path": str(out), "type": "Directory"}}],
        units=[sh(ref, "v", script,
                  volumeMounts=[{"name": "out", "mountPath": "/out"}])]))
    wait_state(c, "v", "running")
    c.wait_status(lambda s: "ready" in c.logs("v").decode(), timeout=30)
    text = c.logs("v").decode()
    assert "/data/new 1000:1001 755" in text, text
    assert "/kept 7:8 700" in text, text
    c.update_pod(pod_params("ns_pod", units=[]))
    wait_units_gone(a)
    assert (out / "sig").read_text() == "usr1\n"


def test_download_keeps_the_reserve(registry, pull, small_disk):
    """A blob larger than the room above the reserve stops downloading at
    the reserve, says so, and leaves no spool behind."""
    push(registry, "t/fat", "v1", Image([Layer([File("r.bin", os.urandom(48 << 20))])]))
    cache = os.path.join(small_disk, "cache")
    rc, out, err = pull(registry, registry.ref("t/fat", "v1"), os.path.join(small_disk, "m"),
                        cache, "--keep-free-mib", "64", mode="--mount")
    assert rc == 1 and "does not fit" in err and "the reserve" in err, err
    assert free_mib(small_disk) > 96 - 8, free_mib(small_disk)
    assert os.listdir(os.path.join(cache, "tmp")) == []


def test_host_path_type_is_checked(cell, image, tmp_path):
    """A hostPath whose type does not match keeps the unit from starting
    with the kubelet's message; DirectoryOrCreate makes the directory."""
    made = tmp_path / "made" / "here"
    a, c = cell()
    c.update_pod(pod_params(
        "ns_pod",
        volumes=[{"name": "s", "hostPath": {"path": str(tmp_path), "type": "Socket"}},
                 {"name": "d", "hostPath": {"path": str(made), "type": "DirectoryOrCreate"}}],
        units=[sh(image, "x", "exec sleep 1000",
                  volumeMounts=[{"name": "s", "mountPath": "/s"}]),
               sh(image, "y", "exec sleep 1000",
                  volumeMounts=[{"name": "d", "mountPath": "/d"}])]))
    st = c.wait_status(lambda s: state_of(s, "x").get("waiting", {}).get("reason", "")
                       .find("hostPath type check failed") >= 0, timeout=30)
    assert f"{tmp_path} is not a socket file, it's a Directory" in \
        state_of(st, "x")["waiting"]["reason"], st
    wait_state(c, "y", "running")
    assert made.is_dir()
