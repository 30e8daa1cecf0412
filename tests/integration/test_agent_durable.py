# SPDX-License-Identifier: Apache-2.0
"""An acknowledged spec is never lost (issue 14): `updatepod` answers 200
only once the spec is on disk, so a `kill -9` right after the reply, or a
SIGTERM while the spec still waits for the supervisor, brings the NEW spec
back after a restart; a spec that cannot be saved gets an error the
controller sends again, and the old spec stays in force.

To make "the spec is still queued" certain rather than lucky, the kill -9
tests stop the supervisor thread alone (ptrace, supervisor_held) before the
spec is posted. The SIGTERM case, which needs that thread to end, posts
while an exec readiness probe runs (no longer a hold: probes left the
thread) and has a unit whose registry accepts connections and never answers.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import random
import os
import signal
import subprocess
import time

import pytest

from conftest import CELL_BUILD
from test_agent_helpers import Stall, wait_for
from test_agent_pod import (FAST, cell, image, ns_spec, read_json, read_when,  # noqa: F401
                            sh, state_of, units_by_name)
from wire import WireError, pod_params

POD = "durable_pod"
PROBE_MARK = "durable-probe"


def busy_unit(img: str, name: str = "durable-web") -> dict:
    """A unit whose readiness probe holds the supervisor for ~3 s a time."""
    probe = {"exec": {"command": ["/bin/sh", "-c", f"sleep 3; : {PROBE_MARK}"]},
             "periodSeconds": 1, "timeoutSeconds": 20, "failureThreshold": 3}
    return sh(img, name, "exec sleep 1000", readinessProbe=probe)


def probe_running() -> bool:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if PROBE_MARK.encode() in f.read():
                    return True
        except OSError:
            pass
    return False


def wait_busy() -> None:
    """Return just after a probe has started: the supervisor is in it."""
    wait_for(lambda: not probe_running(), timeout=30, what="the probe between runs")
    wait_for(probe_running, timeout=30, what="the probe running")


_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
_libc.ptrace.restype = ctypes.c_long
PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
WALL = 0x40000000  # waitpid's __WALL: a traced thread, not a child


def _ptrace(op: int, tid: int) -> None:
    if _libc.ptrace(op, tid, None, None) < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ptrace {op:#x} {tid}: {os.strerror(err)}")


@contextlib.contextmanager
def supervisor_held(a):
    """The agent's supervisor thread (`cell-sup`) stopped alone, by ptrace:
    a spec posted now is saved and answered 200 by the API threads but
    not taken, which makes "killed before the supervisor carried the
    change out" certain rather than a race the supervisor mostly wins.
    Yields kill(): the agent killed with -9 while held (the stopped thread
    reaped here, as its tracer must); otherwise the thread is let go.
    Hold it while it idles (a unit settled): stopped inside its status
    lock's few microseconds, it would hold the API up too."""
    pid = a.proc.pid
    tid = next(int(t) for t in os.listdir(f"/proc/{pid}/task")
               if open(f"/proc/{pid}/task/{t}/comm").read().strip() == "cell-sup")
    killed = False

    def kill():
        nonlocal killed
        os.killpg(pid, signal.SIGKILL)
        killed = True
        os.waitpid(tid, WALL)
        a.proc.wait()

    _ptrace(PTRACE_SEIZE, tid)
    try:
        _ptrace(PTRACE_INTERRUPT, tid)
        os.waitpid(tid, WALL)  # its stop
        yield kill
    finally:
        if not killed:
            _ptrace(PTRACE_DETACH, tid)


def test_kill_9_right_after_200_keeps_the_new_spec(cell, image, tmp_path):
    d = tmp_path / "agent"
    a, c = cell(d=d)
    for gen in range(3):
        web = sh(image, f"durable-web{gen}", "exec sleep 1000")
        name = f"durable-gen{gen}"
        c.update_pod(pod_params(POD, units=[web], terminationGracePeriodSeconds=0))
        # The last round's units gone first (a kill -9 while a removed
        # unit is being cleaned up is another fault, not this test's).
        units = os.path.join(a.dir, "state", "units")
        wait_for(lambda: os.listdir(units) == [web["name"]], timeout=30,
                 what="only this round's unit left")
        c.wait_status(lambda s: "running" in state_of(s, web["name"]), timeout=60)
        with supervisor_held(a) as kill:
            c.update_pod(pod_params(POD, units=[web, sh(image, name, "exec sleep 1000")],
                                    terminationGracePeriodSeconds=0))
            kill()
        a, c = cell(d=d)
        st = c.wait_status(lambda s: name in units_by_name(s), timeout=60)
        assert set(units_by_name(st)) >= {web["name"], name}, st


def test_sigterm_while_queued_keeps_the_new_spec(cell, image, tmp_path):
    stall = Stall()
    # (Over TLS, which the stalled peer never answers either.)
    stalled = f"127.0.0.1:{stall.port}/t/never:v1"
    d = tmp_path / "agent"
    try:
        a, c = cell(d=d)
        web = busy_unit(image)
        c.update_pod(pod_params(POD, units=[web], terminationGracePeriodSeconds=0))
        c.wait_status(lambda s: "running" in units_by_name(s).get("durable-web", {})
                      .get("state", {}), timeout=60)
        wait_busy()
        c.update_pod(pod_params(POD, units=[web, sh(stalled, "durable-stuck", "true")],
                                terminationGracePeriodSeconds=0))
        t0 = time.monotonic()
        a.proc.send_signal(signal.SIGTERM)
        assert a.proc.wait(timeout=15) == 0, a.log()[-3000:]
        assert time.monotonic() - t0 < 10
        a, c = cell(d=d)
        st = c.wait_status(lambda s: "durable-stuck" in units_by_name(s), timeout=60)
        assert "waiting" in units_by_name(st)["durable-stuck"]["state"], st
    finally:
        stall.close()


def run_state(d, name: str) -> dict:
    """The unit's newest run's state.json (the monitor's pids)."""
    units = os.path.join(d, "state", "units", name)
    runs = sorted((r for r in os.listdir(units) if r.isdigit()), key=int)
    return read_json(os.path.join(units, runs[-1], "state.json"))


def fill(path: str) -> None:
    """Write zeros to path until the filesystem says ENOSPC."""
    chunk = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    # A last few bytes: the filesystem is full to the page.
    with open(path + "-tail", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0")
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


def test_full_state_filesystem_cycle(mounts, cell, image, tmp_path):
    d = tmp_path / "agent"
    state = d / "state"
    os.makedirs(state)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700",
                    "durable-state", str(state)], check=True)
    mounts.append(str(state))
    a, c = cell(d=d)
    # Units that end when the test sends their shell SIGTERM: one with
    # exit 0, one with exit 1 (which OnFailure restarts).
    job = sh(image, "durable-job", "trap 'exit 0' TERM; while :; do sleep 0.1; done")
    crash = sh(image, "durable-crash", "trap 'exit 1' TERM; while :; do sleep 0.1; done")
    keep = sh(image, "durable-keep", "exec sleep 1000")
    spec1 = pod_params(POD, units=[job, crash, keep], restart_policy="OnFailure",
                       terminationGracePeriodSeconds=0)
    c.update_pod(spec1)
    c.wait_status(lambda s: all("running" in state_of(s, n)
                                for n in ("durable-job", "durable-crash", "durable-keep")))
    job_pid = run_state(d, "durable-job")["containerPid"]
    crash_pid = run_state(d, "durable-crash")["containerPid"]

    fill(str(state / "durable-fill"))
    try:
        # A spec that cannot be saved: an error the controller retries,
        # and the old spec stays in force.
        new = sh(image, "durable-new", "exec sleep 1000")
        spec2 = pod_params(POD, units=[job, crash, keep, new], restart_policy="OnFailure",
                           terminationGracePeriodSeconds=0)
        with pytest.raises(WireError) as err:
            c.update_pod(spec2)
        assert err.value.status == 503, err.value
        assert "No space left" in err.value.body, err.value
        with open(state / "pod.json") as f:
            assert "durable-new" not in f.read()
        # A unit that ends while the disk is full, and one that must be
        # restarted: it cannot start, and waits (never a startFailure).
        os.kill(job_pid, signal.SIGTERM)
        os.kill(crash_pid, signal.SIGTERM)
        def tried(s):  # past its back-off, a start was tried
            w = state_of(s, "durable-crash").get("waiting", {})
            return w.get("startFailure") or "No space left" in w.get("reason", "")
        st = c.wait_status(tried, timeout=30)
        waiting = state_of(st, "durable-crash")["waiting"]
        assert waiting["startFailure"] is False, waiting
        assert "No space left" in waiting["reason"], waiting
        assert "durable-new" not in units_by_name(st)
        wait_for(lambda: not os.path.exists(f"/proc/{job_pid}"), what="the job's end")
        job_state = state_of(c.status(), "durable-job")
        assert job_state.get("terminated", {}).get("exitCode", 0) == 0, job_state
        assert "running" in state_of(c.status(), "durable-keep")
    finally:
        os.unlink(state / "durable-fill")
        os.unlink(state / "durable-fill-tail")

    # Space is back: everything resumes without a restart of the agent.
    st = c.wait_status(lambda s: "terminated" in state_of(s, "durable-job") and
                       "running" in state_of(s, "durable-crash"), timeout=60)
    done = state_of(st, "durable-job")["terminated"]
    assert done["exitCode"] == 0 and done["reason"] == "Completed", done
    assert units_by_name(st)["durable-crash"]["restartCount"] >= 1
    c.update_pod(spec2)
    st = c.wait_status(lambda s: "running" in state_of(s, "durable-new"), timeout=60)
    assert "running" in state_of(st, "durable-keep")
    assert a.alive()


# ---- kill -9 at random moments while specs change (issue 18) ----

ROUNDS = int(os.environ.get("CELL_DURABLE_ROUNDS", "4"))


def sleepers(lo: int, hi: int) -> dict:
    """{N: pid} of every `sleep N` with lo <= N < hi running on the host."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) >= 2 and argv[0].endswith(b"sleep") and argv[1].isdigit():
            n = int(argv[1])
            if lo <= n < hi:
                found.setdefault(n, []).append(int(pid))
    return found


def test_kill_9_at_random_moments_keeps_every_change(cell, image, tmp_path):
    """Each round changes the spec (a unit's command, a unit removed or
    added back, initUnits: a pod restart), kills the agent with -9 a
    random few milliseconds after the 200, and starts it again: what runs
    then must be exactly what the spec in force says, as without the
    crash. CELL_DURABLE_ROUNDS sets the rounds (`make soak`: 50)."""
    seed = int(os.environ.get("CELL_DURABLE_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    base = 7_000_000 + rng.randrange(1000) * 1000  # this test's `sleep N`s
    d = tmp_path / "agent"
    a, c = cell(d=d)
    ver = {"durable-d": 0, "durable-e": 1, "durable-i": 0}
    with_e = True

    def spec():
        units = [sh(image, "durable-d",
                    f"echo V{ver['durable-d']}; exec sleep {base + ver['durable-d']}")]
        if with_e:
            units.append(sh(image, "durable-e",
                            f"echo V{ver['durable-e']}; exec sleep {base + ver['durable-e']}"))
        init = [sh(image, "durable-i", f"echo I{ver['durable-i']}")]
        return pod_params(POD, units=units, init_units=init,
                          terminationGracePeriodSeconds=0)

    def settled():
        """Exactly the spec's sleepers run, and status says so."""
        want = {base + ver["durable-d"]}
        if with_e:
            want.add(base + ver["durable-e"])
        got = sleepers(base, base + 1000)
        if set(got) != want or any(len(p) != 1 for p in got.values()):
            return None
        st = c.status()
        names = set(units_by_name(st))
        if names != ({"durable-d", "durable-e"} if with_e else {"durable-d"}):
            return None
        if not all("running" in state_of(st, n) for n in names):
            return None
        if "terminated" not in state_of(st, "durable-i", "initUnitStatus"):
            return None
        return {n: p[0] for n, p in got.items()}

    c.update_pod(spec())
    pids = wait_for(settled, timeout=60, what="the first spec running")
    for r in range(ROUNDS):
        kind = r % 3
        if kind == 0:  # an existing unit's command changes
            ver["durable-d"] = 2 * r + 2
        elif kind == 1:  # a unit goes, or comes back
            with_e = not with_e
            ver["durable-e"] = 2 * r + 3
        else:  # initUnits change: the whole pod starts over
            ver["durable-i"] = r + 1
        c.update_pod(spec())
        time.sleep(rng.uniform(0, 0.3))
        os.killpg(a.proc.pid, signal.SIGKILL)
        a.proc.wait()
        a, c = cell(d=d)
        try:
            new = wait_for(settled, timeout=60, what="the spec in force running")
        except TimeoutError:
            pytest.fail(f"round {r} (kind {kind}, seed {seed}): running "
                        f"{sleepers(base, base + 1000)}, want d={ver['durable-d']} "
                        f"e={ver['durable-e'] if with_e else None}\n"
                        f"{c.status()}\n" + "\n".join(
                            l for l in a.log().splitlines()
                            if "rest/v1/status" not in l)[-3000:])
        if kind == 2:
            assert not set(pids.values()) & set(new.values()), \
                f"round {r} (seed {seed}): the pod did not start over"
            assert f"I{ver['durable-i']}".encode() in c.logs("durable-i"), \
                f"round {r} (seed {seed})"
        pids = new


def test_kill_9_after_a_pod_namespace_change(cell, image, tmp_path):
    """A spec that changes only the pod-wide PID/IPC namespaces
    (shareProcessNamespace: pid and ipc POD) restarts the pod, even when
    the agent is killed right after the 200: the restarted agent sees that
    the re-adopted run was started in namespaces of its own and starts it
    again in the pod's (PID 1 its pod-init)."""
    # As in test_agent_pod.py's namespace test: a sanitizer build's
    # LeakSanitizer spins in pod-init's new PID namespace.
    asan = (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    d = tmp_path / "agent"
    out = tmp_path / "out"
    out.mkdir()
    a, c = cell(d=d, env={"ASAN_OPTIONS": asan})
    c.update_pod(ns_spec(image, out, {"network": 0, "pid": 1, "ipc": 1}, names=("a",)))
    own = read_when(out / "a.pid").strip()
    assert read_when(out / "a.one").strip() != "pod-init"
    assert own != os.readlink("/proc/self/ns/pid")
    with supervisor_held(a) as kill:
        c.update_pod(ns_spec(image, out, {"network": 0, "pid": 0, "ipc": 0}, names=("a",)))
        kill()
    a, c = cell(d=d, env={"ASAN_OPTIONS": asan})
    try:
        read_when(out / "a.one", lambda t: t.strip() == "pod-init", timeout=60)
    except AssertionError:
        pytest.fail("the unit still runs in its own PID namespace\n" + "\n".join(
            l for l in a.log().splitlines() if "rest/v1/status" not in l)[-3000:])
    holder = int(open(os.path.join(a.dir, "state", "podns.json")).read().split()[0])
    pid_ns = read_when(out / "a.pid", lambda t: t.strip() not in ("", own)).strip()
    assert pid_ns == os.readlink(f"/proc/{holder}/ns/pid")
    assert read_when(out / "a.ipc", lambda t: t.strip()).strip() == \
        os.readlink(f"/proc/{holder}/ns/ipc")


# cell-monitor, except that the `run` of a unit named durable-slow* sets up
# for HOLD seconds first (monitor.lock held, no state.json yet, as a real
# monitor on a loaded machine) in a session of its own, then is the real one.
SLOW_MONITOR = """#!/bin/sh
case "$1 $4" in
"run "*/durable-slow*)
\tsetsid sh -c 'd=$1; shift; flock "$d/monitor.lock" sleep HOLD; exec "$@"' \\
\t\tsh "$4" REAL "$@" </dev/null &
\texit 0;;
esac
exec REAL "$@"
"""


def lock_held(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_unit_removed_while_its_monitor_sets_up(cell, image, tmp_path):
    """The agent is killed while a unit's monitor is still setting up; the
    restarted agent adopts that run, and a spec that removes the unit
    arrives before the monitor is up: the stop cannot be delivered yet,
    and must be once the monitor is, so the unit ends and its directory
    goes (it used to stay "stopping" for good, its container running)."""
    wrapper = tmp_path / "slow-monitor"
    wrapper.write_text(SLOW_MONITOR.replace("HOLD", "5").replace(
        "REAL", os.path.join(CELL_BUILD, "bin", "cell-monitor")))
    wrapper.chmod(0o755)
    extra = ("--monitor-bin", str(wrapper))
    d = tmp_path / "agent"
    a, c = cell(d=d, extra=extra)
    c.update_pod(pod_params(POD, units=[sh(image, "durable-slow", "exec sleep 1000")],
                            terminationGracePeriodSeconds=0))
    lock = os.path.join(a.dir, "state", "units", "durable-slow", "1", "monitor.lock")
    wait_for(lambda: lock_held(lock), timeout=60, what="the monitor setting up")
    os.killpg(a.proc.pid, signal.SIGKILL)
    a.proc.wait()
    a, c = cell(d=d, extra=extra)
    c.update_pod(pod_params(POD, units=[], terminationGracePeriodSeconds=0))
    assert lock_held(lock), "the monitor was up before the spec came: nothing tested"
    units = os.path.join(a.dir, "state", "units")
    try:
        wait_for(lambda: not os.listdir(units), timeout=60, what="the unit gone")
    except TimeoutError:
        pytest.fail(f"{os.listdir(units)}\n{c.status()}\n" + "\n".join(
            l for l in a.log().splitlines() if "rest/v1/status" not in l)[-3000:])
