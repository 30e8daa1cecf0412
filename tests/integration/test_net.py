# SPDX-License-Identifier: Apache-2.0
"""cell-net in a simulated VPC (tests/pylib/vpc.py).

cell-net always runs inside the test's "cell" namespace (nsenter --net),
never in the host's; a module fixture checks that the host's own rules,
routes and ip_forward are the same after every test as before.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import CELL_BUILD
from vpc import (IMDS_IP, INET_IP, PEER_IP, POD_IP, PRIMARY_IP, Vpc, host_snapshot,
                 imds, run, wait_for)

CELL_NET = os.path.join(CELL_BUILD, "bin", "cell-net")
PYLIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pylib")


@pytest.fixture(scope="module", autouse=True)
def host_untouched():
    before = host_snapshot()
    yield
    after = host_snapshot()
    assert after == before, "the host's own rules, routes or ip_forward changed"


@pytest.fixture
def vpc():
    if not os.access(CELL_NET, os.X_OK):
        pytest.fail(f"cell-net not built at {CELL_NET}", pytrace=False)
    v = Vpc().up()
    yield v
    v.down()


class Net:
    def __init__(self, vpc: Vpc, state_dir: str):
        self.vpc = vpc
        self.state_dir = state_dir

    def __call__(self, *args: str, check: bool = False, env: dict = None):
        e = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CELL_NET_STATE_DIR": self.state_dir}
        e.update(env or {})
        r = subprocess.run(self.vpc.ns_cmd(self.vpc.cell, CELL_NET, *args), env=e,
                           capture_output=True, text=True, timeout=60)
        if check:
            assert r.returncode == 0, r.stderr
        return r

    def setup(self, *extra: str):
        return self("setup", "--name", self.vpc.pod, "--pod-ip", POD_IP, *extra, check=True)

    def teardown(self):
        return self("teardown", "--name", self.vpc.pod, check=True)


@pytest.fixture
def net(vpc, tmp_path):
    n = Net(vpc, str(tmp_path / "state"))
    yield n
    n("teardown", "--name", vpc.pod)


def pod_sh(vpc: Vpc, script: str, check: bool = True):
    return vpc.sh(vpc.pod, script, check=check)


def test_pod_reaches_peer_and_internet_and_is_reached(vpc, net):
    out = net.setup("--port", "8080:80").stdout
    assert f"pod_ip={POD_IP}" in out and "primary_if=eth0" in out
    assert f"primary_ip={PRIMARY_IP}" in out and "state=created" in out

    # Inside the pod: PodIP/32, lo up, default via the link-local gateway
    # with a permanent neighbour entry.
    assert f"inet {POD_IP}/32" in pod_sh(vpc, "ip addr show eth0").stdout
    assert "UP" in pod_sh(vpc, "ip link show lo").stdout
    assert "default via 169.254.1.1 dev eth0" in pod_sh(vpc, "ip route").stdout
    assert "169.254.1.1 dev eth0 lladdr" in pod_sh(vpc, "ip neigh").stdout
    assert "PERMANENT" in pod_sh(vpc, "ip neigh").stdout

    vpc.http_server(vpc.peer, 81)
    vpc.http_server(vpc.inet, 82)
    vpc.http_server(vpc.pod, 80)
    # The pod reaches the peer from its pod IP.
    assert vpc.curl(vpc.pod, f"http://{PEER_IP}:81/") == f"hello from {vpc.peer} to {POD_IP}"
    # The peer reaches the pod at the pod IP (ARP answered by the cell).
    assert vpc.curl(vpc.peer, f"http://{POD_IP}/") == f"hello from {vpc.pod} to {PEER_IP}"
    # The router reaches it too (it routes the secondary IP to the cell).
    assert vpc.curl(vpc.vpc, f"http://{POD_IP}/") == f"hello from {vpc.pod} to 10.99.0.1"
    # The internet sees the primary IP: masqueraded.
    assert vpc.curl(vpc.pod, f"http://{INET_IP}:82/") == f"hello from {vpc.inet} to {PRIMARY_IP}"
    # hostPort: from the peer, from the cell itself, from the pod (hairpin).
    assert vpc.curl(vpc.peer, f"http://{PRIMARY_IP}:8080/") == \
        f"hello from {vpc.pod} to {PEER_IP}"
    assert vpc.curl(vpc.cell, f"http://{PRIMARY_IP}:8080/").startswith(f"hello from {vpc.pod}")
    assert vpc.curl(vpc.pod, f"http://{PRIMARY_IP}:8080/").startswith(f"hello from {vpc.pod}")


UDP_ECHO = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("READY", flush=True)
while True:
    d, a = s.recvfrom(2048)
    s.sendto(d + b" from " + a[0].encode(), a)
"""

UDP_ASK = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
for _ in range(10):
    s.sendto(b"ping", (sys.argv[1], int(sys.argv[2])))
    try:
        print(s.recvfrom(2048)[0].decode())
        break
    except socket.timeout:
        pass
"""


def test_udp_hostport_and_host_ip(vpc, net):
    # A second address on the cell's primary interface as the hostIP.
    vpc.sh(vpc.cell, "ip addr add 10.99.0.11/24 dev eth0")
    net.setup("--port", "5353:53/udp@10.99.0.11", "--port", "8081:80")
    rules = vpc.sh(vpc.cell, "iptables-legacy-save -t nat").stdout
    assert f"-d {PRIMARY_IP}/32 -p udp -m udp --dport 5353 -j DNAT " \
           f"--to-destination {POD_IP}:53" in rules
    assert f"-d 10.99.0.11/32 -p udp -m udp --dport 5353 -j DNAT" in rules
    p = vpc.start(vpc.pod, "/usr/bin/python3", "-c", UDP_ECHO, "53",
                  stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "READY"
    for ip in (PRIMARY_IP, "10.99.0.11"):
        r = vpc.sh(vpc.peer, f"/usr/bin/python3 -c '{UDP_ASK}' {ip} 5353")
        assert r.stdout.strip() == f"ping from {PEER_IP}"


def test_teardown_restores_exactly_and_setup_twice_changes_nothing(vpc, net):
    # The cell has rules and a sysctl of its own, which must survive.
    vpc.sh(vpc.cell, "iptables-legacy -t nat -A POSTROUTING -d 198.51.100.0/24 -j RETURN && "
                     "iptables-legacy -A FORWARD -s 198.51.100.7 -j DROP && "
                     "ip6tables-legacy -A FORWARD -s 2001:db8::7 -j DROP && "
                     "iptables-nft -t nat -A POSTROUTING -d 198.51.100.0/24 -j RETURN && "
                     "echo 1 > /proc/sys/net/ipv4/conf/eth0/proxy_arp")
    before = vpc.snapshot()
    net.setup("--port", "8080:80", "--private-cidr", "100.64.0.0/10")
    first = vpc.snapshot()
    assert first != before
    assert "100.64.0.0/10 -j RETURN" in first["iptables-legacy"]
    out = net.setup("--port", "8080:80", "--private-cidr", "100.64.0.0/10").stdout
    assert "state=found" in out
    assert vpc.snapshot() == first, "a second setup changed something"
    # The rules are one atomic table replace: our chains sit beside the
    # cell's own rules, which are untouched.
    assert "-A POSTROUTING -d 198.51.100.0/24 -j RETURN" in first["iptables-legacy"]
    net.teardown()
    after = vpc.snapshot()
    for k in before:
        assert after[k] == before[k], f"{k} differs after teardown"
    # A second teardown finds nothing: exit 3.
    r = net("teardown", "--name", vpc.pod)
    assert r.returncode == 3 and "no pod network" in r.stderr


def curl_rc(vpc: Vpc, ns: str, url: str, *extra: str):
    """curl in ns: (exit status, body). 7 is "connection refused"."""
    r = run(*vpc.ns_cmd(ns, "curl", "-sS", "-g", "--max-time", "5", *extra, url),
            check=False, timeout=20)
    return r.returncode, r.stdout


IMDS_URL = f"http://{IMDS_IP}/latest/meta-data/local-ipv4"
IMDS6_IP = "fd00:ec2::254"

# An IPv6 path from the pod to fd00:ec2::254 on the router, as a unit with
# NET_ADMIN (or another network agent) could build one; cell-net makes no
# IPv6 route itself.
IPV6 = {
    "vpc": ["ip -6 addr add fd00:ec2::254/128 dev lo",
            "ip -6 addr add fd00:99::1/64 dev br0 nodad",
            "ip -6 route add fd00:98::/64 via fd00:99::10"],
    "cell": ["ip -6 addr add fd00:99::10/64 dev eth0 nodad",
             "ip -6 route add default via fd00:99::1",
             "echo 1 > /proc/sys/net/ipv6/conf/all/forwarding",
             "ip -6 addr add fd00:98::1/64 dev {veth} nodad"],
    "pod": ["ip -6 addr add fd00:98::50/64 dev eth0 nodad",
            "ip -6 route add default via fd00:98::1"],
}

SERVER6_PY = r"""
import http.server, socket
class S(http.server.HTTPServer):
    address_family = socket.AF_INET6
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"imds6")
    def log_message(self, *a):
        pass
s = S(("fd00:ec2::254", 80), H)
print("READY", flush=True)
s.serve_forever()
"""


def ipv6_path(vpc: Vpc) -> None:
    veth = f"veth-{vpc.pod[:10]}"
    for ns, cmds in (("vpc", IPV6["vpc"]), ("cell", IPV6["cell"]), ("pod", IPV6["pod"])):
        for c in cmds:
            vpc.sh(getattr(vpc, ns), c.format(veth=veth))
    p = vpc.start(vpc.vpc, "/usr/bin/python3", "-c", SERVER6_PY,
                  stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "READY"


def test_pod_does_not_reach_the_metadata_service(vpc, net, tmp_path):
    log = str(tmp_path / "imds.log")
    imds(vpc, log)
    net.setup()
    # The cell itself reaches it (cell-boot, cell-cloudinit, the agent).
    assert vpc.curl(vpc.cell, IMDS_URL) == "10.0.0.5"
    # The pod is refused at once (REJECT), for every path.
    for path in ("meta-data/local-ipv4", "user-data", "meta-data/iam/security-credentials/"):
        rc, body = curl_rc(vpc, vpc.pod, f"http://{IMDS_IP}/latest/{path}")
        assert rc == 7 and body == "", (path, rc, body)
    with open(log) as f:
        assert f.read().splitlines() == ["GET /latest/meta-data/local-ipv4"]
    rules = vpc.sh(vpc.cell, "iptables-legacy-save -t filter").stdout
    veth = f"veth-{vpc.pod[:10]}"
    assert "-A FORWARD -j CELL-IMDS" in rules
    assert f"-A CELL-IMDS -d {IMDS_IP}/32 -i {veth} -j REJECT" in rules
    # IPv6: refused in the cell's FORWARD as well, over a path that would
    # otherwise carry it.
    ipv6_path(vpc)
    assert vpc.curl(vpc.cell, f"http://[{IMDS6_IP}]/") == "imds6"
    rc, body = curl_rc(vpc, vpc.pod, f"http://[{IMDS6_IP}]/")
    assert rc == 7 and body == "", (rc, body)
    rules6 = vpc.sh(vpc.cell, "ip6tables-legacy-save -t filter").stdout
    assert f"-A CELL-IMDS -d {IMDS6_IP}/128 -i {veth} -j REJECT" in rules6
    # An operator turns the block off: a later setup removes it...
    net.setup("--allow-metadata")
    assert curl_rc(vpc, vpc.pod, IMDS_URL) == (0, "10.0.0.5")
    assert curl_rc(vpc, vpc.pod, f"http://[{IMDS6_IP}]/") == (0, "imds6")
    assert "CELL-IMDS" not in vpc.sh(vpc.cell, "iptables-legacy-save").stdout
    assert "metadata     allowed" in net("show", "--name", vpc.pod).stdout
    # ...and on again.
    net.setup()
    assert curl_rc(vpc, vpc.pod, IMDS_URL)[0] == 7
    assert "metadata     blocked (present)" in net("show", "--name", vpc.pod).stdout
    # Teardown removes the rules, both families.
    net.teardown()
    assert "CELL-IMDS" not in vpc.sh(vpc.cell, "iptables-legacy-save").stdout
    assert "CELL-IMDS" not in vpc.sh(vpc.cell, "ip6tables-legacy-save").stdout


def test_show_and_check_after_setup(vpc, net):
    net.setup("--port", "8080:80")
    r = net("show", "--name", vpc.pod, check=True)
    assert f"/var/run/netns/{vpc.pod} (present)" in r.stdout
    assert "proxy neigh  10.99.0.50 on eth0 (present)" in r.stdout
    assert "net/ipv4/ip_forward = 1 (was 0)" in r.stdout
    assert "DNAT --to-destination 10.99.0.50:80" in r.stdout
    # `ip netns` sees the namespace.
    assert vpc.pod in run("ip", "netns", "list").stdout
    # Someone removes the veth: show says so; setup repairs it.
    vpc.sh(vpc.cell, f"ip link del veth-{vpc.pod[:10]}")
    assert "MISSING" in net("show", "--name", vpc.pod).stdout
    net.setup("--port", "8080:80")
    vpc.http_server(vpc.pod, 80)
    assert vpc.curl(vpc.peer, f"http://{POD_IP}/").startswith("hello")


@pytest.mark.parametrize("args, msg", [
    (["--pod-ip", "10.99.0.300"], "not an IPv4 address"),
    (["--pod-ip", POD_IP, "--port", "80"], "hostPort:containerPort"),
    (["--pod-ip", POD_IP, "--port", "70000:80"], "hostPort:containerPort"),
    (["--pod-ip", POD_IP, "--port", "80:80/sctp"], "tcp or udp"),
    (["--pod-ip", POD_IP, "--port", "80:80@nothost"], "bad hostIP"),
    (["--pod-ip", POD_IP, "--private-cidr", "10.0.0.0/33"], "not an IPv4 CIDR"),
    (["--pod-ip", POD_IP, "--name", "../etc"], "bad namespace name"),
    (["--pod-ip", POD_IP, "--host-veth", "a-name-longer-than-15"], "bad veth name"),
])
def test_bad_input_is_refused_and_creates_nothing(vpc, net, args, msg):
    before = vpc.snapshot()
    r = net("setup", "--name", vpc.pod, *args)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr
    assert vpc.snapshot() == before
    assert not os.path.exists(net.state_dir) or not os.listdir(net.state_dir)


def test_usage(vpc, net):
    r = net("--help")
    assert r.returncode == 0 and "cell-net setup" in r.stdout
    assert net("frobnicate").returncode == 2
    assert net().returncode == 2
    assert net("show", "--name", vpc.pod).returncode == 3


def test_foreign_namespace_and_veth_are_not_taken_over(vpc, net):
    run("ip", "netns", "add", vpc.pod)
    before = vpc.snapshot()
    r = net("setup", "--name", vpc.pod, "--pod-ip", POD_IP)
    assert r.returncode == 1 and "is not cell-net's" in r.stderr
    assert vpc.snapshot() == before
    assert os.path.exists(f"/var/run/netns/{vpc.pod}")
    run("ip", "netns", "del", vpc.pod)
    # A link of that name in the cell is someone else's too.
    vpc.sh(vpc.cell, "ip link add wtnet-x type veth peer name wtnet-y")
    before = vpc.snapshot()
    r = net("setup", "--name", vpc.pod, "--pod-ip", POD_IP, "--host-veth", "wtnet-x")
    assert r.returncode == 1 and "is not cell-net's" in r.stderr
    assert vpc.snapshot() == before


def test_a_second_pod_ip_needs_a_teardown_first(vpc, net):
    net.setup()
    r = net("setup", "--name", vpc.pod, "--pod-ip", "10.99.0.51")
    assert r.returncode == 1 and "tear it down first" in r.stderr


def test_host_network_uses_the_default_route_interface(vpc, net):
    # Give the cell a second interface that sorts first by name; the
    # default route decides, not the name.
    vpc.sh(vpc.cell, "ip link add aaa0 type veth peer name aaa1 && ip link set aaa1 up && ip addr add 192.0.2.9/24 dev aaa0 && "
                     "ip link set aaa0 up")
    before = vpc.snapshot()
    r = net("setup", "--name", vpc.pod, "--host-network", check=True)
    assert "primary_if=eth0" in r.stdout and f"pod_ip={PRIMARY_IP}" in r.stdout
    assert vpc.snapshot() == before  # nothing made
    net.teardown()


def metadata_server(vpc: Vpc, kind: str):
    """A fake metadata service (tests/pylib/metadata.py) inside the cell."""
    script = f"""
import sys, time
sys.path.insert(0, {PYLIB!r})
import metadata
kind = {kind!r}
if kind == "ec2":
    s = metadata.IMDS(local_ipv4="{PRIMARY_IP}")
    s.meta["mac"] = "0e:11:22:33:44:55"
    s.meta["network"] = {{"interfaces": {{"macs": {{"0e:11:22:33:44:55": {{
        "local-ipv4s": "{PRIMARY_IP}\\n{POD_IP}"}}}}}}}}
elif kind == "gce":
    s = metadata.GCE(ip="{PRIMARY_IP}")
    s.tree["instance"]["network-interfaces"]["0"]["ip-aliases"] = {{"0": "{POD_IP}/32"}}
else:
    s = metadata.Azure(private_ip="{PRIMARY_IP}")
    s.doc["network"]["interface"][0]["ipv4"]["ipAddress"].append(
        {{"privateIpAddress": "{POD_IP}", "publicIpAddress": ""}})
print(s.url, flush=True)
time.sleep(3600)
"""
    p = vpc.start(vpc.cell, "/usr/bin/python3", "-c", script, stdout=subprocess.PIPE, text=True)
    return p.stdout.readline().strip()


@pytest.mark.parametrize("kind", ["ec2", "gce", "azure"])
def test_pod_ip_from_the_metadata_service(vpc, net, kind):
    url = metadata_server(vpc, kind)
    dead = "http://127.0.0.1:9"  # refused at once
    env = {"CELL_NET_EC2_URL": url if kind == "ec2" else dead,
           "CELL_NET_GCE_URL": url if kind == "gce" else dead,
           "CELL_NET_AZURE_URL": url if kind == "azure" else dead}
    r = net("setup", "--name", vpc.pod, env=env)
    assert r.returncode == 0, r.stderr
    assert f"pod_ip={POD_IP}" in r.stdout and f"primary_ip={PRIMARY_IP}" in r.stdout


def test_no_metadata_service_is_a_clear_error(vpc, net):
    dead = "http://127.0.0.1:9"
    env = {"CELL_NET_EC2_URL": dead, "CELL_NET_GCE_URL": dead, "CELL_NET_AZURE_URL": dead}
    r = net("setup", "--name", vpc.pod, "--metadata-timeout", "2", env=env)
    assert r.returncode == 1
    assert "no --pod-ip, and the metadata service" in r.stderr
