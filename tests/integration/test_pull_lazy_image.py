# SPDX-License-Identifier: Apache-2.0
"""Whole images pulled lazily: `cell-pull --mount DIR` serves an image's
eStargz layers through FUSE, each by a server process of its own under
the cache (lazy/<algo>-<hex>/), and pulls the rest as before; the overlay
mixes both (docs/imagepull.md "Lazy pulling"). The tree equals the full
pull's; a layer whose blob has fully arrived becomes an ordinary cached
layer (the next pull uses no FUSE); a server outlives the pull that
started it and the next pull adopts it; the gc leaves nothing (no mount,
no process, no lazy directory) once no overlay uses a layer."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import is_mountpoint
from estargz import EstargzLayer, annotate
from images import (Dir, File, Hardlink, Image, Layer, Opaque, Symlink, Whiteout,
                    diff_listings, push, tree_listing, _prng)

BIG = _prng(b"lazy-image-big", 60_000)


def servers(workdir: str) -> list:
    """Pids of lazy layer servers of this cache."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"--lazy-layer" in args and os.fsencode(workdir) in args:
            out.append(int(pid))
    return out


def lazy_mounts(workdir: str) -> list:
    with open("/proc/self/mountinfo") as f:
        return [l.split()[4] for l in f if os.path.join(workdir, "lazy") in l.split()[4]]


def overlay_lowers(mp: str) -> str:
    with open("/proc/self/mountinfo") as f:
        for l in f:
            if l.split()[4] == os.path.realpath(mp):
                return l.split(" - ")[1]
    return ""


def contents(root: str) -> dict:
    import hashlib
    out = {}
    for d, _, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                out[os.path.relpath(p, root)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


@pytest.fixture
def caches(run_pull, mounts):
    """Cache dirs to gc at teardown, so no server or FUSE mount outlives a
    test (servers left after the gc are killed, and the test fails)."""
    made = []
    yield made
    for mp in reversed(mounts):
        subprocess.run(["umount", "-l", mp], capture_output=True)
    left = []
    for w in made:
        run_pull("--gc", "--workdir", w)
        for pid in servers(w):
            left.append(pid)
            os.kill(pid, signal.SIGKILL)
        for m in lazy_mounts(w):
            subprocess.run(["umount", "-l", m], capture_output=True)
    assert not left, f"lazy servers left after gc: {left}"


def image():
    """Whiteouts across layers (a lazy layer hides a full one's files and
    a full layer above hides a lazy one's), an opaque directory, hard
    links, chunked files, implicit parents, xattrs."""
    base = Layer([Dir("data"), File("data/a", "a\n"), File("gone", "x"),
                  File("etc/motd", "one\n"), File("keep", "k\n")])
    lazy = EstargzLayer([
        Dir("etc"), File("etc/motd", "two\n"), Hardlink("etc/hard", "etc/motd"),
        Dir("data", mode=0o750, uid=7, gid=8), Opaque("data"), File("data/c", "c\n"),
        File("data/big", BIG, mode=0o600, uid=7), Hardlink("data/big2", "data/big"),
        Symlink("etc/link", "/etc/motd"), Whiteout("gone"),
        File("attr", "x", pax={"SCHILY.xattr.user.note": "hello"}),
        File("deep/er/file", "implicit parents\n"), File("soon-gone", "y\n"),
    ], prefetch=4)
    top = Layer([Whiteout("soon-gone"), File("etc/top", "top\n")])
    layers = [base, lazy, top]
    return Image(layers, fmt="oci", mutate_manifest=annotate(layers)), lazy


def mount(run_pull, registry, ref, mp, workdir, *extra, env=None):
    rc, out, err = run_pull("--image", ref, "--mount", mp, "--workdir", workdir,
                            "--insecure-registry", registry.host, "-v", *extra,
                            env=env)
    assert rc == 0, err[-3000:]
    return err


def test_whole_image_lazy_mount_equals_full_pull(registry, run_pull, mounts, caches,
                                                 tmp_path):
    img, lazy = image()
    ref = registry.ref("lazyimg/rich", "v1")
    push(registry, "lazyimg/rich", "v1", img)
    full_w, lazy_w = str(tmp_path / "wf"), str(tmp_path / "wl")
    caches += [full_w, lazy_w]
    full, lz = str(tmp_path / "full"), str(tmp_path / "lazy")
    mounts += [full, lz]
    mount(run_pull, registry, ref, full, full_w, "--lazy", "off")
    mark = registry.mark()
    err = mount(run_pull, registry, ref, lz, lazy_w,
                env={"CELL_PULL_LAZY_BACKGROUND": "0"})
    assert "1 lazy" in err, err[-2000:]
    name = "sha256-" + lazy.hex
    fuse = os.path.join(lazy_w, "lazy", name, "mnt")
    assert is_mountpoint(fuse)
    assert f"lazy/{name}/mnt" in overlay_lowers(lz)
    # the lazy layer's blob was never fetched whole: only ranges
    gets = registry.blob_gets(lazy.digest, since=mark)
    assert gets and all(g.ranged for g in gets), [str(g) for g in gets]
    assert not os.path.exists(os.path.join(lazy_w, "layers", "sha256", lazy.diff_hex))
    diff = diff_listings(tree_listing(full), tree_listing(lz))
    assert not diff, "\n".join(diff)
    assert contents(full) == contents(lz)
    assert os.stat(os.path.join(lz, "data/big")).st_ino == \
        os.stat(os.path.join(lz, "data/big2")).st_ino
    assert not os.path.lexists(os.path.join(lz, "soon-gone"))
    assert not os.path.lexists(os.path.join(lz, "data/a"))
    assert os.getxattr(os.path.join(lz, "attr"), "user.note") == b"hello"

    # the pod ends, the gc runs: nothing of the lazy layer is left
    subprocess.run(["umount", lz], check=True)
    rc, out, err = run_pull("--gc", "--workdir", lazy_w)
    assert rc == 0, err
    assert not servers(lazy_w)
    assert not lazy_mounts(lazy_w)
    assert os.listdir(os.path.join(lazy_w, "lazy")) == []


def test_lazy_layer_promoted_next_pull_uses_no_fuse(registry, run_pull, mounts, caches,
                                                   tmp_path):
    img, lazy = image()
    ref = registry.ref("lazyimg/promote", "v1")
    push(registry, "lazyimg/promote", "v1", img)
    w, wf = str(tmp_path / "w"), str(tmp_path / "wf")
    caches += [w, wf]
    m1, m2, full = (str(tmp_path / n) for n in ("m1", "m2", "full"))
    mounts += [m1, m2, full]
    mount(run_pull, registry, ref, full, wf, "--lazy", "off")
    err = mount(run_pull, registry, ref, m1, w)
    assert "1 lazy" in err, err[-2000:]
    layer = os.path.join(w, "layers", "sha256", lazy.diff_hex)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not os.path.isdir(layer):
        time.sleep(0.1)
    log = open(os.path.join(w, "lazy", "sha256-" + lazy.hex, "log")).read()
    assert os.path.isdir(layer), log[-3000:]
    assert "promoted" in log, log[-3000:]
    # the promoted layer is what a full pull unpacks, and its blob is cached
    want = os.path.join(wf, "layers", "sha256", lazy.diff_hex)
    diff = diff_listings(tree_listing(want), tree_listing(layer))
    assert not diff, "\n".join(diff)
    assert os.path.isfile(os.path.join(w, "blobs", "sha256", lazy.hex))
    # the next pull: no FUSE in its overlay, the first still served
    err = mount(run_pull, registry, ref, m2, w)
    assert "0 lazy" in err, err[-2000:]
    assert "lazy/" not in overlay_lowers(m2)
    assert "lazy/" in overlay_lowers(m1)
    diff = diff_listings(tree_listing(full), tree_listing(m2))
    assert not diff, "\n".join(diff)
    assert contents(m1) == contents(m2) == contents(full)
    # a gc while m1 still uses the FUSE mount keeps it
    rc, _, err = run_pull("--gc", "--workdir", w)
    assert rc == 0, err
    assert servers(w) and lazy_mounts(w)
    assert contents(m1) == contents(full)
    # once m1 is gone the gc removes the server, its mount, its chunks;
    # the promoted layer stays (the image record names it)
    subprocess.run(["umount", m1], check=True)
    rc, _, err = run_pull("--gc", "--workdir", w)
    assert rc == 0, err
    assert not servers(w) and not lazy_mounts(w)
    assert os.listdir(os.path.join(w, "lazy")) == []
    assert os.path.isdir(layer)
    # the cache's fast path serves the image now (no registry, no FUSE)
    subprocess.run(["umount", m2], check=True)
    from conftest import CELL_BUILD
    r = subprocess.run([os.path.join(CELL_BUILD, "bin", "cell-pull-cached"), "--image", ref,
                        "--mount", m2, "--workdir", w, "--progress", "json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and '"cached":true' in r.stdout, r.stdout + r.stderr


def test_lazy_server_outlives_pull_and_is_adopted(registry, run_pull, mounts, caches,
                                                 tmp_path):
    """The pull that started a server is gone (as after an agent kill -9):
    the next pull of the image finds the server by its lock and mounts
    through it, starting no second one."""
    img, lazy = image()
    ref = registry.ref("lazyimg/adopt", "v1")
    push(registry, "lazyimg/adopt", "v1", img)
    w = str(tmp_path / "w")
    caches.append(w)
    m1, m2 = str(tmp_path / "m1"), str(tmp_path / "m2")
    mounts += [m1, m2]
    env = {"CELL_PULL_LAZY_BACKGROUND": "0"}
    mount(run_pull, registry, ref, m1, w, env=env)
    (pid,) = servers(w)
    d = os.path.join(w, "lazy", "sha256-" + lazy.hex)
    assert open(os.path.join(d, "pid")).read().strip() == str(pid)
    assert os.path.exists(os.path.join(d, "ready"))
    err = mount(run_pull, registry, ref, m2, w, env=env)
    assert "adopting" in err, err[-2000:]
    assert servers(w) == [pid]
    assert contents(m1) == contents(m2)
    subprocess.run(["umount", m1], check=True)
    subprocess.run(["umount", m2], check=True)


def test_lazy_server_failure_falls_back_to_full_pull(registry, run_pull, mounts, caches,
                                                    tmp_path):
    """A layer whose server cannot serve (here: a TOC digest that does not
    match) is pulled whole, with a warning; the image still mounts."""
    img, lazy = image()

    def bad_toc(man):
        annotate(img_layers)(man)
        man["layers"][1]["annotations"][
            "containerd.io/snapshot/stargz/toc.digest"] = "sha256:" + "1" * 64
    img_layers = img.layers
    img = Image(img_layers, fmt="oci", mutate_manifest=bad_toc)
    ref = registry.ref("lazyimg/bad", "v1")
    push(registry, "lazyimg/bad", "v1", img)
    w = str(tmp_path / "w")
    caches.append(w)
    mp = str(tmp_path / "m")
    mounts.append(mp)
    err = mount(run_pull, registry, ref, mp, w)
    assert "TOC digest" in err and "pulling it" in err, err[-2000:]
    assert "0 lazy" in err, err[-2000:]
    assert os.path.isdir(os.path.join(w, "layers", "sha256", lazy.diff_hex))
    assert open(os.path.join(mp, "etc/motd")).read() == "two\n"
    assert not servers(w)


def test_whiteout_and_entry_of_one_name_match_the_tar_core(registry, run_pull, mounts,
                                                          caches, tmp_path):
    """A layer that whites a name out and then writes it again (a directory:
    opaque, as the tar core makes it; a file: replaced) shows through FUSE
    what the full pull shows."""
    base = Layer([Dir("d"), File("d/old", "old\n"), File("f", "old\n")])
    esgz = EstargzLayer([Whiteout("d"), Dir("d"), File("d/new", "new\n"),
                         Whiteout("f"), File("f", "new\n")])
    layers = [base, esgz]
    push(registry, "lazyimg/wh", "v1",
         Image(layers, fmt="oci", mutate_manifest=annotate(layers)))
    ref = registry.ref("lazyimg/wh", "v1")
    wf, wl = str(tmp_path / "wf"), str(tmp_path / "wl")
    caches += [wf, wl]
    full, lz = str(tmp_path / "full"), str(tmp_path / "lazy")
    mounts += [full, lz]
    mount(run_pull, registry, ref, full, wf, "--lazy", "off")
    err = mount(run_pull, registry, ref, lz, wl, env={"CELL_PULL_LAZY_BACKGROUND": "0"})
    assert "1 lazy" in err, err[-2000:]
    assert sorted(os.listdir(os.path.join(lz, "d"))) == ["new"]
    assert open(os.path.join(lz, "f")).read() == "new\n"
    diff = diff_listings(tree_listing(full), tree_listing(lz))
    assert not diff, "\n".join(diff)
    assert contents(full) == contents(lz)
    subprocess.run(["umount", lz], check=True)


def test_reads_racing_the_background_fetch_fetch_each_byte_once(registry, make_proxy,
                                                                run_pull, mounts, caches,
                                                                tmp_path):
    """Reads while the background fetch runs (a slow link): what a read
    fetched goes into the spool and the background does not ask for it
    again, a read of a member the background is fetching waits for it;
    the layer is promoted with about one blob's bytes fetched in all."""
    files = [File(f"d/{i:02d}", _prng(b"race%d" % i, 250_000 + 7_000 * i))
             for i in range(40)]  # 12 MB: three background spans
    esgz = EstargzLayer([Dir("d"), *files], chunk_size=65536)
    push(registry, "lazyimg/race", "v1",
         Image([esgz], fmt="oci", mutate_manifest=annotate([esgz])))
    proxy = make_proxy(registry)
    proxy.rate = 8e6
    ref = f"{proxy.host}/lazyimg/race:v1"
    w = str(tmp_path / "w")
    caches.append(w)
    mp = str(tmp_path / "m")
    mounts.append(mp)
    rc, _, err = run_pull("--image", ref, "--mount", mp, "--workdir", w, "-v")
    assert rc == 0, err[-2000:]
    for f in reversed(files):  # against the background's order
        assert open(os.path.join(mp, f.name), "rb").read() == f.content
    layer = os.path.join(w, "layers", "sha256", esgz.diff_hex)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not os.path.isdir(layer):
        time.sleep(0.1)
    assert os.path.isdir(layer)
    got = sum(r.sent for r in proxy.requests(esgz.digest))
    assert got <= esgz.size * 1.05 + 4096, (got, esgz.size)
    subprocess.run(["umount", mp], check=True)


def test_killed_server_is_replaced_by_the_next_pull(registry, run_pull, mounts, caches,
                                                   tmp_path):
    """A server killed -9 leaves its dead FUSE mount and its marks; the
    next pull detaches the mount, starts a new server and mounts through
    it; the gc then leaves nothing."""
    img, lazy = image()
    ref = registry.ref("lazyimg/killed", "v1")
    push(registry, "lazyimg/killed", "v1", img)
    w = str(tmp_path / "w")
    caches.append(w)
    m1, m2 = str(tmp_path / "m1"), str(tmp_path / "m2")
    mounts += [m1, m2]
    env = {"CELL_PULL_LAZY_BACKGROUND": "0"}
    mount(run_pull, registry, ref, m1, w, env=env)
    (old,) = servers(w)
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and servers(w):
        time.sleep(0.05)
    assert not servers(w)
    with pytest.raises(OSError):
        open(os.path.join(m1, "etc/motd")).read()  # ENOTCONN through the overlay
    subprocess.run(["umount", m1], check=True)
    err = mount(run_pull, registry, ref, m2, w, env=env)
    assert "1 lazy" in err and "adopting" not in err, err[-2000:]
    (new,) = servers(w)
    assert new != old
    assert open(os.path.join(m2, "etc/motd")).read() == "two\n"
    subprocess.run(["umount", m2], check=True)
    rc, _, err = run_pull("--gc", "--workdir", w)
    assert rc == 0, err
    assert not servers(w) and not lazy_mounts(w)
    assert os.listdir(os.path.join(w, "lazy")) == []
