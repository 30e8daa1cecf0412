# SPDX-License-Identifier: Apache-2.0
"""cell-pull-cached, cell-pull's curl-free front (imagepull/cached.c).

The agent serves a cache hit itself (pull_from_cache, in process) and runs
it for the rest. An image that an earlier pull left in the cache is mounted
without the registry and without libcurl; anything
else (a miss, ``latest``, a damaged cache, an option it does not know) is
handed to cell-pull by exec, in the same process, with the same arguments.
The registry is stopped to prove which path ran.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import time

from conftest import CELL_BUILD, DEFAULT_TIMEOUT, _clean_env, is_mountpoint
from images import Dir, File, Image, Layer, busybox_layer, push
from test_agent_api import start_agent
from test_agent_pod import FAST, sh, wait_state
from wire import pod_params

FRONT = os.path.join(CELL_BUILD, "bin", "cell-pull-cached")
SERVED = '{"event":"done","cached":true}'  # the front's line; cell-pull's differ


def front(*args: str, env=None):
    p = subprocess.run([FRONT, *map(str, args)], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, env=_clean_env(env),
                       timeout=DEFAULT_TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def mount(reg, ref, workdir, tmp_path, mounts, name, *extra, env=None):
    mp = tmp_path / name
    mp.mkdir()
    mounts.append(str(mp))
    cfg = tmp_path / f"{name}.json"
    rc, out, err = front("--image", ref, "--mount", mp, "--workdir", workdir,
                         "--save-config", cfg, "--insecure-registry", reg.host,
                         "--progress", "json", *extra, env=env)
    return rc, out, err, str(mp), cfg


def image():
    return Image([busybox_layer(), Layer([Dir("etc"), File("etc/motd", "cached\n")])],
                 config={"Cmd": ["/bin/sh"]})


def test_front_maps_no_libcurl_or_libarchive():
    needed = subprocess.run(["readelf", "-d", FRONT], capture_output=True,
                            text=True, check=True).stdout
    for lib in ("libcurl", "libarchive"):
        assert lib not in needed, needed


def test_cached_tag_is_mounted_without_the_registry(registry, workdir, tmp_path, mounts):
    push(registry, "t/front", "v1", image())
    ref = registry.ref("t/front", "v1")
    rc, out, err, mp1, cfg1 = mount(registry, ref, workdir, tmp_path, mounts, "one")
    assert rc == 0, err
    assert SERVED not in out  # a miss: cell-pull pulled it
    registry.close()
    rc, out, err, mp2, cfg2 = mount(registry, ref, workdir, tmp_path, mounts, "two")
    assert rc == 0, err
    assert out.strip() == SERVED
    assert is_mountpoint(mp2)
    assert open(os.path.join(mp2, "etc/motd")).read() == "cached\n"
    assert open(cfg2, "rb").read() == open(cfg1, "rb").read()
    # The second mount has its own upper dir: a write stays in it.
    open(os.path.join(mp2, "etc/motd"), "w").write("two\n")
    assert open(os.path.join(mp1, "etc/motd")).read() == "cached\n"


def test_digest_reference_is_served_from_the_cache(registry, workdir, tmp_path, mounts):
    dig = push(registry, "t/front", "v1", image())
    ref = registry.ref("t/front", digest=dig)
    assert mount(registry, ref, workdir, tmp_path, mounts, "one")[0] == 0
    registry.close()
    rc, out, err, mp, _ = mount(registry, ref, workdir, tmp_path, mounts, "two")
    assert rc == 0 and out.strip() == SERVED, err
    assert os.path.exists(os.path.join(mp, "bin/busybox"))


def test_latest_always_asks_the_registry(registry, workdir, tmp_path, mounts):
    push(registry, "t/front", "latest", image())
    ref = registry.ref("t/front", "latest")
    assert mount(registry, ref, workdir, tmp_path, mounts, "one")[0] == 0
    registry.close()
    # cell-pull's 8 retries of the closed registry, 20 ms apart and up
    # (250 ms and up by default: 32 s).
    rc, out, err, mp, _ = mount(registry, ref, workdir, tmp_path, mounts, "two",
                                env={"CELL_PULL_RETRY_BASE_MS": "20"})
    assert rc == 1, (out, err)
    assert "cell-pull: pull " in err  # cell-pull's own error, after the exec
    assert not is_mountpoint(mp)


def test_a_damaged_cache_goes_to_the_registry(registry, workdir, tmp_path, mounts):
    push(registry, "t/front", "v1", image())
    ref = registry.ref("t/front", "v1")
    rc, _, err, _, cfg1 = mount(registry, ref, workdir, tmp_path, mounts, "one")
    assert rc == 0, err
    blobs = os.path.join(workdir, "blobs", "sha256")
    # The config blob, same size, other bytes: the front must not use it.
    cfg_blob = os.path.join(blobs, hashlib.sha256(open(cfg1, "rb").read()).hexdigest())
    data = open(cfg_blob, "rb").read()
    open(cfg_blob, "wb").write(b" " * len(data))
    n_before = len(registry.access_log().splitlines())
    rc, out, err, mp, cfg2 = mount(registry, ref, workdir, tmp_path, mounts, "two")
    assert rc == 0, err
    assert SERVED not in out
    assert len(registry.access_log().splitlines()) > n_before
    assert open(cfg2, "rb").read() == data
    assert open(os.path.join(mp, "etc/motd")).read() == "cached\n"


def test_unknown_options_are_cell_pulls(registry, workdir, tmp_path):
    rc, out, err = front("--version")
    assert rc == 0 and out.strip(), err
    assert out == subprocess.run([os.path.join(CELL_BUILD, "bin", "cell-pull"), "--version"],
                                 capture_output=True, text=True).stdout
    # --extract-to is cell-pull's alone: flattened, through the registry.
    push(registry, "t/front", "v1", image())
    dest = tmp_path / "flat"
    rc, out, err = front("--image", registry.ref("t/front", "v1"), "--extract-to", dest,
                         "--workdir", workdir, "--insecure-registry", registry.host)
    assert rc == 0, err
    assert open(dest / "etc/motd").read() == "cached\n"


def test_agent_restarts_a_unit_from_the_cache(tmp_path, registry):
    push(registry, "t/front", "v1", image())
    ref = registry.ref("t/front", "v1")
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host, env=FAST)
    c = a.client()
    try:
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "one", "sleep 1000")]))
        wait_state(c, "one", "running", timeout=60)
        registry.close()
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "one", "sleep 1000"),
                                                 sh(ref, "two", "sleep 1000")]))
        wait_state(c, "two", "running", timeout=60)
    finally:
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        assert a.stop() == 0, a.log()[-3000:]


def test_agent_mounts_a_cached_image_without_a_child(tmp_path, registry):
    """A cache hit is served in the agent itself (no puller to exec, most
    of a start's time before); a miss, or a gc holding the cache, goes to
    the puller child, and the agent never waits on the gc's lock."""
    push(registry, "t/front", "v1", image())
    ref = registry.ref("t/front", "v1")
    calls = tmp_path / "puller.calls"
    puller = tmp_path / "puller"
    puller.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {FRONT} "$@"\n')
    puller.chmod(0o755)
    d = tmp_path / "agent"
    a = start_agent(str(d), "--insecure-registry", registry.host, "--pull-bin",
                    str(puller), env=FAST)
    c = a.client()

    def ncalls():
        return len(calls.read_text().splitlines()) if calls.exists() else 0
    units = []
    try:
        for name in ("one", "two"):
            units.append(sh(ref, name, "sleep 1000"))
            c.update_pod(pod_params("ns_pod", units=list(units)))
            wait_state(c, name, "running", timeout=60)
        assert ncalls() == 1  # the first pull only; "two" came from the cache
        with open(d / "cache" / "locks" / "gc", "a") as gc:
            fcntl.flock(gc, fcntl.LOCK_EX)
            units.append(sh(ref, "three", "sleep 1000"))
            c.update_pod(pod_params("ns_pod", units=list(units)))
            end = time.monotonic() + DEFAULT_TIMEOUT
            while ncalls() < 2 and time.monotonic() < end:
                time.sleep(0.05)
            assert ncalls() == 2  # the child, waiting on the gc
            assert c.status()["unitStatus"]  # the agent is not
        wait_state(c, "three", "running", timeout=60)
    finally:
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        assert a.stop() == 0, a.log()[-3000:]
