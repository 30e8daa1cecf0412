"""An acknowledged spec is never lost (issue 14): `updatepod` answers 200
only once the spec is on disk, so a `kill -9` right after the reply, or a
SIGTERM while the spec still waits for the supervisor, brings the NEW spec
back after a restart; a spec that cannot be saved gets an error the
controller sends again, and the old spec stays in force.

To make "the spec is still queued" certain rather than lucky, each test
keeps the supervisor thread busy when the spec arrives: an exec readiness
probe that takes three seconds (exec probes run on the supervisor's thread)
is seen running before the spec is posted. The SIGTERM case also has a
unit whose registry accepts connections and never answers.
"""
from __future__ import annotations

import os
import signal
import time

from test_agent_helpers import Stall, wait_for
from test_agent_pod import FAST, cell, image, sh, units_by_name  # noqa: F401
from wire import pod_params

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


def test_kill_9_right_after_200_keeps_the_new_spec(cell, image, tmp_path):
    d = tmp_path / "agent"
    a, c = cell(d=d)
    for gen in range(3):
        # A fresh busy unit each round: a re-adopted unit's probes do not
        # run again after an agent restart (today's unit_adopt).
        web = busy_unit(image, f"durable-web{gen}")
        name = f"durable-gen{gen}"
        c.update_pod(pod_params(POD, units=[web], terminationGracePeriodSeconds=0))
        # The last round's units gone first (a kill -9 while a removed
        # unit is being cleaned up is another fault, not this test's).
        units = os.path.join(a.dir, "state", "units")
        wait_for(lambda: os.listdir(units) == [web["name"]], timeout=30,
                 what="only the busy unit left")
        wait_busy()
        c.update_pod(pod_params(POD, units=[web, sh(image, name, "exec sleep 1000")],
                                terminationGracePeriodSeconds=0))
        os.killpg(a.proc.pid, signal.SIGKILL)
        a.proc.wait()
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
