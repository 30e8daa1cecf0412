# SPDX-License-Identifier: Apache-2.0
"""cell-agent leaves nothing behind (issue 14), each test failing before its
fix:

* an agent killed with -9 right after a unit was removed from the spec
  leaked that unit's directory, its overlay mount and (when its monitor
  died too) its cgroup for good: at start the agent now removes what its
  state no longer names, and stops a removed unit whose monitor still runs;
* an emptied pod left an empty cgroup directory (cell/<tag>) in every
  hierarchy;
* unmasked client websocket frames were accepted (RFC 6455 5.1 says the
  server must close the connection): a port-forward stream now closes with
  1002 and the frame's payload never reaches the port.
"""
from __future__ import annotations

import base64
import collections
import glob
import hashlib
import json
import os
import signal
import socket
import struct
import threading
import time

import pytest
import websocket

from images import Image, busybox_layer, push
from wire import pod_params, unit
from test_agent_api import kill_unit_leftovers, start_agent

FAST = {"CELL_AGENT_BACKOFF_UNIT_MS": "50"}
# A unit that outlives SIGTERM: it stays "stopping" for the whole grace.
# Ignores SIGTERM, but says it got one (so a test knows the stop began).
STUBBORN = "trap 'echo term' TERM; echo up; while true; do sleep 0.2; done"


@pytest.fixture
def image(registry) -> str:
    push(registry, "t/bb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    return registry.ref("t/bb", "v1")


def sh(img: str, name: str, script: str) -> dict:
    return unit(name, img, command=["/bin/sh", "-c", script])


def pod_cgroups(state_dir: str) -> list:
    """The pod's cgroup directory in each hierarchy (cell/<tag>, the tag
    from the state directory's name, as agent/sup/supervisor.c makes it)."""
    tag = hashlib.sha256(state_dir.encode()).hexdigest()[:16]
    return glob.glob(f"/sys/fs/cgroup/*/cell/{tag}") + glob.glob(f"/sys/fs/cgroup/cell/{tag}")


def unit_cgroups(state_dir: str, name: str) -> list:
    return [os.path.join(p, x) for p in pod_cgroups(state_dir) for x in os.listdir(p)
            if x.startswith(name + "-")]


def mounts_below(d: str) -> list:
    with open("/proc/self/mountinfo") as f:
        mps = [line.split()[4].replace("\\040", " ") for line in f]
    return [m for m in mps if m.startswith(d + "/")]


def read_json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(pred, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def wait_running(c, *names: str) -> dict:
    def ok(s):
        st = {u["name"]: u.get("state") or {} for u in s["unitStatus"]}
        return all("running" in st.get(n, {}) for n in names)
    return c.wait_status(ok, timeout=60)


def saved_units(state: str) -> list:
    try:
        return [u["name"] for u in read_json(os.path.join(state, "pod.json"))
                .get("spec", {}).get("units") or []]
    except (OSError, ValueError):
        return []


@pytest.fixture
def agents(tmp_path, registry):
    """Agents of one state directory; at the end whatever runs is emptied
    and stopped, and anything left below the directory is reported."""
    made = []
    d = str(tmp_path / "leaks-agent")

    def make():
        a = start_agent(d, "--insecure-registry", registry.host, env=FAST)
        made.append(a)
        return a, a.client()

    try:
        yield make, d
        for a in made:
            if a.alive():
                try:
                    a.client().update_pod(pod_params("ns_leaks",
                                                     terminationGracePeriodSeconds=0))
                    units = os.path.join(d, "state", "units")
                    wait_for(lambda: not os.listdir(units), 30, "the pod to empty")
                finally:
                    assert a.stop() == 0, a.log()[-3000:]
    finally:
        # Whatever a failed test left: monitors, cgroups, then mounts.
        for a in made:
            if a.alive():
                a.proc.kill()
        for name in ("keep", "gone"):
            kill_unit_leftovers(d, name)


def kill_9(a) -> None:
    os.killpg(a.proc.pid, signal.SIGKILL)
    a.proc.wait()


def unit_log(d: str, name: str) -> bytes:
    """A unit's CRI log, read through its /var/log/containers link (the
    API no longer names a removed unit)."""
    out = b""
    for p in glob.glob(os.path.join(d, "varlog", "containers", f"*_{name}-*.log")):
        try:
            with open(p, "rb") as f:
                out += f.read()
        except OSError:
            pass
    return out


def remove_gone_and_kill(a, c, d: str, image: str, grace: int) -> int:
    """Run keep and gone; remove gone (it ignores SIGTERM, so it is still
    stopping), kill the agent with -9 once the spec without it is on disk.
    Returns gone's monitor pid."""
    state = os.path.join(d, "state")
    c.update_pod(pod_params("ns_leaks", units=[sh(image, "keep", "exec sleep 1000"),
                                               sh(image, "gone", STUBBORN)],
                            terminationGracePeriodSeconds=grace))
    wait_running(c, "keep", "gone")
    mon = read_json(os.path.join(state, "units", "gone", "1", "state.json"))["monitorPid"]
    c.update_pod(pod_params("ns_leaks", units=[sh(image, "keep", "exec sleep 1000")],
                            terminationGracePeriodSeconds=grace))
    wait_for(lambda: saved_units(state) == ["keep"], 10, "the new spec on disk")
    # On disk comes before the supervisor takes the spec (updatepod answers
    # once it is synced): wait until gone was told to stop.
    wait_for(lambda: b"term" in unit_log(d, "gone"), 10, "gone told to stop")
    kill_9(a)
    return mon



def test_leaks_kill_9_after_removal_dead_monitor(agents, image):
    """The removed unit's monitor finishes its stop after the agent died: its
    directory, overlay mount and cgroup stay until the next agent starts."""
    make, d = agents
    a, c = make()
    state = os.path.join(d, "state")
    gone = os.path.join(state, "units", "gone")
    mon = remove_gone_and_kill(a, c, d, image, grace=1)
    # The monitor SIGKILLs the unit after the grace and exits.
    wait_for(lambda: not alive(mon), 20, "gone's monitor to finish")
    assert os.path.isdir(gone) and mounts_below(gone), "precondition: the leak exists"
    a2, c2 = make()
    wait_running(c2, "keep")
    wait_for(lambda: not os.path.exists(gone), 10, "gone's directory to be removed")
    assert not mounts_below(gone)
    assert not unit_cgroups(state, "gone")
    # keep was not touched: same run, still running, its rootfs mounted.
    st = c2.status()
    assert [u["name"] for u in st["unitStatus"]] == ["keep"]
    assert st["unitStatus"][0]["restartCount"] == 0
    assert mounts_below(os.path.join(state, "units", "keep", "1"))


def test_leaks_kill_9_after_removal_monitor_killed_too(agents, image):
    """Agent and the removed unit's monitor both killed: the unit's processes
    live on in its cgroup. The next agent kills them and removes it all."""
    make, d = agents
    a, c = make()
    state = os.path.join(d, "state")
    gone = os.path.join(state, "units", "gone")
    mon = remove_gone_and_kill(a, c, d, image, grace=30)
    cgs = unit_cgroups(state, "gone")
    assert cgs
    os.kill(mon, signal.SIGKILL)
    wait_for(lambda: not alive(mon), 10, "gone's monitor to die")
    a2, c2 = make()
    wait_running(c2, "keep")
    wait_for(lambda: not os.path.exists(gone), 15, "gone's directory to be removed")
    assert not mounts_below(gone)
    assert not any(os.path.exists(cg) for cg in cgs), cgs
    assert [u["name"] for u in c2.status()["unitStatus"]] == ["keep"]


def test_leaks_kill_9_after_removal_monitor_alive(agents, image):
    """The agent comes back while the removed unit is still stopping: its
    monitor is adopted and the unit stops and goes the normal way."""
    make, d = agents
    a, c = make()
    state = os.path.join(d, "state")
    gone = os.path.join(state, "units", "gone")
    mon = remove_gone_and_kill(a, c, d, image, grace=3)
    assert alive(mon)
    a2, c2 = make()
    wait_running(c2, "keep")
    wait_for(lambda: not alive(mon), 15, "gone's monitor to stop")
    wait_for(lambda: not os.path.exists(gone), 10, "gone's directory to be removed")
    assert not mounts_below(gone) and not unit_cgroups(state, "gone")
    assert [u["name"] for u in c2.status()["unitStatus"]] == ["keep"]


def test_leaks_half_pulled_run_after_kill_9(agents, image):
    """A run directory no record names (a pull's rootfs mounted when the
    agent died) goes at start; the unit's current run stays."""
    make, d = agents
    a, c = make()
    state = os.path.join(d, "state")
    c.update_pod(pod_params("ns_leaks", units=[sh(image, "keep", "exec sleep 1000")]))
    wait_running(c, "keep")
    kill_9(a)
    stray = os.path.join(state, "units", "keep", "7")
    os.makedirs(os.path.join(stray, "rootfs"))
    os.system(f"mount -t tmpfs leaks-stray {stray}/rootfs")
    assert mounts_below(stray)
    a2, c2 = make()
    wait_running(c2, "keep")
    wait_for(lambda: not os.path.exists(stray), 10, "the stray run to be removed")
    assert not mounts_below(stray)
    assert os.path.exists(os.path.join(state, "units", "keep", "1", "state.json"))
    assert c2.status()["unitStatus"][0]["restartCount"] == 0


def test_leaks_emptied_pod_removes_its_cgroups(agents, image):
    make, d = agents
    a, c = make()
    state = os.path.join(d, "state")
    c.update_pod(pod_params("ns_leaks", units=[sh(image, "keep", "exec sleep 1000")],
                            terminationGracePeriodSeconds=0))
    wait_running(c, "keep")
    assert pod_cgroups(state), "precondition: the pod has cgroups"
    c.update_pod(pod_params("ns_leaks", terminationGracePeriodSeconds=0))
    units = os.path.join(state, "units")
    wait_for(lambda: not os.listdir(units), 20, "the pod to empty")
    wait_for(lambda: not pod_cgroups(state), 5, "the pod's cgroups to go")
    # And they come back for the next unit.
    c.update_pod(pod_params("ns_leaks", units=[sh(image, "keep", "exec sleep 1000")],
                            terminationGracePeriodSeconds=0))
    wait_running(c, "keep")
    assert pod_cgroups(state)


def test_leaks_agent_stopped_right_after_the_pod_is_deleted(agents, image):
    """A pod deleted with no grace and the agent stopped at once (the
    controller's or an operator's order of things): the agent's stop waits
    a little for the monitors it just told to stop, and sweeps their runs,
    so nothing of the pod is left for a next agent that may never come.
    The monitor is held (SIGSTOP) from its unit's death until the agent's
    stop has begun: a slow machine's timing, made certain."""
    make, d = agents
    state = os.path.join(d, "state")
    a, c = make()
    c.update_pod(pod_params("ns_leaks", units=[sh(image, "keep", "exec sleep 1000")],
                            terminationGracePeriodSeconds=0))
    wait_running(c, "keep")
    st = read_json(os.path.join(state, "units", "keep", "1", "state.json"))
    mon, pid = st["monitorPid"], st["containerPid"]
    c.update_pod(pod_params("ns_leaks", terminationGracePeriodSeconds=0))
    end = time.monotonic() + 10
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.001)
    os.kill(mon, signal.SIGSTOP)
    held = alive(mon)
    try:
        a.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
    finally:
        os.kill(mon, signal.SIGCONT)
    assert a.stop() == 0, a.log()[-3000:]
    if not held:
        pytest.skip("the monitor had ended before it could be held")
    assert not mounts_below(state), a.log()[-3000:]
    assert not os.listdir(os.path.join(state, "units"))
    assert not any(os.listdir(p) for p in pod_cgroups(state)), pod_cgroups(state)


def file_fds(pid: int) -> collections.Counter:
    """The agent's descriptors by what they name, connections and pipes
    left out (they come and go with clients and children)."""
    out = collections.Counter()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if not t.startswith(("socket:", "pipe:")):
            out[t] += 1
    return out


def test_leaks_first_start_opens_no_descriptor_for_good(agents, image):
    """What an agent holds once its first unit has come and gone is what it
    held before it: the soak takes a fresh idle agent's descriptors as the
    norm, and the cgroup primer's (cgroup.procs, its eventfd) opened at the
    first start counted as a leak."""
    make, d = agents
    a, c = make()
    state = os.path.join(d, "state")
    before = file_fds(a.proc.pid)
    c.update_pod(pod_params("ns_leaks", units=[sh(image, "once", "exec sleep 1000")],
                            terminationGracePeriodSeconds=0))
    wait_running(c, "once")
    c.update_pod(pod_params("ns_leaks", terminationGracePeriodSeconds=0))
    units = os.path.join(state, "units")
    wait_for(lambda: not os.listdir(units), 20, "the pod to empty")
    time.sleep(0.5)
    after = file_fds(a.proc.pid)
    assert not after - before, f"opened and kept: {dict(after - before)}"


# ---------------------------------------------------------------------------
# unmasked client frames


def raw_frame(payload: bytes, masked: bool, opcode: int = 0x1) -> bytes:
    """One final frame; mask=0 is what RFC 6455 5.1 forbids a client."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    mbit = 0x80 if masked else 0
    if n < 126:
        head += bytes([mbit | n])
    else:
        head += bytes([mbit | 126]) + struct.pack("!H", n)
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def test_leaks_unmasked_client_frame_closes_1002(agents):
    make, d = agents
    a, c = make()
    got = bytearray()
    srv = socket.socket()
    srv.bind(("0.0.0.0", 0))  # the pod IP: the host's own address here
    srv.listen(1)
    port = srv.getsockname()[1]

    def serve():
        conn, _ = srv.accept()
        conn.settimeout(10)
        try:
            while True:
                b = conn.recv(4096)
                if not b:
                    break
                got.extend(b)
        except OSError:
            pass
        conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    s = c.port_forward(port)
    s.send(0, b"masked-ok")
    wait_for(lambda: b"masked-ok" in got, 10, "the masked frame at the port")
    s.ws.sock.sendall(raw_frame(b"0" + base64.b64encode(b"UNMASKED"), masked=False))
    s.ws.settimeout(10)
    code = None
    try:
        while True:
            op, data = s.ws.recv_data(control_frame=True)
            if op == websocket.ABNF.OPCODE_CLOSE:
                code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else None
                break
    except (websocket.WebSocketConnectionClosedException, OSError):
        pass
    assert code == 1002
    t.join(10)
    time.sleep(0.3)
    assert b"UNMASKED" not in bytes(got)
    srv.close()
    assert a.alive()
    assert c.ping()
