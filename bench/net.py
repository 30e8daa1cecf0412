# SPDX-License-Identifier: Apache-2.0
"""cell-net vs the CNI plugins a user would otherwise pick (Debian's
containernetworking-plugins: ptp + portmap), setting up and tearing down
one pod network with the same pod IP and one hostPort.

Run by bench/net.sh inside a throwaway "cell" network namespace (never the
host's). Per repetition, each side:

* cell-net: ``cell-net setup --name N --pod-ip 10.99.0.50 --port 8080:80``
  (namespace, veth, addresses, routes, neighbour, proxy entry, ip_forward,
  masquerade and hostPort chains), then ``cell-net teardown``.
* CNI, driven through its protocol as a runtime does (CNI_COMMAND, CNI_NETNS,
  the network config on stdin, prevResult chained into portmap): ``ip netns
  add`` (the runtime makes the namespace; cell-net does that itself), ptp
  ADD (static IPAM 10.99.0.50/24, ipMasq) and portmap ADD (8080 -> 80);
  teardown is portmap DEL, ptp DEL and ``ip netns del``.

Medians of BENCH_REPS runs (default 7) of the wall time of each phase.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

POD_IP = "10.99.0.50"
CNI_PATH = "/usr/lib/cni"

PTP = {"cniVersion": "1.0.0", "name": "wtnetbench", "type": "ptp", "ipMasq": True,
       "mtu": 1500,
       "ipam": {"type": "static",
                "addresses": [{"address": f"{POD_IP}/24", "gateway": "10.99.0.49"}],
                "routes": [{"dst": "0.0.0.0/0"}]}}
PORTMAP = {"cniVersion": "1.0.0", "name": "wtnetbench", "type": "portmap",
           "capabilities": {"portMappings": True},
           "runtimeConfig": {"portMappings": [
               {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]}}


def run(args, stdin=None, env=None):
    r = subprocess.run(args, input=stdin, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"bench: {' '.join(args)} failed ({r.returncode}): {r.stdout} {r.stderr}")
    return r.stdout


def cni(plugin, command, netns, conf):
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND": command,
           "CNI_CONTAINERID": "wtnetbench", "CNI_NETNS": netns, "CNI_IFNAME": "eth0",
           "CNI_PATH": CNI_PATH}
    return run([os.path.join(CNI_PATH, plugin)], stdin=json.dumps(conf), env=env)


def cell_net_once(binary, name, state):
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CELL_NET_STATE_DIR": state}
    t0 = time.perf_counter()
    run([binary, "setup", "--name", name, "--pod-ip", POD_IP, "--port", "8080:80"], env=env)
    t1 = time.perf_counter()
    run([binary, "teardown", "--name", name], env=env)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def cni_once(name):
    netns = f"/var/run/netns/{name}"
    t0 = time.perf_counter()
    run(["ip", "netns", "add", name])
    prev = json.loads(cni("ptp", "ADD", netns, PTP))
    cni("portmap", "ADD", netns, {**PORTMAP, "prevResult": prev})
    t1 = time.perf_counter()
    cni("portmap", "DEL", netns, PORTMAP)
    cni("ptp", "DEL", netns, PTP)
    run(["ip", "netns", "del", name])
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--state", required=True)
    a = ap.parse_args()
    reps = int(os.environ.get("BENCH_REPS", "7"))
    cn, cc = [], []
    cell_net_once(a.binary, f"wtnet-{a.tag}-cn", a.state)  # warm-up
    cni_once(f"wtnet-{a.tag}-cni")
    for _ in range(reps):  # interleaved: drift hits both sides alike
        cn.append(cell_net_once(a.binary, f"wtnet-{a.tag}-cn", a.state))
        cc.append(cni_once(f"wtnet-{a.tag}-cni"))
    med = lambda v, i: statistics.median(x[i] for x in v) * 1000  # noqa: E731
    rows = [("setup", 0), ("teardown", 1)]
    print(f"pod network setup/teardown, median of {reps} (ms)")
    print(f"{'':10} {'cell-net':>10} {'ptp+portmap':>12} {'ratio':>7}")
    for label, i in rows:
        x, y = med(cn, i), med(cc, i)
        print(f"{label:10} {x:10.2f} {y:12.2f} {x / y:7.3f}")
    x = statistics.median(s + t for s, t in cn) * 1000
    y = statistics.median(s + t for s, t in cc) * 1000
    print(f"{'both':10} {x:10.2f} {y:12.2f} {x / y:7.3f}")
    print(f"setup ratio target <= 0.2: {'met' if med(cn, 0) / med(cc, 0) <= 0.2 else 'MISSED'}")


if __name__ == "__main__":
    main()
