# SPDX-License-Identifier: Apache-2.0
"""cell-monitor against real namespaces, mounts and cgroups (as root).

Every test builds units from a static-busybox rootfs and drives them through
the same client calls the agent uses (``cell-monitor start|stop|state|exec``
wrap runtime_start, runtime_stop, runtime_read_state and runtime_exec).
Unit cgroups nest below this process's own cgroups (CELL_CGROUP_NEST), so
the suite works on v1, v2 and hybrid hosts without touching anything else.

The binary is $CELL_MONITOR, or $CELL_BUILD/bin/cell-monitor.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from typing import Callable, Dict, List, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CELL_BUILD = os.environ.get("CELL_BUILD") or os.path.join(ROOT, "build")
MONITOR = os.environ.get("CELL_MONITOR") or os.path.join(CELL_BUILD, "bin", "cell-monitor")
BUSYBOX = "/bin/busybox"

# Docker's (and the CRI's) default set.
DEFAULT_CAPS = ("CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD NET_RAW SETGID SETUID SETFCAP "
                "SETPCAP NET_BIND_SERVICE SYS_CHROOT KILL AUDIT_WRITE").split()
DEFAULT_CAPEFF = 0xA80425FB
CAP_NET_BIND_SERVICE = 1 << 10
TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z"
RECORD = re.compile(rf"^({TS}) (stdout|stderr) ([FP]) (.*)$")
ENV = dict(os.environ, CELL_CGROUP_NEST="1")
ENV.pop("CELL_CGROUP_ROOT", None)


# `cell-monitor exec` ends its life in the unit's mount namespace, whose
# /proc belongs to another PID namespace: LeakSanitizer cannot stop the world
# there and spins. Only matters for sanitizer builds.
EXEC_ENV = dict(ENV, ASAN_OPTIONS=(ENV.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":"))


def run(*args: str, timeout: float = 30, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    env = env or (EXEC_ENV if args and args[0] == "exec" else ENV)
    return subprocess.run([MONITOR, *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout, stdin=subprocess.DEVNULL)


def wait_for(pred: Callable[[], object], timeout: float = 10, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def procs_mentioning(text: str) -> List[int]:
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    found.append(int(p))
        except OSError:
            pass
    return found


def make_rootfs(path: str) -> str:
    os.makedirs(os.path.join(path, "bin"))
    shutil.copy2(BUSYBOX, os.path.join(path, "bin", "busybox"))
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    for a in applets:
        if a != "busybox":
            os.symlink("busybox", os.path.join(path, "bin", a))
    for d in ("etc", "tmp", "root", "proc", "sys", "dev"):
        os.makedirs(os.path.join(path, d), exist_ok=True)
    os.chmod(os.path.join(path, "tmp"), 0o1777)
    with open(os.path.join(path, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/tmp:/bin/sh\n")
    with open(os.path.join(path, "etc", "group"), "w") as f:
        f.write("root:x:0:\nwheel:x:10:\nuucp:x:20:\nuser:x:1000:\n")
    return path


class Unit:
    def __init__(self, d: str, cfg: dict):
        self.dir = d
        self.cfg = cfg
        self.log_path = cfg["log"]["path"]
        self.env: Optional[dict] = None  # the monitor's environment

    def write(self) -> None:
        with open(os.path.join(self.dir, "run.json"), "w") as f:
            json.dump(self.cfg, f)

    def start(self, check: bool = True) -> subprocess.CompletedProcess:
        self.write()
        r = run("start", self.dir, env=self.env)
        if check and r.returncode != 0:
            pytest.fail(f"start failed: {r.stderr}")
        return r

    def state(self) -> dict:
        r = run("state", self.dir)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def stop(self, grace: Optional[int] = None) -> None:
        args = ["stop", self.dir] if grace is None else ["stop", "--grace", str(grace), self.dir]
        r = run(*args)
        assert r.returncode == 0, r.stderr

    def wait_exit(self, timeout: float = 15) -> dict:
        p = os.path.join(self.dir, "exit.json")
        wait_for(lambda: os.path.exists(p), timeout, "exit.json")
        st = self.state()
        wait_for(lambda: not alive(st["monitorPid"]) if st["monitorPid"] else True,
                 5, "the monitor to exit")
        return st

    def log(self) -> str:
        try:
            with open(self.log_path) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def records(self) -> Dict[str, List[tuple]]:
        out: Dict[str, List[tuple]] = {"stdout": [], "stderr": []}
        for line in self.log().splitlines():
            m = RECORD.match(line)
            assert m, f"not a CRI record: {line!r}"
            out[m.group(2)].append((m.group(3), m.group(4)))
        return out

    def text(self) -> str:
        """The unit's output as the agent would serve it."""
        r = run("logs", self.log_path)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def wait_output(self, needle: str, timeout: float = 10) -> None:
        wait_for(lambda: needle in self.text(), timeout, f"{needle!r} in the log")

    def cgroup_pids(self) -> List[int]:
        st = self.state()
        # The unit's processes are in its "ctr" child, below the cgroup
        # that holds its limits (runtime/cgroup.c).
        with open(os.path.join(st["cgroups"][0], "ctr", "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]


@pytest.fixture(scope="module")
def monitor_bin() -> str:
    if not (os.path.isfile(MONITOR) and os.access(MONITOR, os.X_OK)):
        pytest.fail(f"cell-monitor not found at {MONITOR} (build with make; CELL_BUILD or "
                    "CELL_MONITOR selects it)", pytrace=False)
    if not os.path.exists(BUSYBOX):
        pytest.fail("busybox-static is needed at /bin/busybox", pytrace=False)
    return MONITOR


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory) -> str:
    return make_rootfs(str(tmp_path_factory.mktemp("rootfs") / "r"))


@pytest.fixture
def units(monitor_bin, rootfs, tmp_path):
    made: List[Unit] = []
    parent = f"cell-test-{os.getpid()}"

    def make(*args: str, rootfs_path: Optional[str] = None, **over) -> Unit:
        name = f"u{len(made)}"
        d = tmp_path / name
        d.mkdir()
        cfg = {
            "id": name, "rootfs": rootfs_path or rootfs, "args": list(args),
            "env": ["PATH=/bin", "HOME=/root"], "hostname": "unit-host",
            "capabilities": DEFAULT_CAPS,
            "cgroup": {"path": f"{parent}/{name}"},
            "log": {"path": str(d / "log" / "0.log")}, "graceSeconds": 10,
        }
        for k, v in over.items():
            if isinstance(v, dict) and isinstance(cfg.get(k), dict):
                cfg[k] = {**cfg[k], **v}
            else:
                cfg[k] = v
        u = Unit(str(d), cfg)
        made.append(u)
        return u

    yield make
    parents = set()
    for u in made:
        if not os.path.exists(os.path.join(u.dir, "state.json")):
            continue
        st = u.state()
        parents.update(os.path.dirname(c) for c in st.get("cgroups", []))
        if st.get("running"):
            run("stop", "--grace", "0", u.dir)
            end = time.monotonic() + 5
            while alive(st["monitorPid"]) and time.monotonic() < end:
                time.sleep(0.02)
        if alive(st["monitorPid"]):
            os.kill(st["monitorPid"], signal.SIGKILL)
            time.sleep(0.1)
        run("cleanup", u.dir)
    for p in parents:
        try:
            os.rmdir(p)
        except OSError:
            pass


def cgroup_file(st: dict, *names: str) -> Optional[str]:
    for d in st["cgroups"]:
        for n in names:
            p = os.path.join(d, n)
            if os.path.exists(p):
                with open(p) as f:
                    return f.read().strip()
    return None


# ---- output and exit status ----

def test_output_goes_to_the_cri_log(units):
    u = units("sh", "-c", "echo out1; echo err1 >&2; echo out2; printf 'no newline'")
    u.start()
    st = u.wait_exit()
    assert (st["exitCode"], st["reason"]) == (0, "Completed")
    recs = u.records()
    assert recs["stdout"] == [("F", "out1"), ("F", "out2"), ("P", "no newline")]
    assert recs["stderr"] == [("F", "err1")]
    assert sorted(u.text().splitlines()) == ["err1", "no newline", "out1", "out2"]
    assert st["startedAt"] <= st["finishedAt"]


def test_long_lines_and_lots_of_output(units):
    # 40000 x's then a newline; then 20000 lines: nothing may be lost.
    u = units("sh", "-c", "head -c 40000 /dev/zero | tr '\\0' x; echo; seq 1 20000")
    u.start()
    u.wait_exit()
    recs = u.records()["stdout"]
    # How the line arrives in reads decides where the P records fall; each
    # is at most 16 KiB and the first F completes the line.
    first_f = [t for t, _ in recs].index("F")
    assert first_f >= 2 and all(len(x) <= 16384 for _, x in recs)
    assert "".join(x for _, x in recs[:first_f + 1]) == "x" * 40000
    lines = u.text().splitlines()
    assert lines[0] == "x" * 40000
    assert lines[1:] == [str(i) for i in range(1, 20001)]


def test_exit_code_3_is_an_error(units):
    u = units("sh", "-c", "exit 3")
    u.start()
    st = u.wait_exit()
    assert (st["exitCode"], st["reason"], st["signal"]) == (3, "Error", 0)


def test_killed_by_sigkill_is_137(units):
    u = units("sleep", "100")
    u.start()
    os.kill(u.state()["containerPid"], signal.SIGKILL)
    st = u.wait_exit()
    assert (st["exitCode"], st["signal"], st["reason"]) == (137, 9, "Error")


@pytest.mark.parametrize("args, message", [
    (["/bin/nope"], "exec /bin/nope: No such file or directory"),
    (["nope"], "exec nope: executable file not found in $PATH"),
])
def test_start_failure_is_reported_and_leaves_nothing(units, args, message):
    u = units(*args)
    r = u.start(check=False)
    assert r.returncode != 0
    assert message in r.stderr
    with open(os.path.join(u.dir, "exit.json")) as f:
        ex = json.load(f)
    assert (ex["reason"], ex["exitCode"], ex["message"]) == ("StartError", 128, message)
    assert not os.path.exists(os.path.join(u.dir, "state.json"))
    wait_for(lambda: not procs_mentioning(u.dir), 5, "no monitor left behind")


def test_setup_failure_in_a_mount_is_reported(units, tmp_path):
    u = units("true", mounts=[{"source": str(tmp_path / "missing"), "target": "/data",
                                "type": "bind"}])
    r = u.start(check=False)
    assert r.returncode != 0
    assert f"bind {tmp_path}/missing: No such file or directory" in r.stderr


def test_a_unit_dir_runs_once(units):
    u = units("sleep", "100")
    u.start()
    r = run("start", u.dir)
    assert r.returncode != 0 and "already has a monitor" in r.stderr
    u.stop(0)
    u.wait_exit()
    r = run("start", u.dir)
    assert r.returncode != 0 and "has already run" in r.stderr


# ---- stop ----

def test_stop_sigterm_honoured(units):
    u = units("sh", "-c", "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done")
    u.start()
    u.wait_output("ready")
    t0 = time.monotonic()
    u.stop()
    st = u.wait_exit()
    assert time.monotonic() - t0 < 3
    assert (st["exitCode"], st["reason"]) == (42, "Error")


def test_stop_sigterm_ignored_kills_after_grace(units):
    u = units("sh", "-c", "trap '' TERM; echo ready; sleep 100")
    u.start()
    u.wait_output("ready")
    t0 = time.monotonic()
    u.stop(grace=2)
    st = u.wait_exit()
    took = time.monotonic() - t0
    assert 1.8 <= took <= 6, took
    assert (st["exitCode"], st["signal"]) == (137, 9)


def test_second_stop_escalates_at_once(units):
    u = units("sh", "-c", "trap '' TERM; echo ready; sleep 100")
    u.start()
    u.wait_output("ready")
    t0 = time.monotonic()
    u.stop(grace=30)
    time.sleep(0.2)
    u.stop(grace=30)
    st = u.wait_exit()
    assert time.monotonic() - t0 < 3
    assert st["exitCode"] == 137


def test_the_whole_process_tree_dies(units):
    u = units("sh", "-c", "sleep 1000 & sleep 1000 & (sleep 1000 &) ; echo ready; wait")
    u.start()
    u.wait_output("ready")
    pids = wait_for(lambda: (p := u.cgroup_pids()) and len(p) >= 4 and p, 5, "4 processes")
    st = u.state()
    u.stop(grace=1)
    u.wait_exit()
    for p in pids:
        assert not alive(p), f"process {p} survived"
    for d in st["cgroups"]:
        assert not os.path.exists(d), f"{d} left behind"


# ---- what the container sees ----

VIEW = ("echo pid=$$; hostname; ls /dev | tr '\\n' ' '; echo; "
        "grep ' /sys ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1; "
        "touch /sys/x 2>/dev/null || echo sys-ro; "
        "[ -s /proc/kcore ] || echo kcore-masked; "
        "echo ids=$(id -u) $(id -g) $(id -G); grep -E 'CapEff|NoNewPrivs' /proc/self/status")


def view(u: Unit) -> Dict[str, str]:
    u.start()
    st = u.wait_exit()
    assert st["exitCode"] == 0, u.text()
    lines = u.text().splitlines()
    caps = {l.split(":")[0]: l.split(":")[1].strip() for l in lines if ":" in l}
    return {"pid": lines[0], "hostname": lines[1], "dev": lines[2].split(), "sys": lines[3],
            "sysro": lines[4], "kcore": lines[5], "ids": lines[6],
            "capeff": caps["CapEff"], "nnp": caps["NoNewPrivs"]}


def test_container_view_as_root(units):
    v = view(units("sh", "-c", VIEW))
    assert v["pid"] == "pid=1"
    assert v["hostname"] == "unit-host"
    assert sorted(v["dev"]) == sorted("fd full mqueue null ptmx pts random shm stderr stdin "
                                      "stdout tty urandom zero".split())
    assert (v["sys"], v["sysro"], v["kcore"]) == ("ro", "sys-ro", "kcore-masked")
    assert v["ids"] == "ids=0 0 0"
    assert int(v["capeff"], 16) == DEFAULT_CAPEFF
    assert v["nnp"] == "0"


def test_container_view_as_user(units):
    v = view(units("sh", "-c", VIEW, uid=1000, gid=1000, groups=[10, 20],
                   noNewPrivileges=True))
    assert v["ids"].split("=")[1].split()[:2] == ["1000", "1000"]
    assert sorted(v["ids"].split()[2:]) == ["10", "1000", "20"]
    assert int(v["capeff"], 16) == 0  # a non-root uid loses them at exec
    assert v["nnp"] == "1"


def test_ambient_capabilities_for_a_user(units):
    v = view(units("sh", "-c", VIEW, uid=1000, gid=1000, capabilities=["NET_BIND_SERVICE"],
                   ambientCapabilities=["NET_BIND_SERVICE"], noNewPrivileges=True))
    assert int(v["capeff"], 16) == CAP_NET_BIND_SERVICE


def test_dropped_capability_is_gone(units):
    caps = [c for c in DEFAULT_CAPS if c != "CHOWN"] + ["NET_ADMIN"]
    v = view(units("sh", "-c", VIEW, capabilities=caps))
    assert int(v["capeff"], 16) == (DEFAULT_CAPEFF & ~1) | (1 << 12)


def test_mounts_land_inside_the_rootfs(units, tmp_path, rootfs):
    own = make_rootfs(str(tmp_path / "own-rootfs"))
    os.symlink("/real", os.path.join(own, "link"))  # absolute: must stay inside
    os.makedirs(os.path.join(own, "real"))
    host = tmp_path / "hostdir"
    host.mkdir()
    (host / "hello").write_text("from the host\n")
    u = units("sh", "-c",
              "cat /data/hello; touch /data/x 2>/dev/null || echo data-ro; "
              "echo w > /scratch/f && echo scratch-rw; "
              "grep -c ' /real/sub tmpfs ' /proc/mounts; "
              "touch /newfile 2>/dev/null || echo root-ro",
              rootfs_path=own, readonlyRootfs=True,
              mounts=[{"source": str(host), "target": "/data", "type": "bind",
                       "options": ["rbind", "ro"]},
                      {"target": "/scratch", "type": "tmpfs", "data": "size=1m"},
                      {"target": "/link/sub", "type": "tmpfs"}])
    u.start()
    st = u.wait_exit()
    assert st["exitCode"] == 0, u.text()
    assert u.text().splitlines() == ["from the host", "data-ro", "scratch-rw", "1", "root-ro"]
    assert not (host / "x").exists()
    assert not os.path.exists("/real")


def test_network_namespace_is_joined(units):
    name = f"cell-test-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        u = units("sh", "-c", "ls /sys/class/net", namespaces={"network": f"/run/netns/{name}"})
        u.start()
        u.wait_exit()
        assert u.text().split() == ["lo"]
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


# ---- cgroups ----

def test_limits_are_in_the_cgroup(units):
    u = units("sleep", "100", cgroup={"memoryLimit": 64 << 20, "cpuQuota": 500, "pidsLimit": 50})
    u.start()
    st = u.state()
    assert cgroup_file(st, "memory.limit_in_bytes", "memory.max") == str(64 << 20)
    assert cgroup_file(st, "cpu.cfs_quota_us") in ("50000", None)
    assert cgroup_file(st, "cpu.max") in ("50000 100000", None)
    assert cgroup_file(st, "cpu.cfs_quota_us", "cpu.max") is not None
    assert cgroup_file(st, "pids.max") == "50"
    assert st["containerPid"] in u.cgroup_pids()


def test_pids_limit_is_enforced(units):
    u = units("sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 5 & done; echo done",
              cgroup={"pidsLimit": 4})
    u.start()
    st = u.wait_exit()
    # busybox sh gives up at the first fork that fails.
    assert "can't fork: Resource temporarily unavailable" in u.text()
    assert "done" not in u.text() and st["exitCode"] != 0


def test_oom_kill_is_reported(units):
    u = units("sh", "-c", "echo filling; tail /dev/zero", cgroup={"memoryLimit": 32 << 20})
    u.start()
    st = u.wait_exit(timeout=30)
    assert (st["reason"], st["oomKilled"], st["exitCode"]) == ("OOMKilled", True, 137)


# ---- the agent goes away, the monitor stays ----

def test_monitor_survives_its_parent_being_killed(units):
    u = units("sh", "-c", "echo alive; sleep 100")
    u.write()
    agent = subprocess.Popen(["sh", "-c", f"'{MONITOR}' start '{u.dir}'; sleep 100"],
                             env=ENV, start_new_session=True, stdout=subprocess.DEVNULL)
    wait_for(lambda: os.path.exists(os.path.join(u.dir, "state.json")), 10, "state.json")
    os.killpg(agent.pid, signal.SIGKILL)  # the whole "agent" process group
    agent.wait()
    time.sleep(0.2)
    st = u.state()  # what a restarted agent reads: re-adoption
    assert st["running"] and alive(st["monitorPid"]) and alive(st["containerPid"])
    u.wait_output("alive")
    r = run("start", u.dir)
    assert r.returncode != 0, "started twice"
    u.stop(0)
    st = u.wait_exit()
    assert st["exitCode"] == 137


def test_killed_monitor_takes_its_unit_along(units):
    u = units("sleep", "100")
    u.start()
    st = u.state()
    os.kill(st["monitorPid"], signal.SIGKILL)
    wait_for(lambda: not alive(st["containerPid"]), 5, "the container to die")
    wait_for(lambda: not alive(st["monitorPid"]), 5, "the monitor to be reaped")
    lost = u.state()
    assert lost["exited"] and lost["monitorLost"] and lost["exitCode"] == 137
    r = run("cleanup", u.dir)
    assert r.returncode == 0, r.stderr
    for d in st["cgroups"]:
        assert not os.path.exists(d)


# ---- exec ----

def test_exec_runs_inside_the_unit(units):
    u = units("sh", "-c", "echo marker > /tmp/mark; echo ready; sleep 100", uid=1000, gid=1000)
    u.start()
    u.wait_output("ready")
    r = run("exec", "--env", "EXTRA=yes", u.dir, "--",
            "sh", "-c", "cat /tmp/mark; hostname; tr '\\0' ' ' < /proc/1/cmdline; echo; "
                        "id -u; echo $EXTRA $HOME; cat /proc/self/cgroup | grep -c cell-test")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "marker"
    assert out[1] == "unit-host"
    assert out[2] == "sleep 100 "  # same PID namespace: its PID 1 (sh exec'd sleep)
    assert out[3] == "1000"
    assert out[4] == "yes /root"
    assert int(out[5]) >= 1  # in the unit's cgroups
    assert run("exec", u.dir, "--", "sh", "-c", "exit 5").returncode == 5
    r = run("exec", u.dir, "--", "nope")
    assert r.returncode == 127 and "exec nope: executable file not found in $PATH" in r.stderr


def test_exec_into_a_stopped_unit_fails(units):
    u = units("true")
    u.start()
    u.wait_exit()
    r = run("exec", u.dir, "--", "true")
    assert r.returncode != 0 and "not running" in r.stderr


# ---- logs ----

def test_log_rotation_keeps_one_old_file(units):
    u = units("sh", "-c", "seq 1 300", log={"maxBytes": 2000})
    u.start()
    u.wait_exit()
    old = u.log_path + ".1"
    assert os.path.exists(old)
    assert os.path.getsize(u.log_path) <= 2000 and os.path.getsize(old) <= 2000
    r = run("logs", "--rotated", "--tail", "2", u.log_path)
    assert r.stdout == "299\n300\n"
    r = run("logs", "--rotated", u.log_path)
    nums = [int(x) for x in r.stdout.split()]
    assert nums == list(range(nums[0], 301))  # contiguous, newest kept


# ---- other layouts ----

def test_pure_v2_code_path(units):
    """On a hybrid host the cgroup2 mount alone stands in for a pure v2 host
    (there usually without controllers: membership and cgroup.kill only)."""
    v2_root = next((r for r in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
                    if os.path.exists(os.path.join(r, "cgroup.controllers"))), None)
    assert v2_root, "this host has no cgroup2 mount"
    env = dict(ENV, CELL_CGROUP_ROOT=v2_root)
    u = units("sh", "-c", "sleep 1000 & echo ready; wait")
    u.env = env
    u.start()
    u.wait_output("ready")
    st = u.state()
    assert len(st["cgroups"]) == 1 and st["cgroups"][0].startswith(v2_root + "/")
    assert len(u.cgroup_pids()) == 2
    u.stop(grace=0)
    u.wait_exit()
    assert not os.path.exists(st["cgroups"][0])
    with open(os.path.join(v2_root, "cgroup.controllers")) as f:
        controllers = f.read().split()
    if "memory" not in controllers:
        limited = units("true", cgroup={"memoryLimit": 1 << 20})
        limited.env = env
        r = limited.start(check=False)
        assert r.returncode != 0 and "no cgroup hierarchy has that controller" in r.stderr


@pytest.mark.parametrize("v2_only", [False, True])
def test_host_devices_are_out_of_reach(units, v2_only):
    """CAP_MKNOD is in the default set: the device allowlist (v1 devices
    controller, v2 BPF program) is what keeps the host's disks away."""
    u = units("sh", "-c", "rm -f /tmp/disk; mknod /tmp/disk b 7 0 && echo made; "
                          "head -c 1 /tmp/disk; "
                          "echo x > /dev/null && echo null-ok; "
                          "head -c 1 /dev/urandom > /dev/null && echo urandom-ok")
    if v2_only:
        v2_root = next((r for r in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
                        if os.path.exists(os.path.join(r, "cgroup.controllers"))), None)
        assert v2_root, "this host has no cgroup2 mount"
        u.env = dict(ENV, CELL_CGROUP_ROOT=v2_root)
    u.start()
    u.wait_exit()
    out = u.text()
    assert "made" in out and "null-ok" in out and "urandom-ok" in out
    assert "head: /tmp/disk: Operation not permitted" in out


def test_shared_pid_namespace_tree_dies_by_cgroup(units):
    owner = units("sleep", "100")
    owner.start()
    ns = f"/proc/{owner.state()['containerPid']}/ns/pid"
    u = units("sh", "-c", "sleep 1000 & tr '\\0' ' ' </proc/1/cmdline; echo; echo ready; wait",
              namespaces={"pid": ns})
    u.start()
    u.wait_output("ready")
    # PID 1 of the namespace is the owner's workload.
    assert u.text().splitlines()[0] == "sleep 100 "
    pids = u.cgroup_pids()
    assert len(pids) == 2
    u.stop(grace=1)
    st = u.wait_exit()
    assert st["exitCode"] == 143  # sh is not PID 1 here: SIGTERM kills it
    for p in pids:
        assert not alive(p), f"process {p} survived"
    assert owner.state()["running"], "the namespace's owner must live on"
