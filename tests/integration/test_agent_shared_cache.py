# SPDX-License-Identifier: Apache-2.0
"""The agent and the shared image cache (docs/boot.md, "Shared image cache").

A cell mounts the operator's NFS export read-only at boot (imageCache* keys
in cell_config.yaml) and its pulls use the share's layers in place. This
machine's kernel has no NFS client: the mount command is the agent's seam
(--image-cache-mount-cmd), here a script that makes a read-only bind mount
of a populated directory, after failing a few times as an NFS server that
is not up yet would.
"""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from conftest import DEFAULT_TIMEOUT, is_mountpoint
from images import Dir, File, Image, Layer, busybox_layer, push
from test_agent_api import start_agent
from test_agent_pod import FAST, sh, state_of, units_by_name, wait_state
from wire import pod_params


def image():
    return Image([busybox_layer(), Layer([Dir("etc"), File("etc/motd", "shared\n")])],
                 config={"Cmd": ["/bin/sh"]})


@pytest.fixture
def populated(tmp_path, registry, run_pull):
    push(registry, "t/shared", "v1", image())
    ref = registry.ref("t/shared", "v1")
    pop = str(tmp_path / "pop")
    rc, _, err = run_pull("--populate", pop, "--image", ref, "--insecure-registry",
                          registry.host)
    assert rc == 0, err
    return ref, pop


@pytest.fixture
def ro_mounts():
    made = []
    yield made
    for d in reversed(made):
        for _ in range(4):
            if not is_mountpoint(d):
                break
            subprocess.run(["umount", "-l", d], capture_output=True)


def ro_bind(src: str, dst: str, made: list) -> None:
    os.makedirs(dst, exist_ok=True)
    subprocess.run(["mount", "--bind", src, dst], check=True)
    made.append(dst)
    subprocess.run(["mount", "-o", "remount,bind,ro", dst], check=True)


def stop(a, c):
    c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
    assert a.stop() == 0, a.log()[-3000:]


def test_a_pod_starts_from_the_share_without_blobs(tmp_path, registry, populated, ro_mounts):
    ref, pop = populated
    nfs = str(tmp_path / "nfs")
    ro_bind(pop, nfs, ro_mounts)
    mark = registry.mark()
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    "--shared-image-cache", nfs, env=FAST)
    c = a.client()
    try:
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "one", "cat /etc/motd; sleep 1000")]))
        wait_state(c, "one", "running", timeout=60)
        assert registry.blob_gets(since=mark) == []
        assert not os.listdir(tmp_path / "agent" / "cache" / "layers" / "sha256")
        end = time.monotonic() + 10
        while b"shared" not in c.logs("one") and time.monotonic() < end:
            time.sleep(0.1)
        assert b"shared" in c.logs("one")
        # A second unit of the image: served by cell-pull-cached from the
        # local record and the share's layers, not even a manifest GET.
        mark = registry.mark()
        c.update_pod(pod_params("ns_pod", units=[
            sh(ref, "one", "cat /etc/motd; sleep 1000"), sh(ref, "two", "sleep 1000")]))
        wait_state(c, "two", "running", timeout=60)
        assert registry.requests(since=mark) == []
        assert not os.listdir(tmp_path / "agent" / "cache" / "layers" / "sha256")
    finally:
        stop(a, c)


def test_registry_down_with_a_shared_tag(tmp_path, registry, populated, ro_mounts):
    ref, pop = populated
    nfs = str(tmp_path / "nfs")
    ro_bind(pop, nfs, ro_mounts)
    registry.close()
    # A retry ladder of minutes: waiting it out would miss the deadline.
    env = dict(FAST, CELL_PULL_RETRY_BASE_MS="60000")
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    "--shared-image-cache", nfs, env=env)
    c = a.client()
    try:
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "one", "sleep 1000")]))
        st = wait_state(c, "one", "running", timeout=60)
        msg = state_of(st, "one")["running"].get("message", "")
        assert "registry unreachable" in msg and "shared cache" in msg, st
        assert "registry unreachable" in a.log()
    finally:
        stop(a, c)


def test_cell_config_mounts_the_share_in_the_background(
        tmp_path, registry, populated, ro_mounts):
    ref, pop = populated
    nfs = str(tmp_path / "nfs")
    calls = tmp_path / "mount.calls"
    ok = tmp_path / "server-up"
    cmd = tmp_path / "mount-nfs"
    ro_mounts.append(nfs)
    cmd.write_text(f"""#!/bin/sh
echo "$@" >> {calls}
[ -e {ok} ] || {{ echo "mount.nfs: Connection refused" >&2; exit 32; }}
for dir; do :; done
mount --bind {pop} "$dir" && mount -o remount,bind,ro "$dir"
""")
    cmd.chmod(0o755)
    config = (f"imageCacheEndpoint: 10.20.0.2:/data\n"
              f"imageCacheMountDir: {nfs}\n"
              f"imageCacheMountOpts: -o nfsvers=4.1,rw\n"
              f"itzoFlag-image-cache-mount-cmd: {cmd}\n")
    env = dict(FAST, CELL_AGENT_IMAGE_CACHE_RETRY_MS="100")
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    env=env, boot_config=config)
    c = a.client()
    try:
        # The API is up while the mount fails; a pod meanwhile pulls from
        # the registry.
        end = time.monotonic() + 30
        while (not calls.exists() or len(calls.read_text().splitlines()) < 2) and \
                time.monotonic() < end:
            time.sleep(0.05)
        assert len(calls.read_text().splitlines()) >= 2
        c.ping()
        assert "Connection refused" in a.log()
        plain = registry.ref("t/plain", "v1")
        push(registry, "t/plain", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
        mark = registry.mark()
        c.update_pod(pod_params("ns_pod", units=[sh(plain, "one", "sleep 1000")]))
        wait_state(c, "one", "running", timeout=60)
        assert registry.blob_gets(since=mark)
        # The server comes up: the next try mounts it, read-only.
        ok.write_text("")
        end = time.monotonic() + 30
        while not is_mountpoint(nfs) and time.monotonic() < end:
            time.sleep(0.05)
        assert is_mountpoint(nfs)
        words = calls.read_text().splitlines()[-1].split()
        assert words[:2] == ["-t", "nfs"] and words[-4:] == ["-o", "ro", "10.20.0.2:/data", nfs]
        assert "nfsvers=4.1,rw" in words
        end = time.monotonic() + 10
        while "mounted read-only" not in a.log() and time.monotonic() < end:
            time.sleep(0.05)
        # A unit of the shared image: its top layer and config from the
        # share, its busybox layer from the local cache.
        mark = registry.mark()
        c.update_pod(pod_params("ns_pod", units=[sh(plain, "one", "sleep 1000"),
                                                 sh(ref, "two", "sleep 1000")]))
        wait_state(c, "two", "running", timeout=60)
        assert registry.blob_gets(since=mark) == []
    finally:
        stop(a, c)
