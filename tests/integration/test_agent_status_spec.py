# SPDX-License-Identifier: Apache-2.0
"""Status describes the spec in force (issue 18): during a pod restart the
new units are listed as waiting (ContainerCreating) from the moment the
spec is taken, not once the old ones have stopped; right after a new
`updatepod`, status never reports the previous pod's state for a unit the
new spec changed; and an exec as soon as a unit reports running works."""
from __future__ import annotations

import os

from test_agent_durable import supervisor_held
from test_agent_helpers import wait_for
from test_agent_pod import cell, image, sh, state_of, units_by_name  # noqa: F401
from wire import pod_params


def alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def container_pid(a, name: str) -> int:
    import json
    units = os.path.join(a.dir, "state", "units", name)
    runs = sorted((r for r in os.listdir(units) if r.isdigit()), key=int)
    with open(os.path.join(units, runs[-1], "state.json")) as f:
        return json.load(f)["containerPid"]


def test_new_units_wait_while_the_old_pod_stops(cell, image):
    a, c = cell()
    # The old unit ignores SIGTERM (PID 1 without a handler): it stops at
    # the end of the new spec's grace, 10 s later.
    c.update_pod(pod_params("ns_pod", units=[sh(image, "old", "exec sleep 1000")],
                            terminationGracePeriodSeconds=10))
    c.wait_status(lambda s: "running" in state_of(s, "old"))
    old = container_pid(a, "old")
    # initUnits change: the whole pod restarts.
    spec = pod_params("ns_pod", units=[sh(image, "new", "exec sleep 1000")],
                      init_units=[sh(image, "first", "true")],
                      terminationGracePeriodSeconds=10)
    c.update_pod(spec)
    st = c.wait_status(lambda s: "new" in units_by_name(s), timeout=30)
    assert alive(old), "the old unit had already stopped: nothing was shown"
    assert state_of(st, "new").get("waiting", {}).get("reason") == "ContainerCreating", st
    assert "old" not in units_by_name(st), st
    assert "first" in units_by_name(st, "initUnitStatus"), st
    c.wait_status(lambda s: "running" in state_of(s, "new"), timeout=60)


def test_status_right_after_a_new_spec_is_not_the_previous_pods(cell, image):
    a, c = cell()
    for r in range(3):
        # The previous pod: u failed for good.
        c.update_pod(pod_params("ns_pod", units=[sh(image, "u", f"exit {r + 3}")],
                                restart_policy="Never", terminationGracePeriodSeconds=0))
        c.wait_status(lambda s: state_of(s, "u").get("terminated", {})
                      .get("exitCode") == r + 3, timeout=30)
        # The new one changes u: from the 200 on, status is about it.
        c.update_pod(pod_params("ns_pod", units=[sh(image, "u", f"exec sleep {1000 + r}")],
                                restart_policy="Never", terminationGracePeriodSeconds=0))
        st = c.status()
        assert "terminated" not in state_of(st, "u"), (r, st)
        c.wait_status(lambda s: "running" in state_of(s, "u"), timeout=30)


def test_exec_as_soon_as_running(cell, image):
    a, c = cell()
    for r in range(3):
        init = [sh(image, "first", f"echo {r}")]
        c.update_pod(pod_params("ns_pod", units=[sh(image, "u", f"exec sleep {2000 + r}")],
                                init_units=init, terminationGracePeriodSeconds=0))
        c.wait_status(lambda s: "running" in state_of(s, "u"), timeout=30)
        out, err, code = c.exec("u", ["/bin/cat", "/proc/1/cmdline"]).collect()
        assert code == 0, (r, out, err)
        assert f"sleep\0{2000 + r}".encode() in out, (r, out, err)


def test_queued_pod_namespace_change_lists_the_units_waiting(cell, image):
    """A spec that changes only the pod's PID/IPC namespaces
    (shareProcessNamespace) restarts the pod, as a network change does:
    while it waits for the supervisor (held), status already lists its
    unit as waiting, not as the running one about to stop."""
    # pod-init's new PID namespace and a sanitizer build's LeakSanitizer:
    # see test_agent_pod.py's namespace test.
    asan = (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    a, c = cell(env={"ASAN_OPTIONS": asan})

    def spec(pid_ipc: int) -> dict:
        sc = {"namespaceOptions": {"network": 0, "pid": pid_ipc, "ipc": pid_ipc},
              "runAsUser": None, "runAsGroup": None, "supplementalGroups": [],
              "sysctls": []}
        return pod_params("ns_pod", units=[sh(image, "u", "exec sleep 1000")],
                          securityContext=sc, terminationGracePeriodSeconds=0)

    c.update_pod(spec(1))
    c.wait_status(lambda s: "running" in state_of(s, "u"), timeout=60)
    with supervisor_held(a):
        c.update_pod(spec(0))
        st = c.status()
    assert state_of(st, "u").get("waiting", {}).get("reason") == "ContainerCreating", st
    c.wait_status(lambda s: "running" in state_of(s, "u"), timeout=60)
