# SPDX-License-Identifier: Apache-2.0
"""The shared image cache (docs/imagepull.md, "The shared cache").

A cluster job fills a directory with `cell-pull --populate`; cells read it
read-only with `--shared-cache` (NFS on a real cell; here a read-only bind
mount of the populated directory stands for it). Layers found there whole
are used in place as overlay lower directories; everything else comes from
the registry as before. The registry's access log proves which path ran.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import time

import pytest

from conftest import DEFAULT_TIMEOUT, is_mountpoint
from images import (Dir, File, Hardlink, Image, Layer, Opaque, Symlink, Whiteout,
                    busybox_layer, push, random_layer)


def rich_image():
    """Layers that exercise the unpacker's fidelity: whiteouts, an opaque
    directory, links, modes, owners."""
    return Image([
        busybox_layer(),
        Layer([Dir("etc"), File("etc/motd", "one\n"), Dir("data", mode=0o750, uid=7),
               File("data/a", "a\n", mode=0o600, uid=7), File("data/b", "b\n"),
               File("gone", "x"), Symlink("etc/link", "/etc/motd")]),
        Layer([Whiteout("gone"), Opaque("data"), File("data/c", "c\n", mode=0o4755),
               File("etc/motd", "two\n"), Hardlink("etc/hard", "etc/motd")]),
    ], config={"Cmd": ["/bin/sh"]})


def tree(root: str) -> dict:
    """What a rootfs holds: type, mode, owner, content or link target."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            what = None
            if stat.S_ISREG(st.st_mode):
                what = hashlib.sha256(open(p, "rb").read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                what = os.readlink(p)
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_uid, st.st_gid, what)
    return out


@pytest.fixture
def share(tmp_path):
    """populate(dir) → the directory as a cell sees it: a read-only bind
    mount (NFS's stand-in), unmounted at the end."""
    made = []

    def ro(src: str) -> str:
        dst = str(tmp_path / f"ro{len(made)}")
        os.mkdir(dst)
        subprocess.run(["mount", "--bind", src, dst], check=True)
        made.append(dst)
        subprocess.run(["mount", "-o", "remount,bind,ro", dst], check=True)
        return dst
    yield ro
    for d in reversed(made):
        subprocess.run(["umount", "-l", d], capture_output=True)


def populate(run_pull, reg, dest, *refs, env=None):
    args = ["--populate", dest, "--insecure-registry", reg.host]
    for r in refs:
        args += ["--image", r]
    return run_pull(*args, env=env)


def populated(run_pull, reg, tmp_path, img):
    """img pushed as t/shared:v1 and populated into tmp_path/pop:
    (its digest, its reference, the populated directory)."""
    dig = push(reg, "t/shared", "v1", img)
    ref = reg.ref("t/shared", "v1")
    pop = str(tmp_path / "pop")
    rc, out, err = populate(run_pull, reg, pop, ref)
    assert rc == 0, err
    return dig, ref, pop


def mount_pull(run_pull, reg, ref, mp, workdir, shared=None, env=None):
    os.makedirs(mp, exist_ok=True)
    extra = ["--shared-cache", shared] if shared else []
    return run_pull("--image", ref, "--mount", mp, "--workdir", workdir,
                    "--insecure-registry", reg.host, "--progress", "json", *extra, env=env)


def warnings(out: str):
    return [json.loads(line)["message"] for line in out.splitlines()
            if line.startswith('{"event":"warning"')]


def layer_dirs(workdir):
    d = os.path.join(workdir, "layers", "sha256")
    return os.listdir(d) if os.path.isdir(d) else []


def test_a_populated_image_runs_from_the_share_without_blobs(
        registry, run_pull, share, tmp_path, mounts):
    img = rich_image()
    push(registry, "t/shared", "v1", img)
    ref = registry.ref("t/shared", "v1")
    pop = str(tmp_path / "pop")
    rc, out, err = populate(run_pull, registry, pop, ref)
    assert rc == 0, err
    ro = share(pop)
    # A cold pull without the share, for comparison.
    cold = str(tmp_path / "cold")
    mounts.append(cold)
    assert mount_pull(run_pull, registry, ref, cold, str(tmp_path / "w0"))[0] == 0
    mark = registry.mark()
    mp = str(tmp_path / "mp")
    mounts.append(mp)
    work = str(tmp_path / "w1")
    rc, out, err = mount_pull(run_pull, registry, ref, mp, work, ro)
    assert rc == 0, err
    assert registry.blob_gets(since=mark) == []
    assert warnings(out) == []
    # In place: the local cache unpacked nothing, the mount names the
    # share's layers by descriptor.
    assert layer_dirs(work) == []
    assert tree(mp) == tree(cold)
    assert open(os.path.join(mp, "etc/motd")).read() == "two\n"
    assert not os.path.exists(os.path.join(mp, "data/a"))
    # Writes go to the cell's own upper layer; the share is untouched.
    open(os.path.join(mp, "etc/motd"), "w").write("mine\n")
    assert b"mine" not in subprocess.run(["grep", "-r", "mine", pop],
                                         capture_output=True).stdout


def test_a_flattened_rootfs_from_the_share(registry, run_pull, share, tmp_path):
    push(registry, "t/shared", "v1", rich_image())
    ref = registry.ref("t/shared", "v1")
    pop = str(tmp_path / "pop")
    assert populate(run_pull, registry, pop, ref)[0] == 0
    ro = share(pop)
    cold = str(tmp_path / "cold")
    assert run_pull("--image", ref, "--extract-to", cold, "--workdir", str(tmp_path / "w0"),
                    "--insecure-registry", registry.host)[0] == 0
    mark = registry.mark()
    flat = str(tmp_path / "flat")
    rc, out, err = run_pull("--image", ref, "--extract-to", flat, "--workdir",
                            str(tmp_path / "w1"), "--insecure-registry", registry.host,
                            "--shared-cache", ro)
    assert rc == 0, err
    assert registry.blob_gets(since=mark) == []
    assert tree(flat) == tree(cold)


def test_a_mixed_image_pulls_only_what_the_share_lacks(
        registry, run_pull, share, tmp_path, mounts):
    base = [busybox_layer(), Layer([Dir("etc"), File("etc/motd", "base\n")])]
    push(registry, "t/base", "v1", Image(base, config={"Cmd": ["/bin/sh"]}))
    top = Layer([File("etc/app", "app\n")])
    push(registry, "t/app", "v1", Image(base + [top], config={"Cmd": ["/bin/sh"]}))
    pop = str(tmp_path / "pop")
    assert populate(run_pull, registry, pop, registry.ref("t/base", "v1"))[0] == 0
    ro = share(pop)
    mark = registry.mark()
    mp = str(tmp_path / "mp")
    mounts.append(mp)
    work = str(tmp_path / "w")
    rc, out, err = mount_pull(run_pull, registry, registry.ref("t/app", "v1"), mp, work, ro)
    assert rc == 0, err
    got = registry.blob_gets(since=mark)
    # The config and the top layer: the two shared layers came in place.
    assert {r.blob_digest for r in got} >= {"sha256:" + top.hex}
    assert "sha256:" + base[0].hex not in {r.blob_digest for r in got}
    assert "sha256:" + base[1].hex not in {r.blob_digest for r in got}
    assert layer_dirs(work) == [top.diff_hex]
    assert any("not there" in w for w in warnings(out)), out
    assert open(os.path.join(mp, "etc/app")).read() == "app\n"
    assert open(os.path.join(mp, "etc/motd")).read() == "base\n"


def test_two_populators_at_once(registry, run_pull, start_pull, share, tmp_path, mounts):
    imgs = [rich_image(), Image([busybox_layer(), random_layer(3 << 20)],
                                config={"Cmd": ["/bin/sh"]})]
    refs = []
    for i, img in enumerate(imgs):
        push(registry, f"t/pop{i}", "v1", img)
        refs.append(registry.ref(f"t/pop{i}", "v1"))
    pop = str(tmp_path / "pop")
    args = ["--populate", pop, "--insecure-registry", registry.host]
    ps = [start_pull(*args, "--image", refs[i % 2], "--image", refs[(i + 1) % 2])
          for i in range(2)]
    for p in ps:
        out, err = p.communicate(timeout=DEFAULT_TIMEOUT)
        assert p.returncode == 0, err
    assert os.listdir(os.path.join(pop, "tmp")) == []
    for hexd in layer_dirs(pop):
        rec = json.load(open(os.path.join(pop, "layers/sha256", hexd, "complete")))
        assert rec["diff_id"] == "sha256:" + hexd
    ro = share(pop)
    mark = registry.mark()
    for i, ref in enumerate(refs):
        mp = str(tmp_path / f"mp{i}")
        mounts.append(mp)
        rc, out, err = mount_pull(run_pull, registry, ref, mp, str(tmp_path / f"w{i}"), ro)
        assert rc == 0, err
        assert warnings(out) == []
    assert registry.blob_gets(since=mark) == []


def test_a_killed_populator_leaves_nothing_a_cell_uses(
        registry, run_pull, start_pull, share, tmp_path, mounts):
    big = random_layer(8 << 20)
    push(registry, "t/big", "v1", Image([busybox_layer(), big], config={"Cmd": ["/bin/sh"]}))
    ref = registry.ref("t/big", "v1")
    pop = str(tmp_path / "pop")
    p = start_pull("--populate", pop, "--image", ref, "--insecure-registry", registry.host,
                   "--parallel", "1", env={"CELL_PULL_MAX_RECV_SPEED": "1000000"})
    tmpd = os.path.join(pop, "tmp")
    end = time.monotonic() + DEFAULT_TIMEOUT
    while time.monotonic() < end and not any(
            n.startswith("layer-" + big.diff_hex) for n in
            (os.listdir(tmpd) if os.path.isdir(tmpd) else [])):
        assert p.poll() is None, p.communicate()
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    half = [n for n in os.listdir(tmpd) if n.startswith("layer-" + big.diff_hex)]
    assert half
    # A copy that lost its record (an rsync, a crash of a hand-made copy):
    # the same half-written tree where a whole one would be.
    dst = os.path.join(pop, "layers/sha256", big.diff_hex)
    subprocess.run(["cp", "-a", os.path.join(tmpd, half[0]), dst], check=True)
    assert not os.path.exists(os.path.join(dst, "complete"))
    ro = share(pop)
    mp = str(tmp_path / "mp")
    mounts.append(mp)
    work = str(tmp_path / "w")
    rc, out, err = mount_pull(run_pull, registry, ref, mp, work, ro)
    assert rc == 0, err
    assert big.diff_hex in layer_dirs(work)  # pulled, not taken from the share
    assert any(big.diff_hex in w and "complete" in w for w in warnings(out)), out
    assert os.path.getsize(os.path.join(mp, "random.bin")) == 8 << 20
    # gc removes the half-written entries, and keeps nothing it should not.
    rc, out, err = run_pull("--gc", "--workdir", pop)
    assert rc == 0, err
    assert os.listdir(tmpd) == []
    assert not os.path.exists(dst)


def test_a_damaged_completion_record_is_ignored(registry, run_pull, share, tmp_path, mounts):
    img = Image([busybox_layer(), Layer([Dir("etc"), File("etc/motd", "x\n")])],
                config={"Cmd": ["/bin/sh"]})
    _, ref, pop = populated(run_pull, registry, tmp_path, img)
    bb, top = img.layers[0], img.layers[1]
    # One record names another layer, one is not JSON at all.
    rec = os.path.join(pop, "layers/sha256", bb.diff_hex, "complete")
    json.dump({"version": 1, "diff_id": "sha256:" + top.diff_hex}, open(rec, "w"))
    open(os.path.join(pop, "layers/sha256", top.diff_hex, "complete"), "w").write("{garbage")
    ro = share(pop)
    mark = registry.mark()
    mp = str(tmp_path / "mp")
    mounts.append(mp)
    work = str(tmp_path / "w")
    rc, out, err = mount_pull(run_pull, registry, ref, mp, work, ro)
    assert rc == 0, err
    ws = warnings(out)
    assert any("names sha256:" + top.diff_hex in w for w in ws), ws
    assert any(top.diff_hex in w and "completion record" in w for w in ws), ws
    assert sorted(layer_dirs(work)) == sorted([bb.diff_hex, top.diff_hex])
    # Unpacked again here, from the share's blobs (checked by their
    # diff-ids on the way), not from the registry.
    assert registry.blob_gets(since=mark) == []
    assert os.path.exists(os.path.join(mp, "bin/busybox"))


def test_hostile_symlinks_in_the_share_are_not_followed(
        registry, run_pull, share, tmp_path, mounts):
    img = Image([busybox_layer(), Layer([Dir("etc"), File("etc/motd", "x\n")])],
                config={"Cmd": ["/bin/sh"]})
    _, ref, pop = populated(run_pull, registry, tmp_path, img)
    bb, top = img.layers[0], img.layers[1]
    secret = tmp_path / "host-secret"
    secret.mkdir()
    (secret / "key").write_text("secret\n")
    # The layer's diff/ a link to a host directory: a cell that followed
    # it would show the host's files in the container.
    d = os.path.join(pop, "layers/sha256", top.diff_hex)
    subprocess.run(["rm", "-rf", os.path.join(d, "diff")], check=True)
    os.symlink(str(secret), os.path.join(d, "diff"))
    # The whole layer entry a link to a complete entry elsewhere.
    lb = os.path.join(pop, "layers/sha256", bb.diff_hex)
    os.rename(lb, str(tmp_path / "elsewhere"))
    os.symlink(str(tmp_path / "elsewhere"), lb)
    ro = share(pop)
    mp = str(tmp_path / "mp")
    mounts.append(mp)
    work = str(tmp_path / "w")
    rc, out, err = mount_pull(run_pull, registry, ref, mp, work, ro)
    assert rc == 0, err
    assert sorted(layer_dirs(work)) == sorted([bb.diff_hex, top.diff_hex])
    assert not os.path.exists(os.path.join(mp, "key"))
    assert sum("symlink" in w for w in warnings(out)) == 2, out


def test_registry_down_uses_the_shared_tag_at_once(registry, run_pull, share, tmp_path, mounts):
    img = Image([busybox_layer(), Layer([Dir("etc"), File("etc/motd", "x\n")])],
                config={"Cmd": ["/bin/sh"]})
    dig, ref, pop = populated(run_pull, registry, tmp_path, img)
    ro = share(pop)
    registry.close()
    # A retry ladder of minutes: a pull that waited it out would not end
    # within the test's timeout.
    slow = {"CELL_PULL_RETRY_BASE_MS": "60000"}
    mp = str(tmp_path / "mp")
    mounts.append(mp)
    rc, out, err = mount_pull(run_pull, registry, ref, mp, str(tmp_path / "w"), ro, env=slow)
    assert rc == 0, err
    ws = warnings(out)
    assert len(ws) == 1 and "registry unreachable" in ws[0] and dig in ws[0], ws
    assert open(os.path.join(mp, "etc/motd")).read() == "x\n"
    # A tag the share does not record still fails (and says why).
    mp2 = str(tmp_path / "mp2")
    rc, out, err = mount_pull(run_pull, registry, registry.ref("t/shared", "v2"), mp2,
                              str(tmp_path / "w2"), ro,
                              env={"CELL_PULL_RETRY_BASE_MS": "1"})
    assert rc == 1 and "connect" in err.lower(), err
    assert not is_mountpoint(mp2)


def test_an_unpopulated_share_is_a_warning(registry, run_pull, tmp_path, mounts):
    push(registry, "t/shared", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    empty = tmp_path / "nfs"
    empty.mkdir()  # what a failed NFS mount leaves
    mp = str(tmp_path / "mp")
    mounts.append(mp)
    rc, out, err = mount_pull(run_pull, registry, registry.ref("t/shared", "v1"), mp,
                              str(tmp_path / "w"), str(empty))
    assert rc == 0, err
    assert any("not populated" in w for w in warnings(out)), out


def test_the_example_cronjob_populates_from_its_configmap(registry, cell_pull, tmp_path):
    """examples/image-cache-cronjob.yaml: its script, run as the job would,
    with its ConfigMap's list pointed at the test registry."""
    import yaml
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    docs = list(yaml.safe_load_all(open(os.path.join(root, "examples",
                                                     "image-cache-cronjob.yaml"))))
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    job = next(d for d in docs if d["kind"] == "CronJob")
    ctr = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert {m["mountPath"] for m in ctr["volumeMounts"]} >= {"/cache", "/config"}
    refs = [line for line in cm["data"]["images"].splitlines() if line.strip()]
    for i, _ in enumerate(refs):
        push(registry, f"t/ex{i}", "v1", Image([busybox_layer(), Layer([File(f"f{i}", "x")])],
                                               config={"Cmd": ["/bin/sh"]}))
    config = tmp_path / "config"
    config.mkdir()
    (config / "images").write_text("# pods' images\n\n" + "".join(
        registry.ref(f"t/ex{i}", "v1") + "\n" for i in range(len(refs))))
    cache = tmp_path / "cache"
    script = ctr["args"][0].replace("/usr/local/bin/cell-pull",
                                    f"{cell_pull} --insecure-registry {registry.host}")
    script = script.replace("/cache", str(cache)).replace("/config", str(config))
    p = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True,
                       timeout=DEFAULT_TIMEOUT)
    assert p.returncode == 0, p.stderr
    for i in range(len(refs)):
        assert registry.ref(f"t/ex{i}", "v1") in p.stdout
    assert (cache / SHARE_MARKER).exists()
    assert len(os.listdir(cache / "tags")) == len(refs)


SHARE_MARKER = "cell-shared-cache"


def test_a_share_that_lost_overlay_metadata_is_not_used(
        registry, run_pull, share, tmp_path, mounts):
    """NFS keeps no trusted.* xattrs: a layer whose opaque directory lost
    its mark would show lower layers' files through it. The populator
    records a probe; the cell checks it and pulls such a layer itself."""
    img = rich_image()
    _, ref, pop = populated(run_pull, registry, tmp_path, img)
    top = img.layers[2]
    d = os.path.join(pop, "layers/sha256", top.diff_hex)
    rec = json.load(open(os.path.join(d, "complete")))
    assert rec["opaque"] == "data" and rec["whiteout"] == "gone", rec
    os.removexattr(os.path.join(d, "diff", "data"), "trusted.overlay.opaque")
    ro = share(pop)
    cold = str(tmp_path / "cold")
    mounts.append(cold)
    assert mount_pull(run_pull, registry, ref, cold, str(tmp_path / "w0"))[0] == 0
    mp = str(tmp_path / "mp")
    mounts.append(mp)
    work = str(tmp_path / "w1")
    rc, out, err = mount_pull(run_pull, registry, ref, mp, work, ro)
    assert rc == 0, err
    assert any("lost its opaque mark" in w for w in warnings(out)), out
    assert layer_dirs(work) == [top.diff_hex]
    assert not os.path.exists(os.path.join(mp, "data/a"))
    assert tree(mp) == tree(cold)


def test_a_moved_tag_is_seen_through_the_share(registry, run_pull, share, tmp_path, mounts):
    """Tags are resolved at the registry: a share populated before the tag
    moved gives what it still has (the base layer), never the old image."""
    old = Image([busybox_layer(), Layer([Dir("etc"), File("etc/motd", "old\n")])],
                config={"Cmd": ["/bin/sh"]})
    push(registry, "t/moving", "v1", old)
    ref = registry.ref("t/moving", "v1")
    pop = str(tmp_path / "pop")
    assert populate(run_pull, registry, pop, ref)[0] == 0
    ro = share(pop)
    new = Image([busybox_layer(), Layer([Dir("etc"), File("etc/motd", "new\n")])],
                config={"Cmd": ["/bin/sh"]})
    push(registry, "t/moving", "v1", new)
    mp = str(tmp_path / "mp")
    mounts.append(mp)
    work = str(tmp_path / "w")
    rc, out, err = mount_pull(run_pull, registry, ref, mp, work, ro)
    assert rc == 0, err
    assert open(os.path.join(mp, "etc/motd")).read() == "new\n"
    assert layer_dirs(work) == [new.layers[1].diff_hex]


def test_a_silent_registry_uses_the_shared_tag_after_the_connect_timeout(
        registry, run_pull, share, tmp_path, mounts):
    """A registry that answers nothing (its SYNs dropped: a listening
    socket whose accept queue is full, as a blackholed address): the tag is
    asked once, and after the connect timeout (1 s here, by the
    CELL_PULL_CONNECT_TIMEOUT_MS seam) the share's record is used."""
    img = Image([busybox_layer(), Layer([Dir("etc"), File("etc/motd", "silent\n")])],
                config={"Cmd": ["/bin/sh"]})
    dig, ref, pop = populated(run_pull, registry, tmp_path, img)
    ro = share(pop)
    port = registry.port
    registry.close()
    # Linux drops a SYN while the listener's accept queue is full: with a
    # backlog of 0 one connection fills it, and every later connect waits
    # for its SYN-ACK until the client gives up.
    silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        silent.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        silent.bind(("127.0.0.1", port))
        silent.listen(0)
        filler.connect(("127.0.0.1", port))
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.settimeout(0.5)
        with probe, pytest.raises(socket.timeout):
            probe.connect(("127.0.0.1", port))
        # The retry ladder of minutes and the default 10 s connect
        # timeout are both far beyond the bound below: only one try with
        # the 1 s timeout ends in it.
        env = {"CELL_PULL_RETRY_BASE_MS": "60000", "CELL_PULL_CONNECT_TIMEOUT_MS": "1000"}
        mp = str(tmp_path / "mp")
        mounts.append(mp)
        rc, out, err = run_pull("--image", ref, "--mount", mp, "--workdir", str(tmp_path / "w"),
                                "--insecure-registry", registry.host, "--progress", "json",
                                "--shared-cache", ro, env=env, timeout=8)
    finally:
        filler.close()
        silent.close()
    assert rc == 0, err
    ws = warnings(out)
    assert len(ws) == 1 and "registry unreachable" in ws[0] and dig in ws[0], ws
    assert "timed out" in ws[0].lower() or "timeout" in ws[0].lower(), ws
    assert open(os.path.join(mp, "etc/motd")).read() == "silent\n"
