# SPDX-License-Identifier: Apache-2.0
"""The agent's helper processes (agent/base/pullproc.h): image pulls run in a
cell-pull child and deploy packages are extracted by a cell-unpack child,
so cell-agent never maps libcurl or libarchive, a crash or a hostile layer
stays in the child, and the supervisor's loop (which watches the child by
pidfd) never blocks on a registry. Credentials reach cell-pull on a pipe,
never in its argv or environment.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest

from images import Image, Layer, Raw, busybox_layer, push, random_layer
from test_agent_api import AGENT, start_agent
from test_agent_pod import FAST, image, sh, state_of, units_by_name, wait_state  # noqa: F401
from wire import WireError, pod_params

# (libstdc++ is not here: an ASan build maps it for its runtime.)
HEAVY = ("libcurl", "libarchive", "libcivetweb")


def mapped(pid: int) -> set:
    with open(f"/proc/{pid}/maps") as f:
        return {name for line in f for name in HEAVY if name in line}


def children(pid: int) -> list:
    kids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            kids += [int(k) for k in f.read().split()]
    return kids


def helper_pids(agent_pid: int, name: str) -> list:
    out = []
    for k in children(agent_pid):
        try:
            with open(f"/proc/{k}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except FileNotFoundError:
            continue
        if argv and os.path.basename(argv[0]).decode() == name:
            out.append(k)
    return out


def wait_for(pred, timeout: float = 20, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise TimeoutError(what)


class Stall:
    """A registry that accepts connections and then never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.sock.accept()
                self.held.append(c)
            except OSError:
                continue

    def close(self):
        self.stop = True
        self.t.join()
        for c in self.held:
            c.close()
        self.sock.close()


def test_agent_binary_links_no_heavy_library():
    # civetweb is built from source and linked in statically (scripts/deps.sh);
    # libcurl and libarchive live in the helpers.
    out = subprocess.run(["readelf", "-d", AGENT], capture_output=True, text=True,
                         check=True).stdout
    needed = [line for line in out.splitlines() if "(NEEDED)" in line]
    assert needed, out
    for lib in ("libcurl", "libarchive", "libisal", "libzstd", "libcivetweb",
                "libstdc++"):
        assert not any(lib in line for line in needed), needed


def test_pull_and_deploy_in_children_never_map_curl_or_archive(tmp_path, registry):
    big = Image([busybox_layer(), random_layer(24 << 20, seed=b"civet")],
                config={"Cmd": ["/bin/sh"]})
    push(registry, "t/big", "v1", big)
    ref = registry.ref("t/big", "v1")
    secret = "pw-" + uuid.uuid4().hex
    # Slow enough to look at the pull while it runs.
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    env={**FAST, "CELL_PULL_MAX_RECV_SPEED": str(8 << 20)})
    c = a.client()
    pid = a.proc.pid
    try:
        assert mapped(pid) == set()
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "one", "sleep 1000")],
                                credentials={registry.host: {
                                    "server": registry.host, "username": "u",
                                    "password": secret}}))
        kid = wait_for(lambda: helper_pids(pid, "cell-pull"), what="cell-pull child")[0]
        # During the pull: the child has the heavy libraries, the agent not.
        assert mapped(pid) == set()
        with open(f"/proc/{kid}/cmdline", "rb") as f:
            assert secret.encode() not in f.read()
        with open(f"/proc/{kid}/environ", "rb") as f:
            assert secret.encode() not in f.read()
        t0 = time.monotonic()
        c.status()
        assert time.monotonic() - t0 < 1
        wait_state(c, "one", "running", timeout=60)
        assert mapped(pid) == set()
        assert helper_pids(pid, "cell-pull") == []
        # A deploy runs cell-unpack (libarchive) in a child too.
        c.deploy("ns_pod", "resolvconf", {"resolv.conf": "nameserver 127.0.0.1\n"})
        with open(os.path.join(a.packages, "resolvconf", "resolv.conf")) as f:
            assert f.read() == "nameserver 127.0.0.1\n"
        assert mapped(pid) == set()
    finally:
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        assert a.stop() == 0, a.log()[-3000:]


def test_killed_pull_child_leaves_agent_serving_unit_waiting(tmp_path, registry):
    big = Image([busybox_layer(), random_layer(16 << 20, seed=b"kill")],
                config={"Cmd": ["/bin/sh"]})
    push(registry, "t/kill", "v1", big)
    ref = registry.ref("t/kill", "v1")
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    env={**FAST, "CELL_PULL_MAX_RECV_SPEED": str(1 << 20),
                         "CELL_AGENT_BACKOFF_UNIT_MS": "3000"})
    c = a.client()
    try:
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "one", "sleep 1000")]))
        kid = wait_for(lambda: helper_pids(a.proc.pid, "cell-pull"), what="child")[0]
        os.kill(kid, signal.SIGKILL)
        st = wait_state(c, "one", "waiting", timeout=10,
                        pred=lambda u: "killed by signal 9" in
                        (u["state"]["waiting"].get("reason") or ""))
        reason = units_by_name(st)["one"]["state"]["waiting"]["reason"]
        assert reason.startswith("ErrImagePull"), reason
        assert c.ping() == "pong"
        assert a.alive()
    finally:
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        assert a.stop() == 0, a.log()[-3000:]


def test_hostile_layer_stays_in_the_child(tmp_path, registry):
    escape = f"/tmp/civet-escape-{uuid.uuid4().hex}"
    bad = Layer([Raw("../../../../../../.." + escape, content=b"pwned")])
    push(registry, "t/hostile", "v1", Image([busybox_layer(), bad],
                                            config={"Cmd": ["/bin/sh"]}))
    ref = registry.ref("t/hostile", "v1")
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    env={**FAST, "CELL_AGENT_BACKOFF_UNIT_MS": "3000"})
    c = a.client()
    try:
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "one", "true")]))
        st = wait_state(c, "one", "waiting", timeout=30,
                        pred=lambda u: (u["state"]["waiting"].get("reason") or "")
                        .startswith("ErrImagePull"))
        assert "ErrImagePull" in units_by_name(st)["one"]["state"]["waiting"]["reason"]
        assert not os.path.exists(escape)
        assert c.ping() == "pong" and a.alive()
        assert mapped(a.proc.pid) == set()
    finally:
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        assert a.stop() == 0, a.log()[-3000:]


def test_stalled_registry_does_not_stop_the_supervisor(tmp_path, registry, image):
    stall = Stall()
    stalled = f"127.0.0.1:{stall.port}/t/never:v1"
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    "--insecure-registry", f"127.0.0.1:{stall.port}", env=FAST)
    c = a.client()
    try:
        # A unit that keeps exiting (restarts are due all the time) and
        # one whose image hangs.
        crash = sh(image, "crash", "sleep 0.3; exit 3")
        c.update_pod(pod_params("ns_pod", units=[crash]))
        wait_state(c, "crash", "running")
        c.update_pod(pod_params("ns_pod", units=[crash, sh(stalled, "stuck", "true")]))
        wait_for(lambda: helper_pids(a.proc.pid, "cell-pull"), what="the stalled pull")
        # Status answers at once; the crashing unit keeps being restarted.
        first = units_by_name(c.status())["crash"]["restartCount"]
        for _ in range(10):
            t0 = time.monotonic()
            c.status()
            assert time.monotonic() - t0 < 1
            time.sleep(0.2)
        st = c.wait_status(lambda s: units_by_name(s)["crash"]["restartCount"] >= first + 2,
                           timeout=15)
        assert "stuck" in units_by_name(st)
        assert helper_pids(a.proc.pid, "cell-pull"), "the stalled pull ended?"
        # A newer spec that gives the stuck unit a good image is applied
        # now: the stale pull is killed and the unit runs the new image.
        t0 = time.monotonic()
        c.update_pod(pod_params("ns_pod", units=[crash, sh(image, "stuck", "sleep 1000")]))
        wait_state(c, "stuck", "running", timeout=20)
        assert time.monotonic() - t0 < 20
        wait_for(lambda: not helper_pids(a.proc.pid, "cell-pull"), timeout=10,
                 what="the stale pull killed")
        # A unit removed while its pull hangs: the pull is killed, the unit goes.
        good = sh(image, "stuck", "sleep 1000")
        c.update_pod(pod_params("ns_pod", units=[crash, good, sh(stalled, "gone", "true")]))
        wait_for(lambda: helper_pids(a.proc.pid, "cell-pull"), what="the pull of gone")
        c.update_pod(pod_params("ns_pod", units=[crash, good]))
        c.wait_status(lambda s: "gone" not in units_by_name(s), timeout=10)
        wait_for(lambda: not helper_pids(a.proc.pid, "cell-pull"), timeout=10,
                 what="the pull of the removed unit killed")
        # SIGTERM while another pull hangs: the agent stops on time. (Units
        # outlive the agent, so the running ones go first.)
        c.update_pod(pod_params("ns_pod", units=[sh(stalled, "stuck2", "true")],
                                terminationGracePeriodSeconds=0))
        c.wait_status(lambda s: not {"crash", "stuck"} & set(units_by_name(s)), timeout=15)
        for gone in ("crash", "stuck"):
            wait_for(lambda: not os.path.exists(os.path.join(a.dir, "state", "units", gone)),
                     what=f"{gone}'s directory gone")
        wait_for(lambda: helper_pids(a.proc.pid, "cell-pull"), what="the second pull")
        t0 = time.monotonic()
        a.proc.send_signal(signal.SIGTERM)
        a.proc.wait(timeout=15)
        assert time.monotonic() - t0 < 10
        assert a.proc.returncode == 0, a.log()[-3000:]
    finally:
        stall.close()
        if a.alive():
            a.stop()


def test_big_pull_does_not_delay_status(tmp_path, registry):
    """A ~100 MB image: every status reply during the pull comes within a
    loose bound (the figure itself is in bench/agent.sh's output)."""
    big = Image([busybox_layer(), random_layer(100 << 20, seed=b"hundred")],
                config={"Cmd": ["/bin/sh"]})
    push(registry, "t/hundred", "v1", big)
    ref = registry.ref("t/hundred", "v1")
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host, env=FAST)
    c = a.client()
    try:
        c.status()
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "one", "sleep 1000")]))
        worst, n = 0.0, 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            st = c.status()
            worst = max(worst, time.monotonic() - t0)
            n += 1
            if "running" in state_of(st, "one"):
                break
            time.sleep(0.01)
        assert "running" in state_of(st, "one"), st
        assert n >= 5, n
        assert worst < 0.5, f"a status reply took {worst * 1000:.0f} ms during the pull"
    finally:
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        assert a.stop() == 0, a.log()[-3000:]


def test_missing_helpers_are_clear_errors(tmp_path, registry, image):
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    "--pull-bin", str(tmp_path / "no-pull"),
                    "--unpack-bin", str(tmp_path / "no-unpack"), env=FAST)
    c = a.client()
    try:
        c.update_pod(pod_params("ns_pod", units=[sh(image, "one", "true")]))
        wait_state(c, "one", "waiting",
                   pred=lambda u: "no-pull" in (u["state"]["waiting"].get("reason") or ""))
        with pytest.raises(WireError) as e:
            c.deploy("ns_pod", "resolvconf", {"resolv.conf": "nameserver 127.0.0.1\n"})
        assert "no-unpack" in e.value.body
        assert c.ping() == "pong"
    finally:
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        assert a.stop() == 0, a.log()[-3000:]


def test_credentials_reach_cell_pull_on_its_pipe(tmp_path, make_registry):
    reg = make_registry(htpasswd={"civet": "s3cret-civet"})
    push(reg, "t/private", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    ref = reg.ref("t/private", "v1")
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", reg.host, env=FAST)
    c = a.client()
    try:
        # Without credentials the registry says 401; with them it runs.
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "one", "sleep 1000")]))
        wait_state(c, "one", "waiting",
                   pred=lambda u: "ErrImagePull" in (u["state"]["waiting"].get("reason") or ""))
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "one", "sleep 1000")],
                                credentials={reg.host: {"server": reg.host, "username": "civet",
                                                        "password": "s3cret-civet"}}))
        wait_state(c, "one", "running", timeout=60)
        assert "s3cret-civet" not in a.log()
    finally:
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        assert a.stop() == 0, a.log()[-3000:]


def test_pull_child_dies_with_a_killed_agent(tmp_path, registry):
    stall = Stall()
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", f"127.0.0.1:{stall.port}",
                    env=FAST)
    try:
        a.client().update_pod(pod_params("ns_pod", units=[
            sh(f"127.0.0.1:{stall.port}/t/never:v1", "stuck", "true")]))
        kid = wait_for(lambda: helper_pids(a.proc.pid, "cell-pull"), what="the pull")[0]
        a.proc.kill()
        a.proc.wait()
        wait_for(lambda: not os.path.exists(f"/proc/{kid}") or
                 open(f"/proc/{kid}/stat").read().split()[2] == "Z",
                 timeout=10, what="cell-pull gone with the agent")
    finally:
        stall.close()
