"""The agent's pull module (agent/pullmod.h): cell-agent itself links
neither libcurl nor libarchive; it loads lib/cell/pullmod.so to pull an
image or extract a package, and unloads it once it has been unused for the
linger time (CELL_AGENT_PULLMOD_LINGER_MS here, 10 s by default), so an idle
agent does not carry their thirty-odd libraries.
"""
from __future__ import annotations

import os
import subprocess
import time

from test_agent_api import AGENT, start_agent
from test_agent_pod import FAST, image, sh, wait_state, wait_units_gone  # noqa: F401
from wire import pod_params

HEAVY = ("pullmod.so", "libcurl", "libarchive")


def mapped(pid: int) -> set:
    with open(f"/proc/{pid}/maps") as f:
        return {name for line in f for name in HEAVY if name in line}


def wait_mapped(pid: int, want: set, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while mapped(pid) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mapped(pid) == want


def test_agent_binary_does_not_link_curl_or_archive():
    # civetweb is built from source and linked in statically (scripts/deps.sh).
    out = subprocess.run(["readelf", "-d", AGENT], capture_output=True, text=True,
                         check=True).stdout
    needed = [line for line in out.splitlines() if "(NEEDED)" in line]
    assert needed, out
    for lib in ("libcurl", "libarchive", "libisal", "libzstd", "libcivetweb",
                "libstdc++"):
        assert not any(lib in line for line in needed), needed


def test_module_loads_for_pulls_and_deploys_and_unloads_when_idle(tmp_path, registry,
                                                                 image):
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    env={**FAST, "CELL_AGENT_PULLMOD_LINGER_MS": "200"})
    c = a.client()
    try:
        pid = a.proc.pid
        assert mapped(pid) == set()
        c.update_pod(pod_params("ns_pod", units=[sh(image, "one", "sleep 1000")]))
        wait_state(c, "one", "running")
        wait_mapped(pid, set())
        # Loaded again for the next pull, and the unit runs as before.
        c.update_pod(pod_params("ns_pod", units=[sh(image, "one", "sleep 1000"),
                                                 sh(image, "two", "echo hi; sleep 1000")]))
        wait_state(c, "two", "running")
        wait_mapped(pid, set())
        # A deploy needs the module too (libarchive).
        c.deploy("ns_pod", "resolvconf", {"resolv.conf": "nameserver 127.0.0.1\n"})
        pkg = os.path.join(a.dir, "state", "packages", "resolvconf", "resolv.conf")
        with open(pkg) as f:
            assert f.read() == "nameserver 127.0.0.1\n"
        wait_mapped(pid, set())
        assert "unloaded the pull module" in a.log()
    finally:
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        wait_units_gone(a)
        assert a.stop() == 0, a.log()[-3000:]


def test_missing_module_is_a_clear_pull_error(tmp_path, registry, image):
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    env={**FAST, "CELL_AGENT_PULLMOD": str(tmp_path / "nope.so")})
    c = a.client()
    try:
        c.update_pod(pod_params("ns_pod", units=[sh(image, "one", "true")]))
        st = wait_state(c, "one", "waiting",
                        pred=lambda u: "pull module" in
                        (u["state"]["waiting"].get("reason") or ""))
        assert st, st
        assert c.ping() == "pong"
    finally:
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        wait_units_gone(a)
        assert a.stop() == 0, a.log()[-3000:]
