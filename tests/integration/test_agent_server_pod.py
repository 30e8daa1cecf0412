# SPDX-License-Identifier: Apache-2.0
"""A server pod as the charts run them (issue 31): a non-root server
behind a `preStop: sleep` hook, subPaths of one emptyDir, fsGroup, and an
init unit that prepares a 0700 data directory, as PostgreSQL's and
Bitnami's charts lay them out. It runs, restarts (a new spec) and is
deleted as on a kubelet: the hook delays the stop, the signal follows, the
old process is gone before the new one binds the same port, and the data
directory keeps the mode the init unit gave it."""
from __future__ import annotations

import os
import time
import urllib.request

from wire import pod_params
from test_agent_api import free_port
from test_agent_pod import cell, image, sh, units_by_name, wait_state  # noqa: F401

UID = 1001
HOOK_S = 2


def server(image: str, port: int, gen: int) -> dict:
    """busybox httpd as uid 1001, serving a page it writes into a subPath
    of the shared emptyDir, and honouring SIGTERM (its shell is PID 1)."""
    script = (f"echo gen{gen} > /app/www/index.html || exit 3; "
              "stat -c 'data %a %u' /bitnami/data > /app/www/data.txt; "
              "mkdir -p /app/tmp/body && echo ok > /app/www/tmp.txt; "
              f"httpd -f -p {port} -h /app/www & "
              "trap 'kill $!; wait $!; exit 0' TERM; wait $!")
    return sh(image, "server", script,
              securityContext={"runAsUser": UID, "runAsGroup": UID},
              env=[{"name": "GEN", "value": str(gen)}],
              volumeMounts=[
                  {"name": "data", "mountPath": "/app/www", "subPath": "www"},
                  {"name": "data", "mountPath": "/app/tmp", "subPath": "tmp"},
                  {"name": "data", "mountPath": "/bitnami/data", "subPath": "pgdata"}],
              lifecycle={"preStop": {"sleep": {"seconds": HOOK_S}}},
              readinessProbe={"httpGet": {"path": "/index.html", "port": port},
                              "periodSeconds": 1})


def init(image: str) -> dict:
    return sh(image, "init", f"mkdir -p /d && chown {UID}:{UID} /d && chmod 0700 /d",
              volumeMounts=[{"name": "data", "mountPath": "/d", "subPath": "pgdata"}])


def spec(image: str, port: int, gen: int, units=True, grace: int = 10) -> dict:
    return pod_params(
        "ns_pod", units=[server(image, port, gen)] if units else [],
        init_units=[init(image)] if units else [], terminationGracePeriodSeconds=grace,
        volumes=[{"name": "data", "emptyDir": {}}],
        securityContext={"namespaceOptions": None, "supplementalGroups": [],
                         "sysctls": [], "fsGroup": UID})


def get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
        return r.read().decode().strip()


def wait_page(port: int, want: str, timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if get(port, "/index.html") == want:
                return time.monotonic()
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"never served {want}")


def server_pid(port: int) -> int:
    """The server's httpd: the one process listening on this test's port."""
    want = f"httpd -f -p {port} ".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except OSError:
            continue
        if cmd.startswith(want):
            return int(pid)
    raise AssertionError("no server process")


def test_server_pod_runs_restarts_and_is_deleted_as_on_a_kubelet(cell, image):
    a, c = cell()
    port = free_port()
    c.update_pod(spec(image, port, 1))
    wait_page(port, "gen1")
    st = wait_state(c, "server", "running", pred=lambda u: u["ready"], timeout=60)
    assert units_by_name(st)["server"]["restartCount"] == 0
    # The init unit's 0700 survived fsGroup; the subPaths are the user's.
    assert get(port, "/data.txt") == f"data 700 {UID}"
    assert get(port, "/tmp.txt") == "ok"
    old = server_pid(port)

    # A rollout: the old server's hook holds it HOOK_S seconds, then
    # SIGTERM; the new one can bind the port only once the old is gone.
    t0 = time.monotonic()
    c.update_pod(spec(image, port, 2))
    time.sleep(0.5)
    assert get(port, "/index.html") == "gen1", "the hook did not hold the old server"
    t1 = wait_page(port, "gen2")
    assert t1 - t0 >= HOOK_S - 0.2, f"served gen2 after {t1 - t0:.1f} s, before the hook's end"
    assert not os.path.exists(f"/proc/{old}"), "the old server still runs"
    assert get(port, "/data.txt") == f"data 700 {UID}"

    # Deleted (no unit at all, as `cellctl delete` sends): listed while
    # the hook runs and the process lives, then gone.
    new = server_pid(port)
    t0 = time.monotonic()
    c.update_pod(spec(image, port, 2, units=False))
    time.sleep(0.5)
    assert os.path.exists(f"/proc/{new}"), "stopped before its preStop hook ended"
    assert "server" in units_by_name(c.status()), "the unit left the status before its process"
    deadline = t0 + 10 + 5
    while os.path.exists(f"/proc/{new}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{new}"), "the deleted server still runs"
    gone = time.monotonic() - t0
    assert gone >= HOOK_S - 0.2, f"gone after {gone:.1f} s, before its hook ended"
    c.wait_status(lambda s: "server" not in units_by_name(s), timeout=20)
