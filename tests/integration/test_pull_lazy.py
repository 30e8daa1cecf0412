# SPDX-License-Identifier: Apache-2.0
"""Lazy eStargz layers: `cell-pull --lazy-layer DIGEST --mount DIR` serves
one layer through FUSE, read on demand with range requests (docs/imagepull.md
"Lazy pulling"). The tree equals a full pull's; a hostile TOC is refused; a
chunk that does not match its digest is never served; a stalled registry is
an I/O error in bounded time; a 401 during range reads renews the token."""
from __future__ import annotations

import errno
import hashlib
import os
import select
import signal
import subprocess
import time

import pytest

from conftest import is_mountpoint
from containerd import Containerd, convert_estargz
from estargz import EstargzLayer, annotate
from images import (Dir, File, Hardlink, Image, Layer, Opaque, Symlink, Whiteout,
                    diff_listings, push, tree_listing, _prng)

BIG = _prng(b"lazy-big", 50_000)


def rich_entries():
    return [
        Dir("etc"), File("etc/motd", "two\n"), File("etc/empty", ""),
        Hardlink("etc/hard", "etc/motd"),
        Dir("data", mode=0o750, uid=7, gid=8), File("data/c", "c\n", mode=0o4755),
        File("data/big", BIG, mode=0o600, uid=7),
        Symlink("etc/link", "/etc/motd"), Whiteout("gone"), Opaque("data"),
        File("attr", "x", pax={"SCHILY.xattr.user.note": "hello"}),
        File("deep/er/file", "implicit parents\n"),
    ]


def wait_ready(p: subprocess.Popen, timeout: float = 30.0) -> None:
    """Until cell-pull says {"event":"done"} (the mount is there)."""
    deadline = time.monotonic() + timeout
    buf = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([p.stdout], [], [], 0.2)
        if r:
            line = p.stdout.readline()
            if not line:
                break
            buf += line
            if b'"done"' in line:
                return
        if p.poll() is not None:
            break
    err = p.stderr.read().decode(errors="replace") if p.poll() is not None else ""
    pytest.fail(f"lazy mount not ready: rc={p.poll()} out={buf!r} err={err[-2000:]}")


def contents(root: str) -> dict:
    out = {}
    for d, _, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                out[os.path.relpath(p, root)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


@pytest.fixture
def lazy(start_pull, tmp_path, mounts):
    """lazy(registry, ref, layer, workdir, env=) -> mountpoint, process."""
    def start(reg, ref, layer, workdir, env=None, ready=True, host=None, extra=(),
              background=False):
        mp = tmp_path / f"lazy{len(mounts)}"
        mp.mkdir()
        mounts.append(str(mp))
        p = start_pull("--image", ref, "--mount", str(mp), "--lazy-layer", layer.digest,
                       "--workdir", workdir, "--insecure-registry", host or reg.host,
                       "--progress", "json", "-v", *extra,
                       env={**(env or {}),
                            "CELL_PULL_LAZY_BACKGROUND": "1" if background else "0"})
        if ready:
            wait_ready(p)
        return str(mp), p
    return start


def stop(p: subprocess.Popen, mp: str) -> str:
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert not is_mountpoint(mp)
    return err.decode(errors="replace")


def test_lazy_layer_equals_full_pull(registry, pull, lazy, tmp_path):
    layer = EstargzLayer(rich_entries(), prefetch=3)
    img = Image([layer], fmt="oci", mutate_manifest=annotate([layer]))
    ref = registry.ref("lazy/rich", "v1")
    push(registry, "lazy/rich", "v1", img)
    full = str(tmp_path / "full")
    os.mkdir(full)
    rc, _, err = pull(registry, ref, str(tmp_path / "m"), full, "--lazy", "off",
                      mode="--mount")
    assert rc == 0, err
    subprocess.run(["umount", str(tmp_path / "m")], check=True)
    want = os.path.join(full, "layers", "sha256", layer.diff_hex)
    assert os.path.isdir(want), os.listdir(os.path.join(full, "layers", "sha256"))

    mark = registry.mark()
    mp, p = lazy(registry, ref, layer, str(tmp_path / "w"), background=True)
    # before any read: the footer and TOC, the prefetch (one request), and
    # the background fetch may have started; never the whole blob at once
    diff = diff_listings(tree_listing(want), tree_listing(mp))
    assert not diff, "\n".join(diff)
    assert contents(mp) == contents(want)
    assert os.getxattr(os.path.join(mp, "data"), "trusted.overlay.opaque") == b"y"
    assert os.getxattr(os.path.join(mp, "attr"), "user.note") == b"hello"
    assert os.stat(os.path.join(mp, "etc/hard")).st_ino == \
        os.stat(os.path.join(mp, "etc/motd")).st_ino
    for hidden in ("stargz.index.json", ".prefetch.landmark", ".no.prefetch.landmark"):
        assert not os.path.lexists(os.path.join(mp, hidden))
    gets = registry.blob_gets(layer.digest, since=mark)
    assert gets and all(g.ranged for g in gets), [str(g) for g in gets]
    err = stop(p, mp)
    assert "0 chunks refused" in err, err[-2000:]


def test_lazy_layer_under_overlay_whiteouts_across_layers(registry, pull, lazy, tmp_path,
                                                          mounts):
    """A full lower layer and a lazy upper one, as overlayfs mounts them,
    equal a flattened full pull (whiteouts and the opaque directory hide
    the lower layer's files)."""
    lower = Layer([Dir("data"), File("data/a", "a\n"), File("gone", "x"),
                   File("etc/motd", "one\n")])
    upper = EstargzLayer(rich_entries())
    img = Image([lower, upper], fmt="oci", mutate_manifest=annotate([lower, upper]))
    ref = registry.ref("lazy/two", "v1")
    push(registry, "lazy/two", "v1", img)
    flat = str(tmp_path / "flat")
    rc, _, err = pull(registry, ref, flat, str(tmp_path / "w1"))
    assert rc == 0, err
    w = str(tmp_path / "w")
    rc, _, err = pull(registry, ref, str(tmp_path / "m"), w, "--lazy", "off",
                      mode="--mount")
    assert rc == 0, err
    subprocess.run(["umount", str(tmp_path / "m")], check=True)
    mp, p = lazy(registry, ref, upper, str(tmp_path / "w2"))
    root = tmp_path / "root"
    root.mkdir()
    low = os.path.join(w, "layers", "sha256", lower.diff_hex)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={mp}:{low}", str(root)], check=True)
    mounts.append(str(root))
    try:
        diff = diff_listings(tree_listing(flat), tree_listing(str(root)))
        assert not diff, "\n".join(diff)
        assert contents(flat) == contents(str(root))
    finally:
        subprocess.run(["umount", str(root)], check=True)
    stop(p, mp)


@pytest.mark.parametrize("hostile,why", [
    ({"name": "../../etc/passwd", "type": "reg"}, "'..'"),
    ({"name": "x", "type": "hardlink", "linkName": "/../etc/shadow"}, "'..'"),
    ({"name": "y", "type": "hardlink", "linkName": "/etc/shadow"}, "not in the layer"),
    ({"name": "z", "type": "reg", "size": 1 << 50, "offset": 1,
      "chunkDigest": "sha256:" + "0" * 64}, "size"),
    ({"name": "etc/motd", "type": "reg"}, "twice"),
])
def test_lazy_hostile_toc_refused(registry, lazy, tmp_path, hostile, why):
    def m(toc):
        toc["entries"].append(hostile)
    layer = EstargzLayer([Dir("etc"), File("etc/motd", "x\n")], mutate_toc=m)
    img = Image([layer], fmt="oci", mutate_manifest=annotate([layer]))
    ref = registry.ref("lazy/hostile", "v1")
    push(registry, "lazy/hostile", "v1", img)
    mp, p = lazy(registry, ref, layer, str(tmp_path / "w"), ready=False)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1, err
    assert why in err.decode(), err
    assert not is_mountpoint(mp)


def test_lazy_toc_digest_mismatch_refused(registry, lazy, tmp_path):
    layer = EstargzLayer([File("a", "a\n")])

    def m(man):
        man["layers"][0]["annotations"] = {
            "containerd.io/snapshot/stargz/toc.digest": "sha256:" + "1" * 64}
    img = Image([layer], fmt="oci", mutate_manifest=m)
    push(registry, "lazy/tocdg", "v1", img)
    mp, p = lazy(registry, registry.ref("lazy/tocdg", "v1"), layer, str(tmp_path / "w"),
                 ready=False)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1 and b"TOC digest" in err, err


def read_stats(path: str) -> dict:
    """A server's stats file (docs/imagepull.md "Counters"), {} when absent."""
    try:
        text = open(path).read()
    except FileNotFoundError:
        return {}
    out = dict(line.split(" ", 1) for line in text.splitlines())
    last = out.pop("last_failure", None)
    assert set(out) == {"pid", "demand_bytes", "background_bytes", "demand_fetches",
                        "demand_ns", "refused", "failed_reads"}, text
    assert (last is None) == (out["failed_reads"] == "0"), text
    st = {k: int(v) for k, v in out.items()}
    if last is not None:
        st["last_failure"] = last
    return st


def test_lazy_bad_chunk_never_served(registry, lazy, tmp_path):
    layer = EstargzLayer([File("big", BIG), File("small", "fine\n")],
                         corrupt_chunk=lambda name, i: name == "big" and i == 2)
    img = Image([layer], fmt="oci", mutate_manifest=annotate([layer]))
    push(registry, "lazy/bad", "v1", img)
    w = str(tmp_path / "w")
    mp, p = lazy(registry, registry.ref("lazy/bad", "v1"), layer, w,
                 env={"CELL_PULL_RANGE_RETRIES": "0", "CELL_PULL_LAZY_STATS_MS": "50"})
    assert open(os.path.join(mp, "small"), "rb").read() == b"fine\n"
    with open(os.path.join(mp, "big"), "rb") as f:
        assert f.read(4096) == BIG[:4096]  # chunk 0 is good
        f.seek(2 * 4096 + 10)
        with pytest.raises(OSError) as ei:
            f.read(100)
        assert ei.value.errno == errno.EIO
    # the failed read is in the stats file before the reader saw its EIO
    now = read_stats(os.path.join(w, "lazy", "sha256-" + layer.hex, "stats"))
    assert now["failed_reads"] >= 1, now
    assert now["last_failure"] == (f"layer sha256:{layer.hex[:12]}...: chunk at "
                                   f"{now['last_failure'].split('chunk at ')[1]}"), now
    assert now["last_failure"].endswith(": digest mismatch"), now
    # the counters file the agent's metrics read: written while it serves
    stats_path = os.path.join(w, "lazy", "sha256-" + layer.hex, "stats")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = read_stats(stats_path)
        if st.get("refused", 0) >= 1:
            break
        time.sleep(0.05)
    assert st, os.listdir(os.path.dirname(stats_path))
    assert st["refused"] >= 1 and st["demand_bytes"] > 0 and st["demand_fetches"] >= 1, st
    assert st["pid"] == p.pid
    err = stop(p, mp)
    assert "digest mismatch" in err or "not served" in err, err[-2000:]
    final = read_stats(stats_path)  # and at its exit
    assert final["refused"] == st["refused"] and final["demand_bytes"] >= st["demand_bytes"]
    chunks = os.listdir(os.path.join(w, "lazy", "sha256-" + layer.hex, "chunks"))
    bad = next(t for t in layer.toc["entries"]
               if t.get("chunkOffset") == 2 * 4096)["chunkDigest"].replace(":", "-")
    assert bad not in chunks


def test_lazy_stalled_registry_is_eio_in_bounded_time(registry, make_proxy, lazy, tmp_path):
    layer = EstargzLayer([File("big", BIG)])
    img = Image([layer], fmt="oci", mutate_manifest=annotate([layer]))
    push(registry, "lazy/stall", "v1", img)
    proxy = make_proxy(registry)
    ref = f"{proxy.host}/lazy/stall:v1"
    mp, p = lazy(registry, ref, layer, str(tmp_path / "w"), host=proxy.host,
                 env={"CELL_PULL_RANGE_TIMEOUT_MS": "1000", "CELL_PULL_RANGE_RETRIES": "1",
                      "CELL_PULL_RETRY_BASE_MS": "50"})
    proxy.delay("/blobs/", 30)
    t0 = time.monotonic()
    with pytest.raises(OSError) as ei:
        open(os.path.join(mp, "big"), "rb").read()
    took = time.monotonic() - t0
    assert ei.value.errno == errno.EIO
    assert took < 8, took
    # the failure, counted and said in one line for the unit's status
    st = read_stats(os.path.join(str(tmp_path / "w"), "lazy", "sha256-" + layer.hex, "stats"))
    assert st["failed_reads"] >= 1, st
    assert st["last_failure"] == (f"range read of layer sha256:{layer.hex[:12]}... from "
                                  f"{proxy.host}: timed out after 2 tries"), st
    proxy.clear()
    stop(p, mp)


def test_lazy_range_read_renews_token_on_401(make_registry, token_server, make_proxy,
                                            lazy, tmp_path):
    reg = make_registry(token=token_server)
    layer = EstargzLayer([File("big", BIG)])
    img = Image([layer], fmt="oci", mutate_manifest=annotate([layer]))
    push(reg, "lazy/auth", "v1", img)
    proxy = make_proxy(reg)
    ref = f"{proxy.host}/lazy/auth:v1"
    user, pw = next(iter(token_server.users.items()))
    mp, p = lazy(reg, ref, layer, str(tmp_path / "w"), host=proxy.host,
                 env={"CELL_PULL_RANGE_RETRIES": "0"},
                 extra=("--username", user, "--password", pw))
    # the mount is ready, so a token is held; the next range read is 401'd
    before = token_server.count()
    challenge = (f'Bearer realm="{token_server.realm}",service="{token_server.service}",'
                 f'scope="repository:lazy/auth:pull"')
    proxy.status("/blobs/", 401, times=1, headers={"WWW-Authenticate": challenge})
    assert open(os.path.join(mp, "big"), "rb").read() == BIG
    assert token_server.count() > before
    stop(p, mp)


@pytest.fixture
def containerd(tmp_path):
    """A throwaway containerd for ctr-remote (tests/pylib/containerd.py)."""
    with Containerd(str(tmp_path / "containerd")) as ctr:
        yield ctr


def test_lazy_ctr_remote_converted_image_equals_full_pull(registry, pull, lazy, containerd,
                                                          tmp_path, mounts):
    """ctr-remote's eStargz (real tool, chunked, its own TOC and landmark)
    mounted lazily, layer by layer under overlayfs, equals the full pull."""
    from images import busybox_layer
    img = Image([busybox_layer(),
                 Layer([Dir("data"), File("data/big", BIG * 8), File("gone", "x"),
                        File("etc/motd", "one\n")]),
                 Layer([Whiteout("gone"), Opaque("data"), File("data/c", "c\n"),
                        File("etc/two", "two\n"), Hardlink("etc/hard", "etc/two")])])
    push(registry, "lazy/orig", "v1", img)
    src, dst = registry.ref("lazy/orig", "v1"), registry.ref("lazy/esgz", "v1")
    man = convert_estargz(containerd, registry, "lazy/orig", "v1", "lazy/esgz",
                          chunk_size=65536)
    layers = man["layers"]
    assert all("containerd.io/snapshot/stargz/toc.digest" in l.get("annotations", {})
               for l in layers), layers
    flat = str(tmp_path / "flat")
    rc, _, err = pull(registry, src, flat, str(tmp_path / "w0"))
    assert rc == 0, err
    lowers = []
    for i, l in enumerate(layers):
        class L:
            digest = l["digest"]
        mp, p = lazy(registry, dst, L, str(tmp_path / f"w{i + 1}"))
        lowers.insert(0, (mp, p))
    root = tmp_path / "root"
    root.mkdir()
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    "lowerdir=" + ":".join(mp for mp, _ in lowers), str(root)], check=True)
    mounts.append(str(root))
    try:
        diff = diff_listings(tree_listing(flat), tree_listing(str(root)))
        assert not diff, "\n".join(diff)
        assert contents(flat) == contents(str(root))
    finally:
        subprocess.run(["umount", str(root)], check=True)
    for mp, p in lowers:
        stop(p, mp)
