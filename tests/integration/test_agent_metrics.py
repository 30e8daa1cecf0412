# SPDX-License-Identifier: Apache-2.0
"""GET /rest/v1/metrics and the plain-HTTP listener (issue 23; docs/agent.md
"Metrics"), parsed by a real Prometheus text parser (Debian's
python3-prometheus-client).

- Every family is there for a running pod with probes, on both listeners.
- The pod's network counters are its own interface's (in the simulated VPC
  of tests/pylib/vpc.py, the pod has a namespace and an eth0 of its own),
  and resourceUsage's netRx/netTx are too (they used to add up every
  interface of the cell).
- A scrape during a 100 MB pull answers at once (the pull is slowed to
  ~20 MB/s, so a scrape that waited for it would take seconds).
"""
from __future__ import annotations

import contextlib
import os
import socket
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from images import Image, busybox_layer, push, random_layer
from registry import free_port
from test_agent_api import pod_agent, start_agent, tls_raw
from test_cellctl import start_cell
from test_net import host_untouched  # noqa: F401  (module fixture)
from test_net_agent import WEB, CellAgent, wait_http
from vpc import POD_IP, Vpc
from wire import pod_params, unit

BB = "/bin/busybox"
UNIT_FAMILIES = [
    "container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
    "container_memory_rss", "container_oom_events_total",
    "kube_pod_container_status_restarts_total", "kube_pod_container_status_ready",
    "kube_pod_container_status_running", "kube_pod_container_status_waiting",
    "kube_pod_container_status_terminated",
    "kubelet_container_log_filesystem_used_bytes"]
POD_FAMILIES = [
    "container_network_receive_bytes_total", "container_network_transmit_bytes_total",
    "container_network_receive_packets_total", "container_network_transmit_packets_total",
    "container_fs_usage_bytes", "container_fs_limit_bytes"]
OTHER_FAMILIES = [
    "prober_probe_total", "prober_probe_duration_seconds_bucket",
    "prober_probe_duration_seconds_sum", "prober_probe_duration_seconds_count",
    "cell_image_pulls_total", "cell_image_pull_duration_seconds_total",
    "cell_image_pull_bytes_total", "cell_image_cache_hits_total",
    "process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds_total",
    "process_start_time_seconds", "cell_agent_uptime_seconds",
    "cell_agent_api_requests_total", "cell_agent_tls_handshake_failures_total"]


def samples(text: str) -> list:
    """(name, labels, value) of every sample, through the real parser."""
    out = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.append((s.name, s.labels, s.value))
    return out


def pick(ss: list, name: str, **labels) -> list:
    return [v for n, l, v in ss if n == name and
            all(l.get(k) == want for k, want in labels.items())]


def running(n: int):
    return lambda s: len(s["unitStatus"]) == n and all(
        "running" in (u.get("state") or {}) for u in s["unitStatus"])


@contextlib.contextmanager
def pod(d, reg, name: str, units: list, *extra: str):
    cm = pod_agent(str(d), reg, name, units, running(len(units)), *extra)
    a, c = cm.__enter__()
    try:
        yield a, c
    finally:
        cm.__exit__(None, None, None)


@pytest.fixture(scope="module")
def image(module_registry) -> str:
    push(module_registry, "t/mbb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    return module_registry.ref("t/mbb", "v1")


def test_every_family_for_a_running_pod_with_probes(tmp_path, module_registry, image):
    port = free_port()
    ready = {"exec": {"command": [BB, "true"]}, "periodSeconds": 1,
             "successThreshold": 1, "failureThreshold": 3}
    live = {"exec": {"command": [BB, "true"]}, "periodSeconds": 1,
            "successThreshold": 1, "failureThreshold": 3}
    units = [unit("web", image, command=["/bin/sh", "-c", "echo hello; exec sleep 100000"],
                  readinessProbe=ready, livenessProbe=live),
             unit("worker", image, command=[BB, "sleep", "100000"])]
    with pod(tmp_path, module_registry, "ns_met", units,
             "--metrics-listen", f"127.0.0.1:{port}") as (a, c):
        c.wait_status(lambda s: all(u["ready"] for u in s["unitStatus"]
                                    if u["name"] == "web"), timeout=30)
        # One stream (counted as its upgrade, 101).
        out, err, code = c.exec("web", [BB, "true"]).collect()
        assert code == 0, (out, err)
        # One refused handshake: a client without a certificate.
        tls_raw(a, b"GET /rest/v1/ping HTTP/1.1\r\n\r\n", cert=False)
        # Scrape until both probes have had an attempt (they start
        # together, but a scrape may fall between them) and the refused
        # handshake is counted (the server's alert reaches the client just
        # before the count).
        deadline = time.monotonic() + 20
        while True:
            r = c.request("GET", "rest/v1/metrics")
            ss = samples(r.text)
            if all(pick(ss, "prober_probe_total", container="web", probe_type=t,
                        result="successful") for t in ("Readiness", "Liveness")) and \
                    pick(ss, "cell_agent_tls_handshake_failures_total",
                         reason="failed") != [0] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        names = {n for n, _, _ in ss}
        for fam in UNIT_FAMILIES:
            for u in ("web", "worker"):
                assert pick(ss, fam, namespace="ns", pod="met", container=u), (fam, u)
        for fam in POD_FAMILIES + OTHER_FAMILIES:
            assert fam in names, fam
        assert pick(ss, "kube_pod_container_status_running", container="web") == [1]
        assert pick(ss, "kube_pod_container_status_ready", container="web") == [1]
        # No readiness probe: ready while running, as the kubelet says.
        assert pick(ss, "kube_pod_container_status_ready", container="worker") == [1]
        assert pick(ss, "kube_pod_container_status_restarts_total", container="web") == [0]
        assert pick(ss, "prober_probe_total", container="web", probe_type="Readiness",
                    result="successful")[0] >= 1
        assert pick(ss, "prober_probe_total", container="web", probe_type="Liveness",
                    result="successful")[0] >= 1
        assert pick(ss, "prober_probe_duration_seconds_count", container="web",
                    probe_type="Readiness")[0] >= 1
        assert pick(ss, "container_memory_working_set_bytes", container="web")[0] > 0
        assert pick(ss, "kubelet_container_log_filesystem_used_bytes", container="web")[0] > 0
        # The image came from the registry once (two units, one pull or a
        # pull and a cache hit).
        ref = image
        pulls = pick(ss, "cell_image_pulls_total", image=ref, result="success")[0]
        hits = pick(ss, "cell_image_cache_hits_total", image=ref, tier="local")[0]
        assert pulls + hits == 2 and pulls >= 1
        assert pick(ss, "cell_image_pull_bytes_total", image=ref)[0] > 0
        assert pick(ss, "cell_image_cache_hits_total", image=ref, tier="shared") == [0]
        assert pick(ss, "cell_agent_api_requests_total", route="updatepod", code="200")
        assert pick(ss, "cell_agent_api_requests_total", route="exec", code="101")
        assert pick(ss, "cell_agent_tls_handshake_failures_total", reason="failed")[0] >= 1
        assert pick(ss, "process_open_fds")[0] > 3
        assert pick(ss, "process_resident_memory_bytes")[0] > 1 << 20
        # The plain listener serves the same, and nothing else.
        p = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert p.status_code == 200
        pn = {n for n, _, _ in samples(p.text)}
        assert set(UNIT_FAMILIES) <= pn
        assert requests.get(f"http://127.0.0.1:{port}/rest/v1/status",
                            timeout=5).status_code == 404


def test_cellctl_metrics(tmp_path, registry):
    c = start_cell(str(tmp_path / "cell"), registry)
    try:
        r = c.ctl("metrics")
        ss = samples(r.stdout)
        assert pick(ss, "cell_agent_uptime_seconds")
        assert pick(ss, "cell_agent_api_requests_total", route="ping", code="200")
    finally:
        c.stop()


def listening(pid: int) -> set:
    """(address, port) of every TCP socket pid holds in LISTEN state: its
    socket descriptors' inodes matched in its namespace's /proc/net/tcp{,6}."""
    inodes = set()
    fds = f"/proc/{pid}/fd"
    for fd in os.listdir(fds):
        try:
            link = os.readlink(os.path.join(fds, fd))
        except FileNotFoundError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = set()
    for name in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{name}") as f:
            next(f)
            for line in f:
                fl = line.split()
                local, state, inode = fl[1], fl[3], fl[9]
                if state == "0A" and inode in inodes:
                    addr, port = local.split(":")
                    raw = bytes.fromhex(addr)
                    # /proc shows each 32-bit word in host (little-endian) order.
                    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                    fam = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
                    out.add((socket.inet_ntop(fam, raw), int(port, 16)))
    return out


def test_no_metrics_listener_by_default(tmp_path):
    a = start_agent(str(tmp_path / "agent"))
    try:
        # Nothing listens but the API port: no plain-HTTP socket at all.
        assert {p for _, p in listening(a.proc.pid)} == {a.port}, listening(a.proc.pid)
        ss = samples(a.client().request("GET", "rest/v1/metrics").text)
        assert pick(ss, "cell_agent_uptime_seconds")
        # No pod: no unit series, the agent's own are there.
        assert not pick(ss, "container_cpu_usage_seconds_total")
    finally:
        assert a.stop() == 0


def test_metrics_listen_port_alone_is_loopback(tmp_path):
    """Issue 27: `--metrics-listen PORT` listens on 127.0.0.1 only; an
    address for every interface has to be written out; anything civetweb
    would read as more (a list, an 's' suffix, a name) stops the agent."""
    port = free_port()
    a = start_agent(str(tmp_path / "agent"), "--metrics-listen", str(port))
    try:
        assert ("127.0.0.1", port) in listening(a.proc.pid), listening(a.proc.pid)
        assert {p for _, p in listening(a.proc.pid)} == {a.port, port}
        r = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert r.status_code == 200 and "cell_agent_uptime_seconds" in r.text
    finally:
        assert a.stop() == 0
    port = free_port()
    a = start_agent(str(tmp_path / "agent2"), "--metrics-listen", f"0.0.0.0:{port}")
    try:
        assert ("0.0.0.0", port) in listening(a.proc.pid), listening(a.proc.pid)
    finally:
        assert a.stop() == 0
    for bad in (f"{port},{port + 1}", f"{port}s", f"localhost:{port}", "99999"):
        a = start_agent(str(tmp_path / "agent3"), "--metrics-listen", bad, wait=False)
        assert a.proc.wait(timeout=20) != 0
        assert "metrics listener" in a.log(), a.log()[-2000:]


def test_scrape_during_a_100mb_pull(tmp_path, registry):
    big = Image([busybox_layer(), random_layer(100 << 20, compression="none")],
                config={"Cmd": ["/bin/sh"]})
    push(registry, "t/big100", "v1", big)
    ref = registry.ref("t/big100", "v1")
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    env={"CELL_CGROUP_NEST": "1", "CELL_PULL_MAX_RECV_SPEED": str(20 << 20)})
    c = a.client()
    try:
        c.update_pod(pod_params("ns_big", units=[unit("one", ref, command=[BB, "sleep", "1000"])],
                                terminationGracePeriodSeconds=0))
        deadline = time.monotonic() + 20
        while not any(p for p in os.listdir("/proc") if p.isdigit() and
                      _is_child_pull(a.proc.pid, p)):
            assert time.monotonic() < deadline, "no cell-pull child"
            time.sleep(0.05)
        # The supervisor publishes its snapshot at the end of the tick that
        # spawned the pull: on a loaded machine a scrape can come between.
        while pick(samples(c.request("GET", "rest/v1/metrics").text),
                   "kube_pod_container_status_waiting", container="one") != [1]:
            assert time.monotonic() < deadline, "the unit never showed waiting"
            time.sleep(0.05)
        worst = 0.0
        for _ in range(10):
            t0 = time.monotonic()
            ss = samples(c.request("GET", "rest/v1/metrics").text)
            worst = max(worst, time.monotonic() - t0)
            assert pick(ss, "kube_pod_container_status_waiting", container="one") == [1]
            time.sleep(0.1)
        print(f"worst scrape during the pull: {worst * 1000:.1f} ms")
        # The pull (5 s at 20 MB/s) is still running: no scrape waited.
        assert any(_is_child_pull(a.proc.pid, p) for p in os.listdir("/proc") if p.isdigit())
        assert worst < 1.0
    finally:
        c.update_pod(pod_params("ns_big", terminationGracePeriodSeconds=0))
        units = os.path.join(a.dir, "state", "units")
        end = time.monotonic() + 30
        while os.path.isdir(units) and os.listdir(units) and time.monotonic() < end:
            time.sleep(0.1)
        assert a.stop() == 0, a.log()[-3000:]


def _is_child_pull(agent_pid: int, pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except (OSError, ValueError, IndexError):
        return False
    return ppid == agent_pid and b"cell-pull" in cmd


@pytest.fixture
def vpc():
    v = Vpc().up()
    yield v
    v.down()


def test_pod_network_counters_are_the_pod_interface(vpc, registry, tmp_path):
    push(registry, "t/netbb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    ref = registry.ref("t/netbb", "v1")
    cell = CellAgent(vpc, registry, str(tmp_path))
    a, c = cell.start()
    try:
        c.update_pod(pod_params("ns_pod", units=[unit("web", ref, command=["/bin/sh", "-c", WEB])],
                                pod_ip=POD_IP, terminationGracePeriodSeconds=0))
        c.wait_status(running(1), timeout=60)
        # Traffic through the pod's own interface.
        assert "hello-from-pod" in wait_http(vpc, vpc.peer, f"http://{POD_IP}/",
                                             "hello-from-pod")
        keys = ["rx_bytes", "rx_packets", "tx_bytes", "tx_packets"]
        fams = ["container_network_receive_bytes_total",
                "container_network_receive_packets_total",
                "container_network_transmit_bytes_total",
                "container_network_transmit_packets_total"]

        def counters() -> dict:
            # /proc/net/dev as a process in the pod's namespace sees it
            # (nsenter leaves /sys the host's).
            for line in vpc.sh(vpc.pod, "cat /proc/net/dev").stdout.splitlines():
                name, _, rest = line.partition(":")
                if name.strip() == "eth0":
                    f = [int(x) for x in rest.split()]
                    return dict(zip(keys, (f[0], f[1], f[8], f[9])))
            raise AssertionError("no eth0 in the pod's namespace")

        before = counters()
        ss = samples(c.request("GET", "rest/v1/metrics").text)
        after = counters()
        for k, fam in zip(keys, fams):
            got = pick(ss, fam, namespace="ns", pod="pod")
            assert {l["interface"] for n, l, _ in ss if n == fam} == {"eth0"}, fam
            assert before[k] <= got[0] <= after[k], (fam, before[k], got, after[k])
        assert after["rx_bytes"] > 0
        # resourceUsage reads the same interface now (it summed every
        # interface of the cell, where the image's pull went through).
        before = counters()
        st = c.wait_status(lambda s: "netRx" in (s.get("resourceUsage") or {}), timeout=30)
        after = counters()
        assert float(st["resourceUsage"]["netRx"]) <= after["rx_bytes"], st["resourceUsage"]
        assert float(st["resourceUsage"]["netTx"]) <= after["tx_bytes"], st["resourceUsage"]
    finally:
        cell.close()
