# SPDX-License-Identifier: Apache-2.0
"""cell-agent running real pods, driven exactly as the Kip controller drives
it (tests/pylib/wire.py): a real registry, real containers through
cell-monitor, mutual TLS. Covers the pod lifecycle of issue 3: running and
logs, exit codes and each restart policy, init units, a spec change that
restarts one unit only, OOM kills, SIGTERM then SIGKILL, and an agent that
is killed with -9 and re-adopts its units.

CELL_AGENT_BACKOFF_UNIT_MS shrinks the kubelet's restart back-off (10 s
doubling) to milliseconds so restarts can be watched quickly.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

import leakcheck
from images import Image, busybox_layer, push
from wire import pod_params, unit
from test_agent_api import start_agent

FAST = {"CELL_AGENT_BACKOFF_UNIT_MS": "50", "CELL_CGROUP_NEST": "1"}


@pytest.fixture
def image(registry) -> str:
    push(registry, "t/bb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    return registry.ref("t/bb", "v1")


@pytest.fixture
def cell(tmp_path, registry):
    """A running agent; at the end its pod is emptied and it stops."""
    made = []

    def make(env=None, d=None, extra=()):
        a = start_agent(str(d or tmp_path / "agent"), "--insecure-registry", registry.host,
                        *extra, env={**FAST, **(env or {})})
        made.append(a)
        return a, a.client()

    yield make
    try:
        for a in made:
            if a.alive():
                try:
                    c = a.client()
                    c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
                    wait_units_gone(a)
                finally:
                    assert a.stop() == 0, a.log()[-3000:]
    finally:
        # A teardown that failed above (the pod did not empty in time)
        # must not leave units running, nor rootfs mounts for pytest's
        # clean-up to trip on. Units outlive their agent by design, so
        # anything still naming the agent's directory is a unit the pod's
        # emptying missed: killed, and the test fails saying so.
        left = []
        for d in {a.dir for a in made}:
            left += leakcheck.kill_below(d)
            unmount_below(d)
    assert not left, f"units left running after the pod was emptied: {left}"


def unmount_below(d: str) -> None:
    with open("/proc/self/mountinfo") as f:
        mps = [line.split()[4].replace("\\040", " ") for line in f]
    for mp in sorted((m for m in mps if m.startswith(d + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", mp], capture_output=True, timeout=30)


def wait_units_gone(a, timeout: float = 20) -> None:
    """Every unit stopped and its directory (rootfs mount included) gone."""
    units = os.path.join(a.dir, "state", "units")
    deadline = time.monotonic() + timeout
    while os.listdir(units) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.listdir(units), os.listdir(units)


def units_by_name(st: dict, key: str = "unitStatus") -> dict:
    return {u["name"]: u for u in st[key]}


def state_of(st: dict, name: str, key: str = "unitStatus") -> dict:
    return units_by_name(st, key).get(name, {}).get("state") or {}


def wait_state(c, name, kind, timeout=30, key="unitStatus", pred=None):
    return c.wait_status(lambda s: kind in state_of(s, name, key) and
                         (pred is None or pred(units_by_name(s, key)[name])), timeout=timeout)


def sh(img: str, name: str, script: str, **kw) -> dict:
    return unit(name, img, command=["/bin/sh", "-c", script], **kw)


def test_pod_runs_and_logs(cell, image):
    a, c = cell()
    c.update_pod(pod_params("ns_pod", units=[sh(image, "web", "echo hello; echo oops >&2; "
                                                 "exec sleep 1000")]))
    st = wait_state(c, "web", "running")
    u = units_by_name(st)["web"]
    assert u["ready"] is True and u["started"] is True and u["restartCount"] == 0
    assert u["image"] == image and st["podIP"]
    deadline = time.monotonic() + 10
    while c.logs("web") != b"hello\noops\n" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert c.logs("web") == b"hello\noops\n"


@pytest.mark.parametrize("policy,script,restarts,reason,code", [
    ("Never", "exit 3", False, "Error", 3),
    ("Never", "exit 0", False, "Completed", 0),
    ("OnFailure", "exit 0", False, "Completed", 0),
    ("OnFailure", "exit 3", True, "Error", 3),
    ("Always", "exit 0", True, "Completed", 0),
])
def test_exit_codes_and_restart_policies(cell, image, policy, script, restarts, reason, code):
    a, c = cell()
    c.update_pod(pod_params("ns_pod", units=[sh(image, "job", script)], restart_policy=policy))
    if restarts:
        st = c.wait_status(lambda s: units_by_name(s).get("job", {}).get("restartCount", 0) >= 2,
                           timeout=30)
        last = units_by_name(st)["job"]["lastState"]["terminated"]
    else:
        st = wait_state(c, "job", "terminated")
        time.sleep(1.0)  # long enough for several back-offs: none may come
        st = c.status()
        assert units_by_name(st)["job"]["restartCount"] == 0
        last = state_of(st, "job")["terminated"]
    assert (last["exitCode"], last["reason"]) == (code, reason), last
    assert last["startedAt"] and last["finishedAt"]


def test_init_units_run_in_order_first(cell, image):
    a, c = cell()
    c.update_pod(pod_params(
        "ns_pod",
        init_units=[sh(image, "first", "sleep 0.3; echo first"),
                    sh(image, "second", "echo second")],
        units=[sh(image, "main", "echo main; exec sleep 1000")]))
    st = wait_state(c, "main", "running")
    inits = units_by_name(st, "initUnitStatus")
    a1 = inits["first"]["state"]["terminated"]
    a2 = inits["second"]["state"]["terminated"]
    assert a1["exitCode"] == 0 and a2["exitCode"] == 0
    assert a1["finishedAt"] <= a2["startedAt"] <= state_of(st, "main")["running"]["startedAt"]


def test_failing_init_unit_with_never_fails_the_pod(cell, image):
    a, c = cell()
    c.update_pod(pod_params("ns_pod", restart_policy="Never",
                            init_units=[sh(image, "setup", "exit 7")],
                            units=[sh(image, "main", "exec sleep 1000")]))
    st = wait_state(c, "setup", "terminated", key="initUnitStatus")
    time.sleep(1.0)
    st = c.status()
    assert state_of(st, "setup", "initUnitStatus")["terminated"]["exitCode"] == 7
    assert "running" not in state_of(st, "main") and "terminated" not in state_of(st, "main")


def test_failing_init_unit_is_retried_otherwise(cell, image, tmp_path):
    a, c = cell()
    c.update_pod(pod_params("ns_pod", restart_policy="Always",
                            init_units=[sh(image, "setup", "exit 7")],
                            units=[sh(image, "main", "exec sleep 1000")]))
    st = c.wait_status(lambda s: units_by_name(s, "initUnitStatus").get("setup", {})
                       .get("restartCount", 0) >= 2, timeout=30)
    assert "running" not in state_of(st, "main")


def test_spec_change_restarts_only_that_unit(cell, image):
    a, c = cell()
    units = [sh(image, "a", "exec sleep 1000"), sh(image, "b", "exec sleep 1000")]
    grace = {"terminationGracePeriodSeconds": 1}  # sleep as PID 1 ignores TERM
    c.update_pod(pod_params("ns_pod", units=units, **grace))
    st = c.wait_status(lambda s: all("running" in state_of(s, n) for n in ("a", "b")))
    a_started = state_of(st, "a")["running"]["startedAt"]
    time.sleep(1.1)  # startedAt has a resolution of seconds
    units[1] = sh(image, "b", "exec sleep 1000",
                  env=[{"name": "CHANGED", "value": "yes"}])  # not name, not image
    c.update_pod(pod_params("ns_pod", units=units, **grace))
    st = wait_state(c, "b", "running", pred=lambda u: u["restartCount"] == 1)
    assert state_of(st, "a")["running"]["startedAt"] == a_started
    assert units_by_name(st)["a"]["restartCount"] == 0
    # A removed unit stops and leaves the status.
    c.update_pod(pod_params("ns_pod", units=units[:1], **grace))
    st = c.wait_status(lambda s: "b" not in units_by_name(s))
    assert "running" in state_of(st, "a")


def test_oom_kill_is_reported(cell, image):
    a, c = cell()
    c.update_pod(pod_params("ns_pod", restart_policy="Never",
                            units=[sh(image, "hog", "tail /dev/zero",
                                      resources={"Limits": {"memory": "32Mi"},
                                                 "Requests": None})],
                            # spec.resources only sized the instance: it
                            # limits no unit (issue 7).
                            resources={"cpu": "1", "memory": "32Mi"}))
    st = wait_state(c, "hog", "terminated", timeout=60)
    t = state_of(st, "hog")["terminated"]
    assert (t["reason"], t["exitCode"]) == ("OOMKilled", 137), t


@pytest.mark.parametrize("trap,lo,hi,code", [
    ("trap 'exit 143' TERM;", 0.0, 1.5, 143),
    ("trap '' TERM;", 1.8, 8.0, 137),
], ids=["honours-TERM", "ignores-TERM"])
def test_stop_is_sigterm_then_sigkill_after_grace(cell, image, trap, lo, hi, code):
    # The unit's shell is PID 1 of its namespace, where a signal without a
    # handler does nothing: it takes a trap to honour SIGTERM.
    a, c = cell()
    script = f"{trap} sleep 1000 & sleep 1000 & wait"
    pod = lambda env: pod_params("ns_pod", units=[sh(image, "s", script, env=env)],  # noqa
                                 terminationGracePeriodSeconds=2)
    c.update_pod(pod([]))
    wait_state(c, "s", "running")
    time.sleep(0.3)
    t0 = time.monotonic()
    c.update_pod(pod([{"name": "V", "value": "2"}]))  # a change: stop, run again
    st = wait_state(c, "s", "running", pred=lambda u: u["restartCount"] == 1)
    took = time.monotonic() - t0
    assert units_by_name(st)["s"]["lastState"]["terminated"]["exitCode"] == code
    assert lo <= took <= hi, f"stop took {took:.2f}s"


def read_json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def test_agent_kill_9_and_readoption(cell, image, tmp_path):
    d = tmp_path / "agent"
    a, c = cell(d=d)
    c.update_pod(pod_params("ns_pod", units=[sh(image, "web", "echo up; exec sleep 1000"),
                                             sh(image, "job", "exit 0")],
                            restart_policy="OnFailure", terminationGracePeriodSeconds=1))
    st = c.wait_status(lambda s: "running" in state_of(s, "web") and
                       "terminated" in state_of(s, "job"))
    before = units_by_name(st)
    run = d / "state" / "units" / "web" / "1"
    monitor = read_json(run / "state.json")
    os.killpg(a.proc.pid, signal.SIGKILL)
    a.proc.wait()
    # The unit lives on without the agent.
    pid = monitor.get("monitorPid") or monitor.get("monitor_pid")
    assert pid and os.path.exists(f"/proc/{pid}"), monitor
    a2, c2 = cell(d=d)
    st = c2.wait_status(lambda s: "running" in state_of(s, "web"))
    after = units_by_name(st)
    assert after["web"]["state"] == before["web"]["state"]  # same startedAt
    assert after["web"]["restartCount"] == 0
    assert after["job"]["state"] == before["job"]["state"]  # not run again
    assert not (d / "state" / "units" / "web" / "2").exists()  # nothing started twice
    assert read_json(run / "state.json") == monitor
    # Still managed: stopping it works through the new agent.
    c2.update_pod(pod_params("ns_pod", units=[], terminationGracePeriodSeconds=1))
    c2.wait_status(lambda s: not s["unitStatus"], timeout=20)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}"), "the monitor outlived its stop"


def test_probes_run_again_after_kill_9(cell, image, tmp_path):
    """A unit re-adopted by a restarted agent is probed again: its
    readiness follows the probe, not the value the old agent last saw."""
    d = tmp_path / "agent"
    a, c = cell(d=d)
    probe = {"exec": {"command": ["/bin/busybox", "test", "-f", "/tmp/ready"]},
             "periodSeconds": 1, "successThreshold": 1, "failureThreshold": 1}
    c.update_pod(pod_params("ns_pod", units=[sh(image, "web", "sleep 4; touch /tmp/ready; "
                                                 "exec sleep 1000", readinessProbe=probe)],
                            terminationGracePeriodSeconds=0))
    st = wait_state(c, "web", "running")
    assert units_by_name(st)["web"]["ready"] is False
    os.killpg(a.proc.pid, signal.SIGKILL)
    a.proc.wait()
    a2, c2 = cell(d=d)
    st = c2.wait_status(lambda s: units_by_name(s).get("web", {}).get("ready") is True,
                        timeout=30)
    assert units_by_name(st)["web"]["restartCount"] == 0


def test_bad_image_is_reported_and_retried(cell, registry):
    a, c = cell()
    c.update_pod(pod_params("ns_pod", units=[unit("x", registry.ref("t/nope", "v1"),
                                                   command=["/bin/true"])]))
    st = c.wait_status(lambda s: "waiting" in state_of(s, "x") and
                       "ErrImagePull" in state_of(s, "x")["waiting"].get("reason", ""))
    assert state_of(st, "x")["waiting"]["startFailure"] is False


def test_start_failure_is_reported(cell, image):
    a, c = cell()
    c.update_pod(pod_params("ns_pod", units=[unit("x", image, command=["/no/such/binary"])]))
    st = c.wait_status(lambda s: state_of(s, "x").get("waiting", {}).get("startFailure"))
    assert "/no/such/binary" in state_of(st, "x")["waiting"]["reason"]


def test_readiness_probe_gates_ready(cell, image):
    a, c = cell()
    probe = {"exec": {"command": ["/bin/busybox", "test", "-f", "/tmp/ready"]},
             "periodSeconds": 1, "successThreshold": 1, "failureThreshold": 1}
    c.update_pod(pod_params("ns_pod", units=[sh(image, "web", "sleep 2; touch /tmp/ready; "
                                                 "exec sleep 1000", readinessProbe=probe)],
                            terminationGracePeriodSeconds=0))
    st = wait_state(c, "web", "running")
    assert units_by_name(st)["web"]["ready"] is False
    st = c.wait_status(lambda s: units_by_name(s)["web"]["ready"] is True, timeout=20)
    assert units_by_name(st)["web"]["restartCount"] == 0


def test_failing_liveness_probe_restarts_the_unit(cell, image):
    a, c = cell()
    probe = {"exec": {"command": ["/bin/busybox", "false"]},
             "initialDelaySeconds": 1, "periodSeconds": 1, "failureThreshold": 2}
    c.update_pod(pod_params("ns_pod", units=[sh(image, "web", "exec sleep 1000",
                                                 livenessProbe=probe)],
                            terminationGracePeriodSeconds=0))
    st = c.wait_status(lambda s: units_by_name(s).get("web", {}).get("restartCount", 0) >= 1,
                       timeout=30)
    last = units_by_name(st)["web"]["lastState"]["terminated"]
    assert last["exitCode"] == 137, last


def test_resource_usage_is_reported(cell, image):
    a, c = cell()
    c.update_pod(pod_params("ns_pod", units=[sh(image, "web", "exec sleep 1000")],
                            terminationGracePeriodSeconds=0))
    wait_state(c, "web", "running")
    st = c.wait_status(lambda s: "web.memoryUsage" in (s.get("resourceUsage") or {}))
    u = st["resourceUsage"]
    for k in ("cpu", "memory", "disk", "fsAvailable", "fsCapacity", "fsUsed", "fsInodes",
              "netRx", "netTx", "web.cpuUsage", "web.memoryUsage", "web.memoryWorkingSet"):
        assert k in u and isinstance(u[k], (int, float)), (k, u)
    assert 0 < u["fsAvailable"] <= u["fsCapacity"] and u["web.memoryUsage"] > 0


def test_redeploy_of_a_mounted_package_swaps_its_content(cell, image, tmp_path):
    """A unit that mounts a configMap (and the same package as a
    packagePath) while the controller redeploys it: every file the unit
    reads is the old version's or the new one's, never missing (an empty
    directory), and the unit sees the last version (the kubelet's ..data
    swap)."""
    a, c = cell()
    out = tmp_path / "out"
    out.mkdir()
    for pkg in ("cfg", "pp"):
        c.deploy("ns_pod", pkg, {"a/conf": "v0\n", "b/conf": "v0\n"})
    script = ("while :; do echo \"$(cat /cfg/a/conf /cfg/b/conf /pp/a/conf 2>&1)\" "
              "| tr '\\n' ' ' >> /out/seen; echo >> /out/seen; done & exec sleep 1000")
    vols = [{"name": "cfg", "configMap": {"name": "cfg", "items": [], "defaultMode": 0o644}},
            {"name": "pp", "packagePath": {"path": ""}},
            {"name": "out", "hostPath": {"path": str(out)}}]
    mounts = [{"name": "cfg", "mountPath": "/cfg"}, {"name": "pp", "mountPath": "/pp"},
              {"name": "out", "mountPath": "/out"}]
    c.update_pod(pod_params("ns_pod", units=[sh(image, "reader", script, volumeMounts=mounts)],
                            volumes=vols, terminationGracePeriodSeconds=0))
    wait_state(c, "reader", "running")
    for v in range(1, 21):
        for pkg in ("cfg", "pp"):
            c.deploy("ns_pod", pkg, {"a/conf": f"v{v}\n", "b/conf": f"v{v}\n"})
        time.sleep(0.05)
    deadline = time.monotonic() + 15
    lines = []
    while time.monotonic() < deadline:
        lines = (out / "seen").read_text().splitlines()
        if len(lines) > 1 and lines[-2] == "v20 v20 v20 ":
            break
        time.sleep(0.2)
    assert len(lines) > 20 and lines[-2] == "v20 v20 v20 ", lines[-5:]
    bad = [l for l in lines[:-1] if not re.fullmatch(r"(v\d+ ){3}", l)]
    assert not bad, bad[:5]


def ns_spec(image: str, out, nso: dict, names=("a", "b"), shm_tag: str = "cell") -> dict:
    """Units that each put a file into /dev/shm, then report, every 0.2 s,
    their PID and IPC namespaces, PID 1's name, the command lines they can
    see and what /dev/shm holds, into out/<name>.*."""
    bb = "/bin/busybox"
    units = []
    for i, n in enumerate(names):
        script = (f"echo {n} > /dev/shm/{shm_tag}-{n}; "
                  f"while :; do ls /dev/shm > /out/{n}.shm; "
                  f"readlink /proc/self/ns/pid > /out/{n}.pid; "
                  f"readlink /proc/self/ns/ipc > /out/{n}.ipc; cat /proc/1/comm > /out/{n}.one; "
                  f"for p in /proc/[0-9]*; do {bb} tr '\\0' ' ' < $p/cmdline; echo; done "
                  f"> /out/{n}.ps.tmp 2>/dev/null; {bb} mv /out/{n}.ps.tmp /out/{n}.ps; "
                  f"{bb} sleep 0.2; done & exec {bb} sleep {1001 + i}")
        units.append(sh(image, n, script, volumeMounts=[{"name": "out", "mountPath": "/out"}]))
    sc = {"namespaceOptions": nso, "runAsUser": None, "runAsGroup": None,
          "supplementalGroups": [], "sysctls": []}
    return pod_params("ns_pod", units=units, securityContext=sc,
                      volumes=[{"name": "out", "hostPath": {"path": str(out)}}],
                      terminationGracePeriodSeconds=0)


def read_when(path, pred=lambda t: t.strip(), timeout=20.0) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            text = path.read_text()
        except FileNotFoundError:
            text = ""
        if pred(text):
            return text
        time.sleep(0.1)
    raise AssertionError(f"{path}: {text!r}")


def test_pid_and_ipc_namespace_options(cell, image, tmp_path):
    """namespaceOptions with the CRI meanings Kip's converter writes: pid
    POD (shareProcessNamespace) puts the units into one PID namespace whose
    PID 1 is the agent's pod-init; pid/ipc NODE (hostPID, hostIPC) are the
    cell's; CONTAINER (Kip's default) gives each unit its own."""
    # pod-init ends its start in the new PID namespace, where a sanitizer
    # build's LeakSanitizer spins (see test_monitor.py); the monitor
    # inherits the agent's environment. No effect on normal builds.
    asan = (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    a, c = cell(env={"ASAN_OPTIONS": asan})
    host_pid, host_ipc = os.readlink("/proc/self/ns/pid"), os.readlink("/proc/self/ns/ipc")
    # Shared: one PID and IPC namespace, PID 1 the holder, each unit sees the
    # other's processes.
    out = tmp_path / "shared"
    out.mkdir()
    stag = f"kipfields-{os.getpid()}"
    c.update_pod(ns_spec(image, out, {"pid": 0, "ipc": 0}, shm_tag=stag))
    ps_a = read_when(out / "a.ps", lambda t: "sleep 1002" in t)
    ps_b = read_when(out / "b.ps", lambda t: "sleep 1001" in t)
    assert "pod-init" in ps_a and "pod-init" in ps_b
    assert read_when(out / "a.one").strip() == "pod-init"
    assert read_when(out / "a.pid") == read_when(out / "b.pid")
    assert read_when(out / "a.pid").strip() != host_pid
    assert read_when(out / "a.ipc") == read_when(out / "b.ipc")
    assert read_when(out / "a.ipc").strip() != host_ipc
    # POSIX shared memory too: one /dev/shm for the pod, not the cell's.
    for n in ("a", "b"):
        assert read_when(out / f"{n}.shm", lambda t: f"{stag}-a" in t and f"{stag}-b" in t)
    assert not [f for f in os.listdir("/dev/shm") if f.startswith(stag)]
    holder = int(open(os.path.join(a.dir, "state", "podns.json")).read().split()[0])
    assert os.readlink(f"/proc/{holder}/ns/pid") == read_when(out / "a.pid").strip()
    assert os.readlink(f"/proc/{holder}/root") != "/"  # chrooted, out of the way
    # Host: the cell's namespaces (a pod-wide change: the pod restarts, and
    # the holder goes once no unit is left).
    out = tmp_path / "host"
    out.mkdir()
    tag = f"cell-kipfields-{os.getpid()}"
    try:
        c.update_pod(ns_spec(image, out, {"network": 0, "pid": 2, "ipc": 2}, names=("a",),
                             shm_tag=tag))
        read_when(out / "a.shm", lambda t: f"{tag}-a" in t)
        assert os.path.exists(f"/dev/shm/{tag}-a")  # the cell's /dev/shm
    finally:
        if os.path.exists(f"/dev/shm/{tag}-a"):
            os.unlink(f"/dev/shm/{tag}-a")
    assert read_when(out / "a.pid").strip() == host_pid
    assert read_when(out / "a.ipc").strip() == host_ipc
    assert "sleep 1001" in read_when(out / "a.ps", lambda t: "sleep 1001" in t)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{holder}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{holder}")
    # Container (Kip's default): each unit its own.
    out = tmp_path / "own"
    out.mkdir()
    c.update_pod(ns_spec(image, out, {"network": 0, "pid": 1, "ipc": 1}))
    pa, pb = read_when(out / "a.pid"), read_when(out / "b.pid")
    assert pa != pb and host_pid not in (pa.strip(), pb.strip())
    assert read_when(out / "a.ipc") != read_when(out / "b.ipc")
    assert "sleep 1002" not in read_when(out / "a.ps", lambda t: "sleep 1001" in t)
    assert "cell-b" not in read_when(out / "a.shm", lambda t: "cell-a" in t)
    assert not os.path.exists(os.path.join(a.dir, "state", "podshm"))  # gone with the holder
