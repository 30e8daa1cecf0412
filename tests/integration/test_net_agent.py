# SPDX-License-Identifier: Apache-2.0
"""cell-agent with a pod network, in the simulated VPC of tests/pylib/vpc.py.

The agent runs inside the "cell" namespace (nsenter --net); the test talks
to it, and it pulls from the test's registry, through TCP forwards between
the namespaces (tests/pylib/nsfwd.py).
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from images import Image, busybox_layer, push
from nsfwd import Forward
from registry import free_port
from test_agent_api import start_agent
from test_net import host_untouched  # noqa: F401  (module fixture)
from vpc import IMDS_IP, POD_IP, PRIMARY_IP, Vpc, imds, run
from wire import pod_params, unit

FAST = {"CELL_AGENT_BACKOFF_UNIT_MS": "50", "CELL_CGROUP_NEST": "1"}

WEB = ("mkdir -p /www && echo hello-from-pod > /www/index.html && "
       "exec httpd -f -p 80 -h /www")


@pytest.fixture
def vpc():
    v = Vpc().up()
    yield v
    v.down()


@pytest.fixture
def image(registry) -> str:
    push(registry, "t/bb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    return registry.ref("t/bb", "v1")


class CellAgent:
    """cell-agent inside the VPC's cell namespace."""

    def __init__(self, vpc: Vpc, registry, d: str):
        self.vpc, self.registry, self.d = vpc, registry, d
        cell = f"/var/run/netns/{vpc.cell}"
        self.port = free_port()
        self.fwd = [Forward(cell, registry.port, None, registry.port),
                    Forward(None, self.port, cell, self.port)]
        self.env = {**FAST, "CELL_AGENT_POD_NETWORK": "on", "CELL_AGENT_NETNS": vpc.pod,
                    "CELL_NET_STATE_DIR": os.path.join(d, "net")}
        self.a = None

    def start(self):
        self.a = start_agent(os.path.join(self.d, "agent"), "--insecure-registry",
                             self.registry.host, env=self.env, port=self.port,
                             prefix=self.vpc.ns_cmd(self.vpc.cell)[:3])
        return self.a, self.a.client()

    def close(self):
        if self.a and self.a.alive():
            self.a.client().update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
            units = os.path.join(self.a.dir, "state", "units")
            end = time.monotonic() + 20
            while os.listdir(units) and time.monotonic() < end:
                time.sleep(0.1)
            self.a.stop()
        for f in self.fwd:
            f.close()


@pytest.fixture
def cell_agent(vpc, registry, tmp_path):
    c = CellAgent(vpc, registry, str(tmp_path))
    yield c
    c.close()


def web_pod(image: str, **kw) -> dict:
    probe = {"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"},
             "periodSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
    u = unit("web", image, command=["/bin/sh", "-c", WEB], readinessProbe=probe,
             ports=[{"name": "http", "containerPort": 80, "hostPort": 8080,
                     "protocol": "TCP", "hostIP": ""}])
    return pod_params("ns_web", units=[u], pod_ip=POD_IP, **kw)


def running(st: dict, name: str = "web") -> bool:
    return any(u["name"] == name and "running" in (u.get("state") or {})
               for u in st["unitStatus"])


def wait_http(vpc: Vpc, ns: str, url: str, want: str, timeout: float = 20) -> str:
    end = time.monotonic() + timeout
    got = ""
    while time.monotonic() < end:
        got = vpc.curl(ns, url, timeout=2)
        if want in got:
            return got
        time.sleep(0.2)
    return got


SYSCTL = "/proc/sys/net/ipv4/ip_local_port_range"


def test_unit_serves_http_at_the_pod_ip_to_the_peer(vpc, cell_agent, image):
    cell_range = vpc.sh(vpc.cell, f"cat {SYSCTL}").stdout
    a, c = cell_agent.start()
    c.update_pod(web_pod(image, securityContext={
        "namespaceOptions": None, "runAsUser": None, "runAsGroup": None,
        "supplementalGroups": [],
        "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "20000 30000"}]}))
    st = c.wait_status(running, timeout=60)
    assert st["podIP"] == POD_IP
    # The pod's net.* sysctls are in its namespace, not the cell's.
    assert vpc.sh(vpc.pod, f"cat {SYSCTL}").stdout.split() == ["20000", "30000"]
    assert vpc.sh(vpc.cell, f"cat {SYSCTL}").stdout == cell_range
    # From the peer, at the pod IP and through the hostPort.
    assert "hello-from-pod" in wait_http(vpc, vpc.peer, f"http://{POD_IP}/", "hello-from-pod")
    assert "hello-from-pod" in wait_http(vpc, vpc.peer, f"http://{PRIMARY_IP}:8080/",
                                         "hello-from-pod")
    # The unit is in the pod's namespace.
    pod_ns = os.stat(f"/var/run/netns/{vpc.pod}")
    pids = subprocess.run(["pgrep", "-f", "httpd -f -p 80"], capture_output=True,
                          text=True).stdout.split()
    assert any(os.stat(f"/proc/{p}/ns/net").st_ino == pod_ns.st_ino for p in pids)
    # exec joins it too.
    out, err, code = c.exec("web", ["/bin/busybox", "ip", "-4", "addr", "show", "eth0"]).collect()
    assert code == 0 and f"inet {POD_IP}/32" in out.decode(), (out, err)
    # The httpGet readiness probe dials the pod IP (127.0.0.1 of the
    # agent's namespace has no server).
    st = c.wait_status(lambda s: s["unitStatus"][0]["ready"] is True, timeout=30)
    # port-forward dials the pod IP.
    s = c.port_forward(80)
    s.send(0, b"GET / HTTP/1.0\r\n\r\n")
    got = b""
    end = time.monotonic() + 10
    while b"hello-from-pod" not in got and time.monotonic() < end:
        f = s.recv(1.0)
        if f is None:
            break
        if f[0] == 1:
            got += f[1]
    assert b"hello-from-pod" in got


def test_agent_kill_9_keeps_the_pod_network(vpc, cell_agent, image):
    a, c = cell_agent.start()
    c.update_pod(web_pod(image))
    c.wait_status(running, timeout=60)
    assert "hello-from-pod" in wait_http(vpc, vpc.peer, f"http://{POD_IP}/", "hello-from-pod")
    before = vpc.snapshot()
    ino = os.stat(f"/var/run/netns/{vpc.pod}").st_ino
    a.proc.kill()
    a.proc.wait()
    a, c = cell_agent.start()
    st = c.wait_status(running, timeout=30)
    assert st["podIP"] == POD_IP
    assert os.stat(f"/var/run/netns/{vpc.pod}").st_ino == ino
    assert vpc.snapshot() == before, "the restarted agent rebuilt the pod network"
    assert "found and kept" in a.log()
    assert "hello-from-pod" in wait_http(vpc, vpc.peer, f"http://{POD_IP}/", "hello-from-pod")


def test_a_new_pod_ip_tears_down_and_sets_up_again(vpc, cell_agent, image):
    # The kernel registers the legacy tables on first use and keeps them
    # (empty) for the namespace's life; a cell has them from boot anyway.
    vpc.sh(vpc.cell, "iptables-legacy -t nat -S >/dev/null && iptables-legacy -S >/dev/null "
                     "&& ip6tables-legacy -S >/dev/null")
    before = vpc.snapshot()
    a, c = cell_agent.start()
    c.update_pod(web_pod(image))
    c.wait_status(running, timeout=60)
    # hostNetwork: the units leave the namespace, which is torn down. A
    # 1 s grace: httpd as PID 1 ignores SIGTERM (the default 30 s is
    # waited out otherwise).
    c.update_pod(web_pod(image, securityContext={
        "namespaceOptions": {"network": 2, "pid": 1, "ipc": 1}, "runAsUser": None,
        "runAsGroup": None, "supplementalGroups": [], "sysctls": []},
        terminationGracePeriodSeconds=1))
    st = c.wait_status(lambda s: running(s) and s["podIP"] == PRIMARY_IP, timeout=60)
    end = time.monotonic() + 20
    while os.path.exists(f"/var/run/netns/{vpc.pod}") and time.monotonic() < end:
        time.sleep(0.1)
    assert not os.path.exists(f"/var/run/netns/{vpc.pod}")
    after = vpc.snapshot()
    for k in ("iptables-legacy", "ip6tables-legacy", "route", "proxy", "sysctl", "netns"):
        assert after[k] == before[k], k
    # httpd now listens in the cell's own namespace.
    assert "hello-from-pod" in wait_http(vpc, vpc.peer, f"http://{PRIMARY_IP}/", "hello-from-pod")


# ---- the metadata service (issue 27) ----

MD = f"http://{IMDS_IP}/latest"
CREDS = f"{MD}/meta-data/iam/security-credentials/"
PROFILE = {"pod.elotl.co/instance-profile":
           "arn:aws:iam::11123456789:instance-profile/kip-s3-full-access-role"}


def sleeper_pod(image: str, **kw) -> dict:
    u = unit("web", image, command=["/bin/sh", "-c", "exec sleep 3600"])
    return pod_params("ns_web", units=[u], pod_ip=POD_IP, **kw)


def pod_curl(vpc: Vpc, url: str, *extra: str):
    """curl from the pod's namespace: (exit status, HTTP code, body)."""
    r = run(*vpc.ns_cmd(vpc.pod, "curl", "-s", "--max-time", "5", "-w", "\\n%{http_code}",
                        *extra, url), check=False, timeout=20)
    body, _, code = r.stdout.rpartition("\n")
    return r.returncode, code, body


def unit_get(c, path: str):
    """GET path from 169.254.169.254 inside the unit (busybox nc: its
    static wget segfaults here): (exit status, HTTP status, body)."""
    req = f"GET {path} HTTP/1.0\\r\\nHost: {IMDS_IP}\\r\\n\\r\\n"
    out, err, code = c.exec("web", ["/bin/sh", "-c",
                                    f"printf '{req}' | nc -w 5 {IMDS_IP} 80"]).collect()
    head, _, body = out.decode(errors="replace").partition("\r\n\r\n")
    status = head.split(" ")[1] if head.startswith("HTTP/") else ""
    return code, status, body


def imds_log(path: str) -> str:
    """What reached the fake IMDS ("" when nothing did)."""
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read()


def test_pod_does_not_reach_metadata_and_host_network_does(vpc, cell_agent, image, tmp_path):
    log = str(tmp_path / "imds.log")
    imds(vpc, log)
    a, c = cell_agent.start()
    c.update_pod(sleeper_pod(image))
    c.wait_status(running, timeout=60)
    # Neither the unit nor anything else in the pod's namespace.
    code, status, body = unit_get(c, "/latest/meta-data/local-ipv4")
    assert status == "" and "10.0.0.5" not in body, (code, status, body)
    assert pod_curl(vpc, f"{MD}/user-data")[0] == 7
    assert "user-data" not in imds_log(log)
    # The block is the cell's: a unit cannot remove it.
    assert "-A FORWARD -j CELL-IMDS" in vpc.sh(vpc.cell, "iptables-legacy-save").stdout
    # hostNetwork: the units are the node's and reach it; the pod network,
    # the block with it, is torn down (a 1 s grace: `sleep` as PID 1
    # ignores SIGTERM).
    c.update_pod(sleeper_pod(image, securityContext={
        "namespaceOptions": {"network": 2, "pid": 1, "ipc": 1}, "runAsUser": None,
        "runAsGroup": None, "supplementalGroups": [], "sysctls": []},
        terminationGracePeriodSeconds=1))
    c.wait_status(lambda s: running(s) and s["podIP"] == PRIMARY_IP, timeout=60)
    end = time.monotonic() + 20
    while os.path.exists(f"/var/run/netns/{vpc.pod}") and time.monotonic() < end:
        time.sleep(0.1)
    assert "CELL-IMDS" not in vpc.sh(vpc.cell, "iptables-legacy-save").stdout
    assert "CELL-IMDS" not in vpc.sh(vpc.cell, "ip6tables-legacy-save").stdout
    assert unit_get(c, "/latest/meta-data/local-ipv4")[1:] == ("200", "10.0.0.5")


TRICKS = [
    "/latest/user-data",
    "/latest/meta-data/local-ipv4",
    "/latest/meta-data/iam/security-credentials/../../user-data",
    "/latest/meta-data/iam/security-credentials/%2e%2e/%2e%2e/user-data",
    "/latest/meta-data/iam/security-credentials/%2E%2E%2F%2E%2E%2Fuser-data",
    "/latest/meta-data/iam/security-credentials/..%2f..%2fuser-data",
    "/latest/meta-data/iam/security-credentials/cell-role/../../../user-data",
    "/latest/meta-data/iam/security-credentials/..",
    "/latest/meta-data/iam/security-credentials/cell-role?/../../user-data",
    "/latest/meta-data/iam/security-credentials/cell-role%23/../../user-data",
    "/latest/meta-data/iam/security-credentials//../user-data",
    "/latest/meta-data/placement/../../user-data",
    "/latest/%75ser-data",
    "/latest/meta-data/iam/security-credentials\\..\\..\\user-data",
    "//latest/user-data",
]


def test_instance_profile_pod_gets_credentials_and_nothing_else(vpc, cell_agent, image,
                                                                 tmp_path):
    log = str(tmp_path / "imds.log")
    imds(vpc, log)
    a, c = cell_agent.start()
    c.update_pod(sleeper_pod(image, annotations=PROFILE))
    c.wait_status(running, timeout=60)
    # What an SDK does: an IMDSv2 token, the role, its credentials, the
    # region, the identity document.
    rc, code, token = pod_curl(vpc, f"{MD}/api/token", "-X", "PUT",
                               "-H", "X-aws-ec2-metadata-token-ttl-seconds: 21600")
    assert (rc, code) == (0, "200") and token, (rc, code, token)
    tok = ("-H", f"X-aws-ec2-metadata-token: {token}")
    assert pod_curl(vpc, CREDS, *tok) == (0, "200", "cell-role")
    rc, code, body = pod_curl(vpc, CREDS + "cell-role", *tok)
    assert (rc, code) == (0, "200") and '"AccessKeyId": "ASIAFAKEFAKEFAKEFAKE"' in body
    assert pod_curl(vpc, f"{MD}/meta-data/placement/region", *tok) == (0, "200", "us-east-1")
    # The token went on: the fake IMDS (IMDSv2 optional) refuses a bad one.
    assert pod_curl(vpc, CREDS, "-H", "X-aws-ec2-metadata-token: nope")[1] == "401"
    # The unit itself (IMDSv1), and user-data not.
    assert unit_get(c, "/latest/meta-data/iam/security-credentials/")[1:] == \
        ("200", "cell-role")
    assert unit_get(c, "/latest/user-data")[1] == "403"
    # Never user-data, nor any other path, however spelled.
    for path in TRICKS:
        rc, code, body = pod_curl(vpc, f"http://{IMDS_IP}{path}", "--path-as-is", *tok)
        assert code in ("400", "403", "404"), (path, rc, code, body)
        assert "SECRET" not in body and "10.0.0.5" not in body, (path, body)
    for method in ("POST", "DELETE"):
        assert pod_curl(vpc, CREDS, "-X", method)[1] == "405"
    # A body on the token request is refused (one head per connection).
    assert pod_curl(vpc, f"{MD}/api/token", "-X", "PUT", "--data", "x",
                    "-H", "X-aws-ec2-metadata-token-ttl-seconds: 60")[1] == "400"
    seen = imds_log(log)
    assert "user-data" not in seen and "local-ipv4" not in seen, seen
    # The proxy dies with the agent and a new agent starts another.
    a.proc.kill()
    a.proc.wait()
    assert pod_curl(vpc, CREDS)[0] == 7
    a, c = cell_agent.start()
    c.wait_status(running, timeout=30)
    end = time.monotonic() + 10
    while pod_curl(vpc, CREDS)[1] != "200" and time.monotonic() < end:
        time.sleep(0.2)
    assert pod_curl(vpc, CREDS) == (0, "200", "cell-role")
    # Without the annotation, the proxy stops: refused again.
    c.update_pod(sleeper_pod(image))
    end = time.monotonic() + 10
    while pod_curl(vpc, CREDS)[0] != 7 and time.monotonic() < end:
        time.sleep(0.2)
    assert pod_curl(vpc, CREDS)[0] == 7
