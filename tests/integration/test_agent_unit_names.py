# SPDX-License-Identifier: Apache-2.0
"""Init and regular units live in separate namespaces on disk (issue 14).

An init unit ``a`` and a regular unit ``init-a`` once shared
``units/init-a/``: the second failed to start and ``logs/a`` returned the
other's output. Init units now live in ``units/init.<name>`` (a dot is never
in a unit name), and state an older agent left in ``units/init-<name>`` is
still adopted.
"""
from __future__ import annotations

import os
import shutil
import signal
import time

from wire import pod_params
from test_agent_pod import cell, image, sh, state_of, units_by_name, wait_state  # noqa: F401


def wait_logs(c, name: str, want: bytes, timeout: float = 10) -> bytes:
    deadline = time.monotonic() + timeout
    got = c.logs(name)
    while got != want and time.monotonic() < deadline:
        time.sleep(0.1)
        got = c.logs(name)
    return got


def test_init_unit_a_and_unit_init_a_do_not_collide(cell, image):
    a, c = cell()
    c.update_pod(pod_params(
        "ns_pod", init_units=[sh(image, "a", "echo from-init-a")],
        units=[sh(image, "init-a", "echo from-unit-init-a; exec sleep 1000")],
        terminationGracePeriodSeconds=0))
    st = wait_state(c, "init-a", "running")
    init = units_by_name(st, "initUnitStatus")["a"]
    assert init["state"]["terminated"]["exitCode"] == 0, init
    assert units_by_name(st)["init-a"]["restartCount"] == 0
    assert wait_logs(c, "a", b"from-init-a\n") == b"from-init-a\n"
    assert wait_logs(c, "init-a", b"from-unit-init-a\n") == b"from-unit-init-a\n"
    units = os.path.join(a.dir, "state", "units")
    assert sorted(os.listdir(units)) == ["init-a", "init.a"], os.listdir(units)


def test_state_of_an_older_agent_is_adopted(cell, image, tmp_path):
    """An init unit recorded under units/init-<name> by an older agent is
    not run again by the new one."""
    d = tmp_path / "agent"
    a, c = cell(d=d)
    marks = tmp_path / "marks"
    marks.mkdir()
    host = {"name": "marks", "hostPath": {"path": str(marks)}}
    mount = [{"name": "marks", "mountPath": "/marks"}]
    spec = pod_params(
        "ns_pod", init_units=[sh(image, "setup", "echo run >> /marks/setup",
                                 volumeMounts=mount)],
        units=[sh(image, "web", "exec sleep 1000")], volumes=[host],
        terminationGracePeriodSeconds=0)
    c.update_pod(spec)
    wait_state(c, "web", "running")
    assert (marks / "setup").read_text() == "run\n"
    os.killpg(a.proc.pid, signal.SIGKILL)
    a.proc.wait()
    units = d / "state" / "units"
    # What an older agent wrote: the same record, under the old name.
    shutil.move(str(units / "init.setup"), str(units / "init-setup"))
    a2, c2 = cell(d=d)
    st = c2.wait_status(lambda s: "terminated" in state_of(s, "setup", "initUnitStatus")
                        and "running" in state_of(s, "web"))
    assert units_by_name(st, "initUnitStatus")["setup"]["restartCount"] == 0
    assert units_by_name(st)["web"]["restartCount"] == 0
    time.sleep(0.5)
    assert (marks / "setup").read_text() == "run\n"  # not run again
    assert not (units / "init.setup").exists()
