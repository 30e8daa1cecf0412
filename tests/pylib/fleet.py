# SPDX-License-Identifier: Apache-2.0
"""A simulated VPC of cells on this machine: one network namespace for the
controller side (a docker-registry on a VPC address, and whatever runs
inside ``Fleet.ctl_ns()``) and one per cell with cell-agent at its own
address, each joined to the controller side by a veth (10.214.<i>.0/30,
the registry on 10.214.255.1). Certificates come from `cellctl pki`. The
host's own network is not touched: every address and route lives in a
namespace the fleet creates and deletes.

Example::

    with Fleet(10, "wtctl", build="build") as f:
        with f.ctl_ns():
            subprocess.run([cellctl, "run", pod, *f.cell_args()], ...)
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import List, Optional

import leakcheck
from images import File, Image, Layer, busybox_layer, push
from registry import Registry

REGISTRY_IP = "10.214.255.1"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def _ip(*args: str, ns: Optional[str] = None, check: bool = True) -> None:
    cmd = ["ip"] + (["-n", ns] if ns else []) + list(args)
    subprocess.run(cmd, check=check, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL if not check else None)


class _VpcRegistry(Registry):
    @property
    def host(self) -> str:
        return f"{REGISTRY_IP}:{self.port}"


class Fleet:
    def __init__(self, n: int, tag: str, build: str, env: Optional[dict] = None):
        self.n, self.build = n, build
        self.tag = f"{tag}{os.getpid() % 100000}"
        self.ctl = f"{self.tag}c"
        self.cells = [f"{self.tag}n{i}" for i in range(n)]
        self.addrs = [f"10.214.{i}.2" for i in range(n)]
        self.work = tempfile.mkdtemp(prefix=f"{self.tag}-")
        leakcheck.note_root(self.work)
        self.env = env or {}
        self.agents: List[subprocess.Popen] = []
        self.registry: Optional[Registry] = None
        self.pki = os.path.join(self.work, "pki")
        self.image = ""

    # -- namespaces --

    @contextlib.contextmanager
    def ctl_ns(self):
        """Run the body in the controller side's network namespace (this
        process and anything it starts)."""
        back = os.open("/proc/self/ns/net", os.O_RDONLY)
        there = os.open(f"/run/netns/{self.ctl}", os.O_RDONLY)
        try:
            _setns(there)
            yield
        finally:
            _setns(back)
            os.close(back)
            os.close(there)

    def _make_net(self) -> None:
        _ip("netns", "add", self.ctl)
        _ip("link", "set", "lo", "up", ns=self.ctl)
        _ip("addr", "add", REGISTRY_IP + "/32", "dev", "lo", ns=self.ctl)
        for i, ns in enumerate(self.cells):
            _ip("netns", "add", ns)
            a, b = f"{self.tag}a{i}"[-15:], f"{self.tag}b{i}"[-15:]
            _ip("link", "add", a, "netns", self.ctl, "type", "veth", "peer", "name", b,
                "netns", ns)
            _ip("addr", "add", f"10.214.{i}.1/30", "dev", a, ns=self.ctl)
            _ip("link", "set", a, "up", ns=self.ctl)
            _ip("link", "set", "lo", "up", ns=ns)
            _ip("addr", "add", f"{self.addrs[i]}/30", "dev", b, ns=ns)
            _ip("link", "set", b, "up", ns=ns)
            _ip("route", "add", "default", "via", f"10.214.{i}.1", ns=ns)

    def _drop_net(self) -> None:
        for ns in [self.ctl] + self.cells:
            _ip("netns", "del", ns, check=False)

    # -- lifecycle --

    def __enter__(self) -> "Fleet":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        cellctl = os.path.join(self.build, "bin", "cellctl")
        agent = os.path.join(self.build, "bin", "cell-agent")
        self._make_net()
        subprocess.run([cellctl, "pki", "init", self.pki], check=True)
        with self.ctl_ns():
            self.registry = _VpcRegistry(os.path.join(self.work, "registry"))
            hello = Layer([File("etc/motd", "hello from a fleet cell\n")])
            push(self.registry, "fleet/busybox", "latest",
                 Image([busybox_layer(), hello], config={"Cmd": ["/bin/sh"]}))
        self.image = self.registry.ref("fleet/busybox", "latest")
        env = dict(os.environ, **self.env)
        for i, ns in enumerate(self.cells):
            d = os.path.join(self.work, f"cell{i}")
            leakcheck.note_state_dir(os.path.join(d, "state"))
            boot = os.path.join(d, "boot")
            subprocess.run([cellctl, "pki", "cell", self.pki, "--boot-dir", boot],
                           check=True, stdout=subprocess.DEVNULL)
            log = open(os.path.join(d, "agent.log"), "wb")
            self.agents.append(subprocess.Popen(
                ["nsenter", f"--net=/run/netns/{ns}", agent, "--boot-dir", boot,
                 "--state-dir", os.path.join(d, "state"),
                 "--image-cache", os.path.join(d, "cache"),
                 "--insecure-registry", self.registry.host],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                start_new_session=True))
            log.close()

    def cell_args(self) -> List[str]:
        out = ["--pki", self.pki]
        for a in self.addrs:
            out += ["--cell", a]
        return out

    def log(self, i: int) -> str:
        with open(os.path.join(self.work, f"cell{i}", "agent.log"), errors="replace") as f:
            return f.read()

    def wait_units_gone(self, timeout: float = 30) -> None:
        """Each cell gets the whole timeout (one slow cell must not leave
        the next no time at all)."""
        for i in range(self.n):
            deadline = time.monotonic() + timeout
            units = os.path.join(self.work, f"cell{i}", "state", "units")
            while (os.path.isdir(units) and os.listdir(units)
                   and time.monotonic() < deadline):
                time.sleep(0.1)

    def delete_pods(self) -> None:
        """Stop every cell's units (the agents would keep them running:
        a stopped agent re-adopts its units when it starts again)."""
        cellctl = os.path.join(self.build, "bin", "cellctl")
        with self.ctl_ns():
            for a in self.addrs:
                subprocess.run([cellctl, "delete", "--pod", "default_x", "--grace", "0",
                                "--cell", a, "--pki", self.pki],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=60)
        self.wait_units_gone()

    def close(self) -> None:
        if self.agents and self.registry:
            try:
                self.delete_pods()
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
        for p in self.agents:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.agents:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        # Units outlive their agents by design: whatever a failed delete
        # left (a unit's monitor names its run below work) goes now.
        leakcheck.kill_below(self.work)
        if self.registry:
            self.registry.stop()
        self._drop_net()
        for i in range(self.n):
            subprocess.run(["umount", "-R", "-q",
                            os.path.join(self.work, f"cell{i}", "state")],
                           stderr=subprocess.DEVNULL)
        shutil.rmtree(self.work, ignore_errors=True)

    def __exit__(self, *exc) -> None:
        self.close()
