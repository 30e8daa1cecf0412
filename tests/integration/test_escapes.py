# SPDX-License-Identifier: Apache-2.0
"""Container escapes that other runtimes shipped, as real attacks on the
real agent and monitor (issue 27; docs/agent-runtime.md "Security").

Each test is named after the advisory it reproduces and shows the attack
failing: the host file it aims at is unchanged and the unit either does not
start or runs confined. The attacker in a unit is tests/lib/escape-probe.c
(static, built here) or busybox; hostile images are built here
(tests/pylib/images.py). subPath, CVE-2021-30465 and the fsGroup walk race
have tests of their own elsewhere.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest

from images import File, Image, Layer, Symlink, busybox_entries, busybox_layer, push
from test_agent_pod import FAST, cell, state_of, units_by_name, wait_state  # noqa: F401
from wire import pod_params, unit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("CELL_BUILD") or os.path.join(ROOT, "build")
BB = "/bin/busybox"
CORE_PATTERN = "/proc/sys/kernel/core_pattern"


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module")
def probe_bin(tmp_path_factory) -> bytes:
    d = tmp_path_factory.mktemp("escprobe")
    exe = str(d / "escape-probe")
    subprocess.run(["gcc", "-static", "-O2", "-o", exe,
                    os.path.join(ROOT, "tests/lib/escape-probe.c")], check=True)
    with open(exe, "rb") as f:
        return f.read()


@pytest.fixture
def image(registry, probe_bin) -> str:
    push(registry, "t/esc", "v1",
         Image([busybox_layer(), Layer([File("probe", probe_bin, mode=0o755)])],
               config={"Cmd": ["/bin/sh"]}))
    return registry.ref("t/esc", "v1")


def logs_until(c, name: str, marker: bytes, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    out = b""
    while time.monotonic() < deadline:
        try:
            out = c.logs(name)
        except Exception:  # no run yet
            out = b""
        if marker in out:
            return out.decode(errors="replace")
        time.sleep(0.2)
    raise AssertionError(f"no {marker!r} in {name}'s log: {out!r} status {c.status()}")


def waiting_reason(c, name: str, timeout: float = 30) -> str:
    def settled(u):
        w = u["state"]["waiting"]
        return (w.get("reason") or "") not in ("", "ContainerCreating")
    st = wait_state(c, name, "waiting", timeout=timeout, pred=settled)
    return state_of(st, name)["waiting"]["reason"]


# ---------------------------------------------------------------------------
# CVE-2019-5736 (runc): a unit opens /proc/PID/exe of the runtime's process
# that joins it for an exec, and writes the host binary through it.

EXECS = 40  # exec calls raced; each leaves a window of ~1000 failed execve


def test_cve_2019_5736_exec_proc_exe(cell, image, tmp_path):
    # The agent runs a copy of cell-monitor, so that an attack that wins
    # overwrites the copy, never the build.
    mon = str(tmp_path / "cell-monitor")
    shutil.copy2(os.path.join(BUILD, "bin", "cell-monitor"), mon)
    before = digest(mon)
    st = os.stat(mon)
    a, c = cell(extra=("--monitor-bin", mon))
    # A PATH of 1000 missing directories before /bin: each exec's child
    # spends milliseconds in execve attempts as cell-monitor, with the
    # unit's credentials (the widest window the unit can make).
    path = ":".join(f"/nx{i}" for i in range(1000)) + ":/bin"
    # The attacker races for up to 30 s, until the execs are done.
    attacker = unit("victim", image, command=["/probe", "exe-race", "30",
                                              str(st.st_dev), str(st.st_ino), "/race-done"],
                    env=[{"name": "PATH", "value": path}])
    c.update_pod(pod_params("ns_pod", units=[attacker], terminationGracePeriodSeconds=0))
    logs_until(c, "victim", b"ready\n")
    ok = 0
    for _ in range(EXECS):
        s = c.exec("victim", ["busybox", "true"])
        try:
            out, err, code = s.collect()
        finally:
            s.close()
        ok += code == 0
    assert ok == EXECS, (out, err, code)
    s = c.exec("victim", ["busybox", "touch", "/race-done"])
    try:
        out, err, code = s.collect()
    finally:
        s.close()
    assert code == 0, (out, err, code)
    out = logs_until(c, "victim", b"tries ", timeout=60)
    line = [ln for ln in out.splitlines() if ln.startswith("tries ")][0]
    f = line.split()
    tries, opened, host, wrote = int(f[1]), int(f[3]), int(f[5]), int(f[7])
    assert tries > 10000, line
    # The exec'd children are found and their exe opened only once they
    # are the workload's; cell-monitor is never reached.
    assert host == 0 and wrote == 0, out
    assert digest(mon) == before


# ---------------------------------------------------------------------------
# CVE-2024-21626 (runc): a working directory through a descriptor the
# runtime leaked, /proc/self/fd/N, puts the workload in a host directory.

FDS = range(3, 21)


def test_cve_2024_21626_workdir_proc_self_fd(cell, image):
    a, c = cell()
    units = [unit(f"fd{n}", image, workingDir=f"/proc/self/fd/{n}",
                  command=["/bin/sh", "-c", "echo cwd=$(pwd -P); ls /; exec sleep 1000"])
             for n in FDS]
    units.append(unit("plain", image, command=[
        "/bin/sh", "-c", "ls -l /proc/self/fd; echo listed; exec sleep 1000"]))
    c.update_pod(pod_params("ns_pod", units=units, terminationGracePeriodSeconds=0))
    # The plain unit has 0, 1, 2 and the descriptor ls reads /proc/self/fd
    # with: nothing of the host's.
    out = logs_until(c, "plain", b"listed\n")
    fds = [ln.split()[8] for ln in out.splitlines() if ln[:2] in ("lr", "lw", "l-")]
    assert fds[:3] == ["0", "1", "2"] and set(fds) <= {"0", "1", "2", "3"}, out
    assert "-> /dev/null" in out and out.count("-> /") == 1, out
    # An exec into it: the same.
    o, e, code = c.exec("plain", [BB, "ls", "/proc/self/fd"]).collect()
    assert code == 0 and sorted(o.decode().split()) == ["0", "1", "2", "3"], (o, e)
    # Each /proc/self/fd/N working directory: the unit does not start (or,
    # had it started, its cwd would be inside the container).
    for n in FDS:
        name = f"fd{n}"
        r = waiting_reason(c, name)
        assert "working directory" in r, (name, r)
        u = units_by_name(c.status())[name]
        assert "running" not in u["state"], u
        try:
            log = c.logs(name)
        except Exception:
            log = b""
        assert b"cwd=" not in log, (name, log)


# ---------------------------------------------------------------------------
# CVE-2022-0811 (cri-o, "cr8escape"): a sysctl value that smuggles a second
# key=value past the check, to set kernel.core_pattern on the host.

SMUGGLED = [
    ("kernel.shm_rmid_forced", "1+kernel.core_pattern=|/evil"),
    ("kernel.shm_rmid_forced", "1 kernel.core_pattern=|/evil"),
    ("kernel.shm_rmid_forced", "1\nkernel.core_pattern=|/evil"),
    ("kernel.shm_rmid_forced=1+kernel.core_pattern", "|/evil"),
    ("kernel.shm_rmid_forced+kernel.core_pattern", "|/evil"),
    ("kernel.shm_rmid_forced/../core_pattern", "|/evil"),
    ("kernel.core_pattern", "|/evil"),
]


@pytest.mark.parametrize("name,value", SMUGGLED)
def test_cve_2022_0811_sysctl_smuggles_a_key(cell, image, name, value):
    before = read(CORE_PATTERN), read("/proc/sys/kernel/shm_rmid_forced")
    a, c = cell()
    sc = {"runAsUser": None, "runAsGroup": None, "supplementalGroups": [],
          "sysctls": [{"name": name, "value": value}]}
    c.update_pod(pod_params("ns_pod", units=[unit("u", image, command=[
        BB, "sleep", "1000"])], securityContext=sc, terminationGracePeriodSeconds=0))
    r = waiting_reason(c, "u")
    assert "sysctl" in r.lower(), r
    assert "running" not in state_of(c.status(), "u")
    assert (read(CORE_PATTERN), read("/proc/sys/kernel/shm_rmid_forced")) == before


# ---------------------------------------------------------------------------
# runc's CVE-2025-31133 (masks bound from a /dev/null the container
# replaced), CVE-2025-52565 (/dev/console), CVE-2025-52881 (the runtime's
# writes into /proc sent elsewhere): an image whose /dev entries are links
# to kernel files, an image whose /dev is one, and units that put their
# volumes over /proc.

CHECK = r"""
echo "null $(stat -L -c '%F %t:%T' /dev/null)"
echo "console $(stat -c '%F' /dev/console 2>/dev/null || echo absent)"
echo "timer_list $(stat -L -c '%F %t:%T' /proc/timer_list)"
echo "keys $(wc -c < /proc/keys)"
(echo '|/evil' > /proc/sys/kernel/core_pattern) 2>/dev/null && echo "core_pattern written" || echo "core_pattern refused"
(echo 1 > /proc/sys/kernel/shm_rmid_forced) 2>/dev/null && echo "sys written" || echo "sys refused"
echo x > /dev/null && echo "null writable"
echo done
exec sleep 1000
"""


def hostile_dev_image(registry, tag: str, entries) -> str:
    push(registry, "t/hostile", tag,
         Image([Layer(busybox_entries() + list(entries))], config={"Cmd": ["/bin/sh"]}))
    return registry.ref("t/hostile", tag)


@pytest.mark.parametrize("shape", ["dev-entries", "dev-dir", "proc-link"])
def test_cve_2025_31133_52565_hostile_dev_links(cell, registry, shape):
    if shape == "dev-entries":
        entries = [Symlink("dev/null", CORE_PATTERN), Symlink("dev/console", CORE_PATTERN),
                   Symlink("dev/ptmx", CORE_PATTERN), Symlink("dev/shm", "/proc/sys/kernel")]
    elif shape == "dev-dir":
        entries = [Symlink("dev", "/proc/sys/kernel")]
    else:
        entries = [Symlink("proc", "/dev/shm")]
    img = hostile_dev_image(registry, shape, entries)
    before = read(CORE_PATTERN)
    a, c = cell()
    c.update_pod(pod_params("ns_pod", units=[unit("u", img, command=["/bin/sh", "-c", CHECK])],
                            terminationGracePeriodSeconds=0))
    if shape == "proc-link":
        # /proc a link to a directory not there yet: no procfs is mounted
        # anywhere the link could lead; the unit does not start.
        r = waiting_reason(c, "u")
        assert "mount /proc" in r, r
        assert read(CORE_PATTERN) == before
        return
    out = logs_until(c, "u", b"done\n")
    assert "null character special file 1:3" in out, out
    assert "console absent" in out, out
    # /proc/kcore and /proc/sysrq-trigger are not on every kernel (not on
    # this test host's): /proc/timer_list and /proc/keys are masked too.
    assert "timer_list character special file 1:3" in out and "keys 0" in out, out
    assert "core_pattern refused" in out and "sys refused" in out, out
    assert read(CORE_PATTERN) == before


PROC_MOUNTS = ["/proc/sys", "/proc/acpi", "/proc/timer_list"]


@pytest.mark.parametrize("target", PROC_MOUNTS)
def test_cve_2025_31133_volume_over_a_masked_path(cell, image, target):
    """A volume the unit shares (emptyDir) mounted where a mask or a
    read-only path goes: the mask would land on the volume and the
    kernel file under it stay as the volume left it; refused."""
    if not os.path.exists(target):
        pytest.fail(f"{target} missing on this host: pick another masked path")
    before = read(CORE_PATTERN)
    a, c = cell()
    kind = "file" if os.path.isfile(target) else "dir"
    vols = [{"name": "v", "emptyDir": {}}]
    mnt = {"name": "v", "mountPath": target}
    if kind == "file":
        vols = [{"name": "v", "hostPath": {"path": "/dev/null"}}]
    c.update_pod(pod_params("ns_pod", units=[unit("u", image, command=[BB, "sleep", "1000"],
                                                  volumeMounts=[mnt])],
                            volumes=vols, terminationGracePeriodSeconds=0))
    r = waiting_reason(c, "u")
    assert "is not the kernel's" in r, r
    assert read(CORE_PATTERN) == before


RESTARTS = 5


def test_cve_2025_52881_proc_write_redirected(cell, image):
    """The runtime writes the unit's oom_score_adj; a unit that mounts a
    volume over /proc/1 (its own init's directory) and leaves a link named
    oom_score_adj there tries to send that write (as root, before the
    unit's credentials) to a file of its choice, over RESTARTS starts."""
    # A 10 ms back-off unit: the 5 restarts wait 0.1-1.6 s (15.5 s at 50).
    a, c = cell(env={"CELL_AGENT_BACKOFF_UNIT_MS": "10"})
    script = ("ln -sf /v/witness /proc/1/oom_score_adj 2>/dev/null; "
              "echo \"witness $(cat /v/witness 2>/dev/null || echo none)\"; "
              "echo \"n $(ls /v/runs | wc -l)\"; mkdir -p /v/runs; mktemp -p /v/runs >/dev/null; "
              "sleep 0.2")
    c.update_pod(pod_params(
        "ns_pod",
        units=[unit("u", image, command=["/bin/sh", "-c", script],
                    volumeMounts=[{"name": "v", "mountPath": "/proc/1"},
                                  {"name": "v", "mountPath": "/v"}])],
        volumes=[{"name": "v", "emptyDir": {}}], terminationGracePeriodSeconds=0))
    c.wait_status(lambda s: units_by_name(s).get("u", {}).get("restartCount", 0) >= RESTARTS,
                  timeout=90)
    out = c.logs("u").decode()
    assert f"n {RESTARTS - 1}" in out or "n " in out, out
    assert "witness none" in out and "witness 0" not in out, out


# ---------------------------------------------------------------------------
# Localhost seccomp profiles (issue 27): the profile name is resolved
# beneath --seccomp-profile-dir by descriptor; '..' and links out of it are
# refused, and the unit never starts unconfined or with the outside file.

def test_seccomp_localhost_dotdot_and_link_out_of_root(cell, image, tmp_path):
    d = tmp_path / "profiles"
    d.mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"defaultAction": "SCMP_ACT_ALLOW"}))
    (d / "inside.json").write_text(json.dumps({"defaultAction": "SCMP_ACT_ALLOW"}))
    os.symlink(str(outside), str(d / "abs.json"))
    os.symlink("../outside.json", str(d / "up.json"))
    a, c = cell(extra=("--seccomp-profile-dir", str(d)))
    cases = {"dotdot": "../outside.json", "abs": "abs.json", "up": "up.json",
             "ok": "inside.json"}
    units = [unit(n, image, command=[BB, "sleep", "1000"], securityContext={
        "seccompProfile": {"type": "Localhost", "localhostProfile": p}})
        for n, p in cases.items()]
    c.update_pod(pod_params("ns_pod", units=units, terminationGracePeriodSeconds=0))
    wait_state(c, "ok", "running", timeout=60)
    for n in ("dotdot", "abs", "up"):
        r = waiting_reason(c, n)
        assert "seccomp" in r.lower() and ("'..'" in r or "outside the root" in r), (n, r)
        assert "running" not in state_of(c.status(), n)
