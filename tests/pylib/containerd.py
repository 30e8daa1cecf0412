# SPDX-License-Identifier: Apache-2.0
"""A throwaway containerd (own socket, root and state under a directory)
for Debian's `ctr-remote` (stargz-snapshotter), which converts images to
eStargz: tests/integration/test_pull_lazy.py and bench/lazy.py. The CRI
and the snapshotters it does not need are off.

    with Containerd(d) as ctr:
        manifest = convert_estargz(ctr, registry, "app", "v1", "app-esgz")
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Optional

from images import MT_OCI_INDEX, MT_OCI_MANIFEST, pusher_for


class ContainerdError(Exception):
    pass


class Containerd:
    def __init__(self, d: str, timeout: float = 120):
        self.dir, self.timeout = d, timeout
        os.makedirs(d, exist_ok=True)
        self.sock = os.path.join(d, "c.sock")
        cfg = os.path.join(d, "cfg.toml")
        with open(cfg, "w") as f:
            f.write(f'version = 2\nroot = "{d}/root"\nstate = "{d}/state"\n'
                    'disabled_plugins = ["io.containerd.grpc.v1.cri", '
                    '"io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", '
                    '"io.containerd.snapshotter.v1.zfs", '
                    '"io.containerd.snapshotter.v1.devmapper"]\n'
                    f'[grpc]\n  address = "{self.sock}"\n'
                    f'[ttrpc]\n  address = "{self.sock}.ttrpc"\n')
        self._log = open(os.path.join(d, "log"), "wb")
        self.proc = subprocess.Popen(["containerd", "--config", cfg], stdout=self._log,
                                     stderr=self._log, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not os.path.exists(self.sock):
            time.sleep(0.1)
        if not os.path.exists(self.sock):
            self.close()
            raise ContainerdError(f"containerd did not start: {self.log()[-2000:]}")

    def log(self) -> str:
        with open(os.path.join(self.dir, "log"), errors="replace") as f:
            return f.read()

    def __call__(self, *args: str) -> str:
        """ctr-remote ARGS against this containerd; its stdout."""
        r = subprocess.run(["ctr-remote", "-a", self.sock, *args], capture_output=True,
                           text=True, timeout=self.timeout)
        if r.returncode != 0:
            raise ContainerdError(f"ctr-remote {args}: {r.stderr[-2000:]}")
        return r.stdout

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        self._log.close()

    def __enter__(self) -> "Containerd":
        return self

    def __exit__(self, *a) -> None:
        self.close()


def convert_estargz(ctr: Containerd, registry, name: str, tag: str, dst_name: str,
                    chunk_size: Optional[int] = None, arch: str = "amd64") -> dict:
    """ctr-remote's `images convert --estargz --oci` of registry's
    name:tag, pushed as dst_name:tag (plain HTTP); the pushed manifest
    (of arch, when ctr-remote pushed an index)."""
    src, dst = registry.ref(name, tag), registry.ref(dst_name, tag)
    ctr("images", "pull", "--plain-http", src)
    ctr("images", "convert", "--estargz", "--oci",
        *(["--estargz-chunk-size", str(chunk_size)] if chunk_size else []), src, dst)
    ctr("images", "push", "--plain-http", dst)
    p = pusher_for(registry)
    try:
        r = p.get_manifest(dst_name, tag, accept=(MT_OCI_MANIFEST, MT_OCI_INDEX))
        r.raise_for_status()
        man = r.json()
        if man.get("manifests"):  # an index: take arch's manifest
            dg = next(m["digest"] for m in man["manifests"]
                      if m.get("platform", {}).get("architecture") == arch)
            r = p.get_manifest(dst_name, dg, accept=(MT_OCI_MANIFEST,))
            r.raise_for_status()
            man = r.json()
    finally:
        p.close()
    return man
