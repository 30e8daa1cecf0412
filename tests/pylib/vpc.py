# SPDX-License-Identifier: Apache-2.0
"""A simulated VPC built from network namespaces, for cell-net's tests.

    peer (10.99.0.20/24) ──┐
                           br0 10.99.0.1/24 ── vpc (router) ── 203.0.113.1/24
    cell eth0 (10.99.0.10) ┘   route 10.99.0.50 via 10.99.0.10       │
                                                          internet 203.0.113.2
                                  (routes back only to the cell's primary IP)

The "cell" namespace plays the instance: its primary interface eth0 holds
the primary IP, and the router sends the secondary IP (the pod IP) to it.
The peer is in the same subnet, so it reaches the pod IP by ARP (the cell's
proxy neighbour entry answers). The internet namespace knows a route back to
the cell's primary IP only: a pod reaches it only when masqueraded.

Every namespace name has "wtnet" and a random tag in it; nothing is created
in the host's own namespace (links are made with ``ip -n``).
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import time
from typing import List, Optional

PRIMARY_IP = "10.99.0.10"
POD_IP = "10.99.0.50"
PEER_IP = "10.99.0.20"
ROUTER_IP = "10.99.0.1"
INET_IP = "203.0.113.2"
IMDS_IP = "169.254.169.254"
PYLIB = os.path.dirname(os.path.abspath(__file__))
USER_DATA = b"#cloud-config\n# server.key: -----BEGIN EC PRIVATE KEY----- SECRET\n"


def run(*args: str, check: bool = True, timeout: float = 30, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=check, capture_output=True, text=True,
                          timeout=timeout, **kw)


def host_snapshot() -> dict:
    """The host's own rules and routes (compared before and after tests)."""
    snap = {}
    for name, cmd in (("iptables", ["iptables-save"]),
                      ("iptables-legacy", ["iptables-legacy-save"]),
                      ("route", ["ip", "-d", "route", "show", "table", "all"]),
                      ("rule", ["ip", "rule"]),
                      ("forward", ["cat", "/proc/sys/net/ipv4/ip_forward"])):
        snap[name] = normalize(run(*cmd, check=False).stdout)
    return snap


def normalize(text: str) -> str:
    """Listings without what changes by itself: comments, counters."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        line = re.sub(r"\[\d+:\d+\]", "[0:0]", line)
        # IPv6 duplicate address detection finishes in its own time.
        line = line.replace(" tentative", "")
        out.append(line)
    return "\n".join(out)


class Vpc:
    def __init__(self, tag: Optional[str] = None):
        self.tag = tag or secrets.token_hex(3)
        t = self.tag
        self.cell = f"wtnet-{t}-cell"
        self.vpc = f"wtnet-{t}-vpc"
        self.peer = f"wtnet-{t}-peer"
        self.inet = f"wtnet-{t}-inet"
        self.pod = f"wtnet-{t}-pod"  # the name cell-net is given
        self.procs: List[subprocess.Popen] = []

    # ---- building and removing ----

    def up(self) -> "Vpc":
        C, V, P, I = self.cell, self.vpc, self.peer, self.inet
        for n in (C, V, P, I):
            run("ip", "netns", "add", n)
            run("ip", "-n", n, "link", "set", "lo", "up")
        cmds = [
            f"-n {V} link add br0 type bridge",
            f"-n {V} link set br0 up",
            f"-n {V} addr add {ROUTER_IP}/24 dev br0",
            f"-n {V} link add tocell type veth peer name eth0 netns {C}",
            f"-n {V} link add topeer type veth peer name eth0 netns {P}",
            f"-n {V} link add toinet type veth peer name eth0 netns {I}",
            f"-n {V} link set tocell master br0 up",
            f"-n {V} link set topeer master br0 up",
            f"-n {V} link set toinet up",
            f"-n {V} addr add 203.0.113.1/24 dev toinet",
            f"-n {C} addr add {PRIMARY_IP}/24 dev eth0",
            f"-n {C} link set eth0 up",
            f"-n {C} route add default via {ROUTER_IP}",
            f"-n {P} addr add {PEER_IP}/24 dev eth0",
            f"-n {P} link set eth0 up",
            f"-n {P} route add default via {ROUTER_IP}",
            f"-n {I} addr add {INET_IP}/24 dev eth0",
            f"-n {I} link set eth0 up",
            f"-n {I} route add {PRIMARY_IP}/32 via 203.0.113.1",
            f"-n {V} route add {POD_IP}/32 via {PRIMARY_IP}",
        ]
        for c in cmds:
            run("ip", *c.split())
        self.sh(V, "echo 1 > /proc/sys/net/ipv4/ip_forward")
        # A new namespace inherits the host's IPv4 "all"/"default" settings
        # (devconf_inherit_init_net 0): start the cell from a known one.
        self.sh(C, "echo 0 > /proc/sys/net/ipv4/ip_forward")
        return self

    def down(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for n in (self.pod, self.cell, self.vpc, self.peer, self.inet):
            path = f"/var/run/netns/{n}"
            if os.path.exists(path):
                run("ip", "netns", "del", n, check=False)

    # ---- running things inside ----

    def ns_cmd(self, ns: str, *args: str) -> List[str]:
        # nsenter --net only: no new mount namespace, so a namespace that
        # cell-net bind-mounts stays visible after it exits (`ip netns exec`
        # would put it in a throwaway mount namespace).
        return ["nsenter", f"--net=/var/run/netns/{ns}", "--", *args]

    def sh(self, ns: str, script: str, check: bool = True, timeout: float = 30):
        return run(*self.ns_cmd(ns, "sh", "-c", script), check=check, timeout=timeout)

    def start(self, ns: str, *args: str, **kw) -> subprocess.Popen:
        p = subprocess.Popen(self.ns_cmd(ns, *args), **kw)
        self.procs.append(p)
        return p

    def http_server(self, ns: str, port: int, bind: str = "0.0.0.0") -> "Server":
        return Server(self, ns, port, bind)

    def curl(self, ns: str, url: str, timeout: float = 5) -> str:
        r = run(*self.ns_cmd(ns, "curl", "-s", "--max-time", str(timeout), url),
                check=False, timeout=timeout + 10)
        return r.stdout

    def snapshot(self, ns: Optional[str] = None) -> dict:
        """Rules, routes, links, addresses, proxy entries, sysctls of ns."""
        ns = ns or self.cell
        snap = {}
        for name, script in (
                ("iptables-legacy", "iptables-legacy-save"),
                ("iptables-nft", "iptables-nft-save"),
                ("ip6tables-legacy", "ip6tables-legacy-save"),
                ("link", "ip -d link show"),
                ("addr", "ip -d addr show"),
                ("route", "ip -4 -d route show table all"),
                ("proxy", "ip neigh show proxy"),
                ("sysctl", "for f in /proc/sys/net/ipv4/ip_forward "
                           "/proc/sys/net/ipv4/conf/*/forwarding "
                           "/proc/sys/net/ipv4/conf/*/proxy_arp; do "
                           "echo $f $(cat $f); done")):
            snap[name] = normalize(self.sh(ns, script, check=False).stdout)
        snap["netns"] = "\n".join(sorted(
            n for n in os.listdir("/var/run/netns") if self.tag in n))
        return snap


IMDS_PY = r"""
import sys
sys.path.insert(0, sys.argv[1])
import metadata
log = sys.argv[2]
class Logged(metadata.IMDS):
    def handle(self, method, path, headers):
        with open(log, "a") as f:
            f.write(f"{method} {path}\n")
        return super().handle(method, path, headers)
s = Logged(mode="optional", user_data=sys.argv[3].encode(), bind=(sys.argv[4], 80))
print("READY", flush=True)
s.thread.join()
"""


def imds(vpc: "Vpc", log: str) -> None:
    """A fake EC2 metadata service (tests/pylib/metadata.py, IMDSv2
    optional) at 169.254.169.254:80 in the router's namespace: the cell
    reaches it through its default route, as an instance reaches the real
    one through its interface. Every request's method and path is
    appended to log."""
    vpc.sh(vpc.vpc, f"ip addr add {IMDS_IP}/32 dev lo")
    p = vpc.start(vpc.vpc, "/usr/bin/python3", "-c", IMDS_PY, PYLIB, log,
                  USER_DATA.decode(), IMDS_IP, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "READY", "the fake IMDS did not start"


SERVER_PY = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello from " + sys.argv[3] + " to " + self.client_address[0]).encode()
        print("CLIENT", self.client_address[0], flush=True)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H)
print("READY", flush=True)
s.serve_forever()
"""


class Server:
    """A tiny HTTP server in a namespace that answers with the client's
    address (so a test sees which source address arrived)."""

    def __init__(self, vpc: Vpc, ns: str, port: int, bind: str):
        self.p = vpc.start(ns, "/usr/bin/python3", "-c", SERVER_PY, bind, str(port), ns,
                           stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        assert line.strip() == "READY", f"server in {ns} did not start: {line!r}"


def wait_for(pred, timeout: float = 10, step: float = 0.1):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)
