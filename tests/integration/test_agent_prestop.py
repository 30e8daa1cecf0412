# SPDX-License-Identifier: Apache-2.0
"""The stop path of a unit with a preStop hook (issue 31), on real
containers: the hook, then SIGTERM, then SIGKILL once the grace period,
counted from the hook's start, has run out (the kubelet's killContainer
and executePreStopHook; docs/agent-supervisor.md "The stop path"). Each
way a unit is stopped is here: a new spec without it, the pod deleted
(cellctl's updatepod with no units), a pod restart, a failed liveness
probe (restarted by the policy or not) and the agent's own stop while a
hook runs; with exec, httpGet and sleep hooks, and a hook that hangs past
the grace.

The unit writes what it sees to a hostPath file with the kernel's uptime
(the host's clock too): "start", "term" when SIGTERM comes; an exec hook
writes "hook", an httpGet hook is answered by a server in this test. Only
lower bounds are exact (nothing comes early); "gone in time" has a
generous slack for a loaded machine.
"""
from __future__ import annotations

import http.server
import json
import os
import signal
import threading
import time

import pytest

from test_agent_pod import cell, image, units_by_name, sh, state_of  # noqa: F401
from wire import pod_params

SLACK = 6.0  # seconds past the grace a stopped process may take, loaded
EARLY = 0.3  # the clocks' and the shell's loop's resolution

UP = "up() { read a b < /proc/uptime; echo $a; }; "


def uptime() -> float:
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def main_script(ignore_term: bool) -> str:
    """Traces its start and SIGTERM; exits on it, or ignores it (only
    SIGKILL ends it then)."""
    on_term = "" if ignore_term else "; exit 0"
    return (UP + f"trap 'echo term $(up) >> /out/trace{on_term}' TERM; "
            "echo start $(up) >> /out/trace; while :; do sleep 0.1; done")


def exec_hook(secs: float) -> dict:
    return {"exec": {"command": ["/bin/sh", "-c", UP + "echo hook $(up) >> /out/trace; "
                                 f"sleep {secs}"]}}


class HookServer:
    """An httpGet hook's target on 127.0.0.1 (units share the host's
    network here): notes when each request came, answers after `hold`
    seconds."""

    def __init__(self, hold: float = 0.0):
        self.hits = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits.append(uptime())
                time.sleep(hold)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def hook(self) -> dict:
        return {"httpGet": {"path": "/prestop", "port": self.port, "host": "127.0.0.1"}}

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def hook_server():
    made = []

    def make(hold: float = 0.0) -> HookServer:
        made.append(HookServer(hold))
        return made[-1]

    yield make
    for s in made:
        s.close()


def trace(out) -> list:
    """[(event, uptime)] in the order written."""
    p = out / "trace"
    if not p.exists():
        return []
    return [(w[0], float(w[1])) for w in (ln.split() for ln in p.read_text().splitlines())
            if len(w) == 2]


def first(tr: list, ev: str) -> float:
    for e, t in tr:
        if e == ev:
            return t
    raise AssertionError(f"no {ev!r} in the trace: {tr}")


def hooked(image: str, name: str, pre: dict, ignore_term: bool = False, **kw) -> dict:
    return sh(image, name, main_script(ignore_term), lifecycle={"preStop": pre},
              volumeMounts=[{"name": "out", "mountPath": "/out"}], **kw)


def spec(out, units, grace: int, **kw) -> dict:
    vol = {"name": "out", "hostPath": {"path": str(out), "type": "Directory"}}
    return pod_params("ns_pod", units=units, volumes=[vol],
                      terminationGracePeriodSeconds=grace, **kw)


def container_pid(a, name: str) -> int:
    units = os.path.join(a.dir, "state", "units", name)
    runs = sorted((r for r in os.listdir(units) if r.isdigit()), key=int)
    with open(os.path.join(units, runs[-1], "state.json")) as f:
        return json.load(f)["containerPid"]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid: int, until: float) -> float:
    """The uptime at which pid was seen gone; fails past `until`."""
    while alive(pid):
        if uptime() > until:
            raise AssertionError(f"process {pid} still runs {SLACK} s past its grace")
        time.sleep(0.05)
    return uptime()


def start(cell, image, tmp_path, u: dict, grace: int, **kw):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    a, c = cell()
    c.update_pod(spec(out, [u], grace, **kw))
    c.wait_status(lambda s: "running" in state_of(s, u["name"]), timeout=60)
    deadline = time.monotonic() + 10
    while not trace(out) and time.monotonic() < deadline:
        time.sleep(0.05)
    return a, c, out, container_pid(a, u["name"])


def hook_start(kind: str, tr: list, srv, t0: float) -> float:
    """When the hook began (a sleep hook leaves no trace: the stop's ask)."""
    if kind == "exec":
        return first(tr, "hook")
    if kind == "httpGet":
        assert srv.hits, "the httpGet hook never reached its server"
        return srv.hits[0]
    return t0


# ---- a unit removed, the pod deleted, the pod restarted ----

@pytest.mark.parametrize("how,kind", [
    ("removed", "exec"), ("removed", "httpGet"), ("removed", "sleep"),
    ("deleted", "exec"), ("pod-restart", "exec"),
])
def test_hook_then_term(cell, image, tmp_path, hook_server, how, kind):
    """The hook (1 s) runs, then SIGTERM (caught: the unit exits), within
    the grace; the process is gone and so is the unit."""
    srv = hook_server(hold=1) if kind == "httpGet" else None
    pre = {"exec": exec_hook(1), "httpGet": srv.hook() if srv else None,
           "sleep": {"sleep": {"seconds": 1}}}[kind]
    grace = 4
    a, c, out, pid = start(cell, image, tmp_path, hooked(image, "u", pre), grace)
    t0 = uptime()
    if how == "removed":
        c.update_pod(spec(out, [], grace))
    elif how == "deleted":  # cellctl delete --grace 4: units null
        body = spec(out, [], grace)
        body["spec"]["units"] = body["spec"]["initUnits"] = None
        c.update_pod(body)
    else:  # initUnits changed: every unit stops, the pod starts over
        c.update_pod(spec(out, [hooked(image, "u", pre)], grace,
                          init_units=[sh(image, "first", "true")]))
    gone = wait_gone(pid, t0 + grace + SLACK)
    tr = trace(out)
    h = hook_start(kind, tr, srv, t0)
    term = first(tr, "term")
    assert t0 - EARLY <= h, tr
    assert term >= h + 1 - EARLY, f"SIGTERM before the hook's end: {tr}"
    assert gone >= term
    if how != "pod-restart":
        c.wait_status(lambda s: "u" not in units_by_name(s), timeout=20)


def test_removed_unit_stays_in_status_until_gone(cell, image, tmp_path):
    """A unit a new spec removes, beside one that stays: listed (running)
    while its hook and stop run, as a kubelet lists a terminating
    container, and gone from the status once its process is."""
    grace = 4
    out = tmp_path / "out"
    out.mkdir()
    a, c = cell()
    keep = sh(image, "keep", "exec sleep 1000")
    c.update_pod(spec(out, [keep, hooked(image, "u", exec_hook(2))], grace))
    c.wait_status(lambda s: all("running" in state_of(s, n) for n in ("keep", "u")),
                  timeout=60)
    pid = container_pid(a, "u")
    t0 = uptime()
    c.update_pod(spec(out, [keep], grace))
    wait_for_hook = time.monotonic() + 10
    while not any(e == "hook" for e, _ in trace(out)) and time.monotonic() < wait_for_hook:
        time.sleep(0.05)
    assert alive(pid), "stopped before its preStop hook ended"
    assert "running" in state_of(c.status(), "u"), c.status()
    wait_gone(pid, t0 + grace + SLACK)
    c.wait_status(lambda s: "u" not in units_by_name(s), timeout=20)
    assert "running" in state_of(c.status(), "keep")


# ---- SIGKILL at the grace's end ----

def test_deleted_pod_kills_at_the_grace_end(cell, image, tmp_path):
    """The unit ignores SIGTERM: the hook (1 s), SIGTERM with what is left
    of the grace (4 - 1 = 3 s), then SIGKILL."""
    grace = 4
    a, c, out, pid = start(cell, image, tmp_path,
                           hooked(image, "u", exec_hook(1), ignore_term=True), grace)
    t0 = uptime()
    body = spec(out, [], grace)
    body["spec"]["units"] = body["spec"]["initUnits"] = None
    c.update_pod(body)
    gone = wait_gone(pid, t0 + grace + SLACK)
    tr = trace(out)
    h, term = first(tr, "hook"), first(tr, "term")
    assert term >= h + 1 - EARLY, tr
    assert gone >= h + grace - EARLY, f"killed before the grace's end: {tr}, gone {gone}"


@pytest.mark.parametrize("kind", ["exec", "httpGet"])
def test_hook_past_the_grace_is_cut(cell, image, tmp_path, hook_server, kind):
    """A hook that outlasts the grace (2 s) is cut there; SIGTERM follows
    with the kubelet's 2 s minimum, then SIGKILL."""
    srv = hook_server(hold=60) if kind == "httpGet" else None
    pre = srv.hook() if srv else exec_hook(1000)
    grace = 2
    a, c, out, pid = start(cell, image, tmp_path, hooked(image, "u", pre, ignore_term=True),
                           grace)
    t0 = uptime()
    c.update_pod(spec(out, [], grace))
    gone = wait_gone(pid, t0 + grace + 2 + SLACK)
    tr = trace(out)
    h = hook_start(kind, tr, srv, t0)
    term = first(tr, "term")
    assert term >= h + grace - EARLY, f"SIGTERM before the grace's end: {tr}"
    assert gone >= term + 2 - EARLY, f"SIGKILL within the 2 s minimum: {tr}, gone {gone}"


# ---- a failed liveness probe ----

@pytest.mark.parametrize("policy", ["Always", "Never"])
def test_liveness_failure_runs_the_hook(cell, image, tmp_path, policy):
    """Live for a second, then not: the kill goes through the hook, then
    SIGTERM; Always restarts it, Never leaves it terminated."""
    live = {"exec": {"command": ["/bin/sh", "-c", "test -e /tmp/live"]},
            "periodSeconds": 1, "failureThreshold": 1}
    script = (UP + "trap 'echo term $(up) >> /out/trace; exit 0' TERM; "
              "echo start $(up) >> /out/trace; touch /tmp/live; sleep 1; rm /tmp/live; "
              "while :; do sleep 0.1; done")
    u = sh(image, "u", script, lifecycle={"preStop": exec_hook(1)}, livenessProbe=live,
           volumeMounts=[{"name": "out", "mountPath": "/out"}])
    grace = 4
    a, c, out, pid = start(cell, image, tmp_path, u, grace, restart_policy=policy)
    t0 = uptime()
    gone = wait_gone(pid, t0 + 1 + 3 + grace + SLACK)
    tr = trace(out)
    h, term = first(tr, "hook"), first(tr, "term")
    assert [e for e, _ in tr[:3]] == ["start", "hook", "term"], tr
    assert term >= h + 1 - EARLY and gone >= term, tr
    if policy == "Always":
        st = c.wait_status(lambda s: units_by_name(s)["u"]["restartCount"] >= 1, timeout=30)
    else:
        st = c.wait_status(lambda s: "terminated" in state_of(s, "u"), timeout=30)
        time.sleep(0.5)
        st = c.status()
        assert units_by_name(st)["u"]["restartCount"] == 0
        assert state_of(st, "u")["terminated"]["exitCode"] == 0


# ---- the agent's own stop ----

def test_agent_stop_during_the_hook_still_stops_the_unit(cell, image, tmp_path):
    """SIGTERM to cell-agent while a preStop runs: the agent waits for the
    hook, sends the signal, and only then exits; nothing is left running.
    (Units not being stopped outlive the agent by design: the next agent
    re-adopts them.)"""
    grace = 4
    a, c, out, pid = start(cell, image, tmp_path, hooked(image, "u", exec_hook(2)), grace)
    t0 = uptime()
    c.update_pod(spec(out, [], grace))
    deadline = time.monotonic() + 10
    while "hook" not in [e for e, _ in trace(out)] and time.monotonic() < deadline:
        time.sleep(0.05)
    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(timeout=grace + SLACK) == 0, a.log()[-3000:]
    gone = wait_gone(pid, t0 + grace + SLACK)
    tr = trace(out)
    h, term = first(tr, "hook"), first(tr, "term")
    assert term >= h + 2 - EARLY and gone >= term, tr
    # The next agent finds the stopped run and clears what it left (its
    # directory, the pod's cgroups).
    a, c = cell()
    c.wait_status(lambda s: not s["unitStatus"], timeout=20)
