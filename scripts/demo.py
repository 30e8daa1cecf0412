# SPDX-License-Identifier: Apache-2.0
"""The main job of scripts/demo.sh: a local cell driven by cellctl.

Two network namespaces joined by a veth stand for a VPC: "ctl" holds the
controller side (a throwaway docker-registry with a small image made from
busybox-static, and cellctl), "cell" holds cell-agent with its own address.
Certificates come from `cellctl pki`; then `cellctl run examples/hello.yaml`
dispatches the pod as the Kip controller would, and the demo shows its
status, its logs and an exec. The host's own network is not touched; no
internet is needed.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))

from images import File, Image, Layer, busybox_layer, push  # noqa: E402
from registry import Registry  # noqa: E402

BUILD = os.environ.get("CELL_BUILD", os.path.join(ROOT, "build"))
CELLCTL = os.path.join(BUILD, "bin", "cellctl")
AGENT = os.path.join(BUILD, "bin", "cell-agent")
TAG = os.environ.get("CELL_DEMO_TAG") or f"celldemo{os.getpid()}"
os.environ["CELL_DEMO_TAG"] = TAG
NS_CTL, NS_CELL = f"{TAG}c", f"{TAG}a"
CTL_IP, CELL_IP = "10.213.0.1", "10.213.0.2"


def sh(*cmd, ns=None, check=True, **kw):
    if ns:
        # nsenter switches the network namespace only: `ip netns exec`
        # would also remount /sys, hiding the cgroup tree the agent needs.
        cmd = ("nsenter", f"--net=/run/netns/{ns}") + cmd
    return subprocess.run(cmd, check=check, **kw)


def show(*cmd, ns=NS_CTL):
    """Print a cellctl command as a user would type it, then run it."""
    print("\n$ " + " ".join(c if " " not in c else repr(c) for c in cmd), flush=True)
    return sh(*cmd, ns=ns)


def make_vpc():
    drop_vpc()
    sh("ip", "netns", "add", NS_CTL)
    sh("ip", "netns", "add", NS_CELL)
    sh("ip", "link", "add", "v" + TAG[-8:] + "c", "netns", NS_CTL, "type", "veth",
       "peer", "name", "v" + TAG[-8:] + "a", "netns", NS_CELL)
    for ns, dev, ip in ((NS_CTL, "c", CTL_IP), (NS_CELL, "a", CELL_IP)):
        sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("ip", "addr", "add", ip + "/30", "dev", "v" + TAG[-8:] + dev, ns=ns)
        sh("ip", "link", "set", "v" + TAG[-8:] + dev, "up", ns=ns)


def drop_vpc():
    for ns in (NS_CTL, NS_CELL):
        sh("ip", "netns", "del", ns, check=False, stderr=subprocess.DEVNULL)


class VpcRegistry(Registry):
    """The registry on the controller side's VPC address."""

    @property
    def host(self) -> str:
        return f"{CTL_IP}:{self.port}"


def inner(work):
    """Runs inside the ctl namespace."""
    reg = VpcRegistry(os.path.join(work, "registry"))
    agent = None
    try:
        hello = Layer([File("etc/motd", "hello from a cell image\n")])
        push(reg, "demo/busybox", "latest",
             Image([busybox_layer(), hello], config={"Cmd": ["/bin/sh"]}))
        ref = reg.ref("demo/busybox", "latest")
        pki, boot = os.path.join(work, "pki"), os.path.join(work, "boot")
        show(CELLCTL, "pki", "init", pki)
        show(CELLCTL, "pki", "cell", pki, "--boot-dir", boot)
        log = open(os.path.join(work, "agent.log"), "wb")
        print(f"\n# cell-agent in its own network namespace at {CELL_IP}", flush=True)
        agent = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{NS_CELL}", AGENT, "--boot-dir", boot,
             "--state-dir", os.path.join(work, "state"),
             "--image-cache", os.path.join(work, "cache"),
             "--insecure-registry", reg.host,
             "--agent-log", os.path.join(work, "itzo.log"),
             "--containers-log-dir", os.path.join(work, "containers")],
            stdout=log, stderr=log, start_new_session=True)
        with open(os.path.join(ROOT, "examples", "hello.yaml")) as f:
            manifest = re.sub(r"image: busybox\b", f"image: {ref}", f.read())
        pod = os.path.join(work, "hello.yaml")
        with open(pod, "w") as f:
            f.write(manifest)
        print(f"# examples/hello.yaml with its image at {ref}")
        env = dict(os.environ, CELLCTL_PKI=pki, CELLCTL_CELL=CELL_IP)
        t0 = time.monotonic()
        show(CELLCTL, "run", pod, "--cell", CELL_IP, "--pki", pki)
        print(f"# running {time.monotonic() - t0:.2f} s after `cellctl run`")
        os.environ.update(env)
        show(CELLCTL, "status", "-o", "wide")
        time.sleep(2.2)
        show(CELLCTL, "logs", "hello")
        show(CELLCTL, "exec", "--", "/bin/sh", "-c",
             "hostname; cat /etc/motd; ip addr 2>/dev/null | grep 'inet ' || true")
        show(CELLCTL, "delete", pod, "--grace", "1")
        units = os.path.join(work, "state", "units")
        deadline = time.monotonic() + 20
        while os.path.isdir(units) and os.listdir(units) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        if agent:
            agent.terminate()
            agent.wait(timeout=15)
        reg.stop()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--inner":
        inner(sys.argv[2])
        return
    work = tempfile.mkdtemp(prefix="cell-demo-")
    t0 = time.monotonic()
    try:
        make_vpc()
        sh(sys.executable, os.path.abspath(__file__), "--inner", work, ns=NS_CTL)
    finally:
        drop_vpc()
        subprocess.run(["umount", "-R", "-q", os.path.join(work, "state")],
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\ndemo ok ({time.monotonic() - t0:.1f} s)")


if __name__ == "__main__":
    main()
