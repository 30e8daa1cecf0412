# SPDX-License-Identifier: Apache-2.0
"""Integration tests for cell-pull: real pulls from a real docker-registry.

Every test pushes images made by tests/pylib/images.py to Debian's
docker-registry on 127.0.0.1 (plain HTTP, so pulls pass
``--insecure-registry 127.0.0.1:PORT``) and runs the cell-pull binary from
$CELL_BUILD/bin as root. Results are checked on disk (and against
``umoci raw unpack`` of the same image where a reference flattening is
needed), in the registry's access log (which blobs were fetched, and 206
answers for ranged GETs: the registry does not log the Range header), in the
token server's request log, and through the fault-injecting proxy.

Tests that take more than a few seconds say so in a comment ("slow").
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import threading
import time
import uuid
from typing import Dict, List, Optional

import pytest

import images as im
import pki
from images import (Dir, File, Hardlink, Image, Index, Layer, Opaque, Raw, Symlink,
                    Whiteout, CharDev, Fifo, busybox_layer, platform_image, push,
                    random_layer, sha256_digest, tree_listing, diff_listings)
from registry import free_port, skopeo_copy_to_oci, umoci_raw_unpack
from conftest import is_mountpoint

CMD_TIMEOUT = 60


# ---------------------------------------------------------------- helpers

def busybox_image(fmt: str = "docker", extra: Optional[List[Layer]] = None, **kw) -> Image:
    return Image([busybox_layer()] + list(extra or []),
                 config={"Cmd": ["/bin/sh"], "Env": ["PATH=/bin"]}, fmt=fmt, **kw)


def chroot_run(root: str, *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["chroot", root, *cmd], capture_output=True, text=True,
                          timeout=CMD_TIMEOUT)


def assert_busybox_works(root: str) -> None:
    st = os.stat(os.path.join(root, "bin/busybox"))
    assert stat.S_ISREG(st.st_mode) and st.st_mode & 0o111, "bin/busybox not executable"
    p = chroot_run(root, "/bin/busybox", "echo", "hi")
    assert p.returncode == 0 and p.stdout == "hi\n", p.stderr
    p = chroot_run(root, "/bin/sh", "-c", "echo $((6*7))")
    assert p.stdout == "42\n", p.stderr


def assert_ok(res) -> None:
    rc, out, err = res
    assert rc == 0, f"cell-pull failed (rc={rc}): {err.strip()}"


def error_line(err: str) -> str:
    """The 'cell-pull: …' line of stderr (the last one, if several)."""
    lines = [l for l in err.splitlines() if l.startswith("cell-pull: ")]
    assert lines, f"no line starting with 'cell-pull: ' on stderr: {err!r}"
    return lines[-1]


def assert_fails(res, rc: int = 1, *any_of: str) -> str:
    """rc as given, a 'cell-pull: ' line, mentioning one of ``any_of``."""
    got_rc, out, err = res
    assert got_rc == rc, f"expected exit {rc}, got {got_rc}; stderr: {err.strip()}"
    line = error_line(err)
    if any_of:
        low = err.lower()
        assert any(w.lower() in low for w in any_of), \
            f"message should mention one of {any_of}: {err.strip()}"
    return line


def file_sha(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def names_under(top: str) -> List[str]:
    out = []
    for dp, dns, fns in os.walk(top):
        for n in dns + fns:
            out.append(os.path.relpath(os.path.join(dp, n), top))
    return out


def mount_options(mp: str) -> Dict[str, str]:
    """Super options of the mount at ``mp`` (lowerdir, upperdir, …)."""
    mp = os.path.realpath(mp)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if parts[4] == mp:
                sep = parts.index("-")
                opts = {}
                for o in parts[sep + 3].split(","):
                    k, _, v = o.partition("=")
                    opts[k] = v
                opts["fstype"] = parts[sep + 1]
                return opts
    raise AssertionError(f"{mp} is not a mount point")


class LineReader:
    """Collects a Popen's stdout lines in a thread (for --progress json)."""

    def __init__(self, stream):
        self.lines: List[str] = []
        self._t = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._t.start()

    def _run(self, stream):
        for raw in iter(stream.readline, b""):
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def events(self) -> List[dict]:
        out = []
        for l in list(self.lines):
            try:
                out.append(json.loads(l))
            except ValueError:
                pass
        return out

    def downloaded(self, digest: str) -> int:
        return max([e.get("downloaded", 0) for e in self.events()
                    if e.get("digest") == digest] or [0])

    def join(self, timeout: float = 10) -> None:
        self._t.join(timeout)


def spool_bytes(workdir: str) -> int:
    """The biggest file under workdir/tmp (a partial blob)."""
    best = 0
    for dp, _, fns in os.walk(os.path.join(workdir, "tmp")):
        for n in fns:
            try:
                best = max(best, os.path.getsize(os.path.join(dp, n)))
            except OSError:
                pass
    return best


def wait_for_download(reader: LineReader, workdir: str, digest: str, at_least: int,
                      proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if reader.downloaded(digest) >= at_least or spool_bytes(workdir) >= at_least:
            return
        if proc.poll() is not None:
            raise AssertionError(
                f"the pull ended (rc={proc.returncode}) before the blob reached {at_least} "
                "bytes: is CELL_PULL_MAX_RECV_SPEED throttling the download?")
        time.sleep(0.05)
    raise AssertionError(f"the download of {digest} did not reach {at_least} bytes "
                         f"in {timeout}s (progress: {reader.lines[-3:]})")


def finish(proc: subprocess.Popen, timeout: float = 90,
           reader: Optional[LineReader] = None):
    """Wait for a background pull → (rc, stdout, stderr). With a LineReader
    attached, stdout is what the reader collected."""
    try:
        if reader is None:
            out, err = proc.communicate(timeout=timeout)
        else:
            proc.wait(timeout=timeout)
            reader.join()
            out, err = "\n".join(reader.lines).encode(), proc.stderr.read()
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        pytest.fail(f"cell-pull did not finish in {timeout}s")
    return proc.returncode, (out or b"").decode(errors="replace"), \
        (err or b"").decode(errors="replace")


# ---------------------------------------------------------------- basics

def test_busybox_single_layer(registry, pull, workdir, tmp_path):
    push(registry, "t/busybox", "v1", busybox_image())
    root = str(tmp_path / "rootfs")
    assert_ok(pull(registry, registry.ref("t/busybox", "v1"), root, workdir))
    assert_busybox_works(root)
    assert os.readlink(os.path.join(root, "bin/sh")) == "busybox"
    assert stat.S_IMODE(os.stat(os.path.join(root, "tmp")).st_mode) == 0o1777
    assert open(os.path.join(root, "etc/passwd")).read().startswith("root:x:0:0:")


def test_multi_layer(registry, pull, workdir, tmp_path):
    l2 = Layer([Dir("etc"), File("etc/passwd", "root:x:0:0::/:/bin/sh\napp:x:1000:1000::/:/bin/sh\n"),
                Dir("app"), File("app/run.sh", "#!/bin/sh\necho layered\n", mode=0o755)])
    l3 = Layer([Dir("app"), File("app/data", "three"), Dir("var"), Dir("var/log", mode=0o750)])
    img = busybox_image(extra=[l2, l3])
    push(registry, "t/multi", "v1", img)
    root = str(tmp_path / "rootfs")
    assert_ok(pull(registry, registry.ref("t/multi", "v1"), root, workdir))
    assert "app:x:1000" in open(os.path.join(root, "etc/passwd")).read()
    assert open(os.path.join(root, "app/data")).read() == "three"
    assert stat.S_IMODE(os.stat(os.path.join(root, "var/log")).st_mode) == 0o750
    p = chroot_run(root, "/app/run.sh")
    assert p.stdout == "layered\n", p.stderr
    assert_busybox_works(root)


@pytest.mark.parametrize("fmt", ["oci", "docker"])
@pytest.mark.parametrize("platform,expect", [
    ("linux/arm64/v8", "linux/arm64/v8"),
    ("linux/arm/v7", "linux/arm/v7"),
    ("linux/arm64", "linux/arm64/v8"),  # arm64 without a variant means v8
    (None, "linux/amd64"),              # default: this machine
])
def test_index_platform_selection(registry, pull, workdir, tmp_path, fmt, platform, expect):
    imgs = [platform_image("linux", "amd64", fmt=fmt),
            platform_image("linux", "arm64", "v8", fmt=fmt),
            platform_image("linux", "arm", "v7", fmt=fmt)]
    push(registry, "t/multiarch", "latest", Index(imgs, fmt="oci" if fmt == "oci" else "docker"))
    root, cfg = str(tmp_path / "rootfs"), str(tmp_path / "config.json")
    extra = ["--save-config", cfg] + (["--platform", platform] if platform else [])
    assert_ok(pull(registry, registry.ref("t/multiarch", "latest"), root, workdir, *extra))
    assert open(os.path.join(root, "platform")).read() == expect + "\n"
    want = next(i for i in imgs if "/".join(filter(None, (i.os, i.arch, i.variant))) == expect)
    assert json.load(open(cfg)) == want.config_dict


def test_index_platform_absent(registry, pull, workdir, tmp_path):
    push(registry, "t/multiarch", "latest",
         Index([platform_image("linux", "amd64"), platform_image("linux", "arm64", "v8")]))
    res = pull(registry, registry.ref("t/multiarch", "latest"), str(tmp_path / "rootfs"),
               workdir, "--platform", "linux/s390x")
    assert_fails(res, 1, "s390x", "platform")


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
def test_layer_compression(registry, pull, workdir, tmp_path, compression):
    big = os.urandom(200_000) + b"z" * 300_000
    img = Image([busybox_layer(compression),
                 Layer([Dir("data"), File("data/blob", big)], compression)], fmt="oci")
    push(registry, "t/comp", compression, img)
    root = str(tmp_path / "rootfs")
    assert_ok(pull(registry, registry.ref("t/comp", compression), root, workdir))
    assert open(os.path.join(root, "data/blob"), "rb").read() == big
    assert_busybox_works(root)


@pytest.mark.parametrize("fmt", ["docker", "oci"])
def test_manifest_formats_and_save_config(registry, pull, workdir, tmp_path, fmt):
    img = Image([busybox_layer(), Layer([File("hello", "world\n")], "none" if fmt == "oci" else "gzip")],
                config={"Env": ["PATH=/bin", "A=b c"], "Entrypoint": ["/bin/sh", "-c"],
                        "Cmd": ["echo hi"], "WorkingDir": "/tmp", "User": "65534:65534",
                        "ExposedPorts": {"80/tcp": {}}, "Labels": {"k": "v"}}, fmt=fmt)
    push(registry, "t/fmt", fmt, img)
    root, cfg = str(tmp_path / "rootfs"), str(tmp_path / "cfg.json")
    assert_ok(pull(registry, registry.ref("t/fmt", fmt), root, workdir, "--save-config", cfg))
    assert open(os.path.join(root, "hello")).read() == "world\n"
    assert json.load(open(cfg)) == img.config_dict
    assert open(cfg, "rb").read() == img.config_bytes  # documented: byte for byte


def test_pull_by_digest(registry, pull, workdir, tmp_path):
    img = busybox_image(extra=[Layer([File("which", "A")])])
    push(registry, "t/dig", "a", img)
    root = str(tmp_path / "rootfs")
    assert_ok(pull(registry, registry.ref("t/dig", digest=img.manifest_digest), root, workdir))
    assert open(os.path.join(root, "which")).read() == "A"


def test_pull_by_tag_and_digest_uses_digest(registry, pull, workdir, tmp_path):
    a = busybox_image(extra=[Layer([File("which", "A")])])
    b = busybox_image(extra=[Layer([File("which", "B")])])
    push(registry, "t/dig", "a", a)
    push(registry, "t/dig", "b", b)
    root = str(tmp_path / "rootfs")
    ref = registry.ref("t/dig", "b", digest=a.manifest_digest)  # tag says b, digest says a
    assert_ok(pull(registry, ref, root, workdir))
    assert open(os.path.join(root, "which")).read() == "A"


def test_cache_layout(registry, pull, workdir, tmp_path):
    img = busybox_image(extra=[Layer([File("x", "y")])])
    push(registry, "t/layout", "v1", img)
    assert_ok(pull(registry, registry.ref("t/layout", "v1"), str(tmp_path / "r"), workdir))
    for digest in [img.manifest_digest, img.config_digest] + [l.digest for l in img.layers]:
        p = os.path.join(workdir, "blobs", "sha256", digest.split(":")[1])
        assert os.path.isfile(p), f"{digest} missing from blobs/"
        assert file_sha(p) == digest
    assert os.listdir(os.path.join(workdir, "images")), "no image record"


def test_progress_json(registry, pull, workdir, tmp_path):
    big = random_layer(3 << 20)
    img = busybox_image(extra=[big])
    push(registry, "t/progress", "v1", img)
    rc, out, err = pull(registry, registry.ref("t/progress", "v1"), str(tmp_path / "r"),
                        workdir, "--progress", "json")
    assert rc == 0, err
    events = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert events and all("event" in e for e in events)
    layer_evs = [e for e in events if e.get("digest") == big.digest]
    assert layer_evs, f"no event for layer {big.digest}: {events}"
    for e in layer_evs:
        assert {"layer", "digest", "downloaded", "size"} <= set(e), e
        assert e["size"] == big.size and 0 <= e["downloaded"] <= big.size
    assert max(e["downloaded"] for e in layer_evs) == big.size


# ---------------------------------------------------------------- layer semantics

def whiteout_image(fmt="docker") -> Image:
    l1 = Layer([
        Dir("a"), File("a/1", "one"), File("a/2", "two"), Dir("a/sub"), File("a/sub/x", "x"),
        Dir("b"), File("b/keep", "k"), Dir("c"), Dir("c/deep"), File("c/deep/f", "f"),
        Symlink("lnk", "a/1"), File("mode", "m", mode=0o600, uid=1000, gid=1000),
        Dir("opq"), File("opq/old", "o"), Dir("opq/olddir"), File("opq/olddir/z", "z"),
        Fifo("fifo"), CharDev("null", 1, 3), File("suid", "s", mode=0o4755),
        File("x", "file that becomes a dir"), Dir("y"), File("y/z", "dir that becomes a file"),
    ])
    l2 = Layer([
        Whiteout("a/1"), Whiteout("a/sub"), Opaque("opq"), File("opq/new", "n"),
        Whiteout("c"), File("mode", "m2", mode=0o640, uid=1001, gid=1002), Whiteout("lnk"),
        Dir("b"), File("b/added", "a"), Dir("x"), File("x/inner", "i"), File("y", "now a file"),
    ])
    l3 = Layer([
        Dir("c", mode=0o700), File("c/again", "again"), File("a/1", "back", mode=0o755),
        Dir("opq", mode=0o711), Symlink("lnk", "b/keep"), Whiteout("fifo"),
        Whiteout("never-existed"), Dir("e", uid=5, gid=6, mode=0o2775),
    ])
    return Image([busybox_layer(), l1, l2, l3], fmt=fmt)


def test_whiteouts_match_umoci(registry, pull, workdir, tmp_path):
    img = whiteout_image()
    push(registry, "t/wh", "v1", img)
    root = str(tmp_path / "rootfs")
    assert_ok(pull(registry, registry.ref("t/wh", "v1"), root, workdir))
    oci, ref_root = str(tmp_path / "oci"), str(tmp_path / "umoci-rootfs")
    skopeo_copy_to_oci(registry.ref("t/wh", "v1"), oci, "v1")
    umoci_raw_unpack(oci, "v1", ref_root)
    mine, theirs = tree_listing(root), tree_listing(ref_root)
    assert not diff_listings(mine, theirs), "\n".join(diff_listings(mine, theirs))
    # And the expected facts, in case umoci and cell-pull agree on a mistake.
    assert "a/1" in mine and open(os.path.join(root, "a/1")).read() == "back"
    assert "a/sub" not in mine and "c/deep" not in mine and "opq/old" not in mine
    assert "opq/new" in mine and "fifo" not in mine and mine["lnk"][5] == "b/keep"
    assert mine["mode"][1:4] == (oct(0o640), 1001, 1002)
    assert mine["x"][0] == "dir" and mine["y"][0] == "file"
    assert not any(os.path.basename(k).startswith(".wh.") for k in mine)


def test_hardlinks_share_inode(registry, pull, workdir, tmp_path):
    img = busybox_image(extra=[Layer([Dir("data"), File("data/orig", "shared", mode=0o640),
                                      Hardlink("data/link", "data/orig"), Dir("other"),
                                      Hardlink("other/link2", "data/orig")])])
    push(registry, "t/hard", "v1", img)
    root = str(tmp_path / "rootfs")
    assert_ok(pull(registry, registry.ref("t/hard", "v1"), root, workdir))
    sts = [os.lstat(os.path.join(root, p)) for p in ("data/orig", "data/link", "other/link2")]
    assert len({s.st_ino for s in sts}) == 1
    assert sts[0].st_nlink == 3
    assert open(os.path.join(root, "other/link2")).read() == "shared"


# ---------------------------------------------------------------- hostile layers

def _hostile_cases(evil: str, sentinel: str):
    """name → entries of a hostile layer; ``evil`` is a unique file name."""
    return {
        "dotdot": [Raw(f"../{evil}", content="x")],
        "dotdot-to-tmp": [Raw("../" * 12 + f"tmp/{evil}", content="x")],
        "inner-dotdot": [Dir("a"), Raw(f"a/../../{evil}", content="x")],
        "abs-symlink-write": [Symlink("link", sentinel), Raw(f"link/{evil}", content="x")],
        "rel-symlink-write": [Symlink("up", "../../.."), Raw(f"up/{evil}", content="x")],
        "hardlink-outside": [Raw(evil, "hardlink", linkname="../../outside")],
        "whiteout-dotdot": [Raw(".wh..")],
    }


HOSTILE = ["dotdot", "dotdot-to-tmp", "inner-dotdot", "abs-symlink-write",
           "rel-symlink-write", "hardlink-outside", "whiteout-dotdot"]


@pytest.mark.parametrize("mode", ["--extract-to", "--mount"])
@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_layer_is_refused(registry, pull, tmp_path, mounts, case, mode):
    box = tmp_path / "box" / "inner"
    box.mkdir(parents=True)
    target, work = box / "rootfs", box / "work"
    work.mkdir()
    sentinel = tmp_path / "box" / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep").write_text("keep")
    outside = tmp_path / "box" / "outside"
    outside.write_text("outside")
    evil = f"evil-{uuid.uuid4().hex[:8]}"
    entries = _hostile_cases(evil, str(sentinel))[case]
    img = busybox_image(fmt="oci", extra=[Layer(entries)])
    push(registry, "t/hostile", case, img)
    if mode == "--mount":
        target.mkdir()
        mounts.append(str(target))
    res = pull(registry, registry.ref("t/hostile", case), str(target), str(work), mode=mode)
    assert_fails(res, 1)

    # Nothing was created outside the target.
    assert sorted(os.listdir(sentinel)) == ["keep"]
    assert (sentinel / "keep").read_text() == "keep"
    assert os.stat(outside).st_nlink == 1 and outside.read_text() == "outside"
    for d in ("/", "/tmp", str(tmp_path.parent), str(tmp_path), str(tmp_path / "box"), str(box)):
        assert not os.path.lexists(os.path.join(d, evil)), f"{d}/{evil} was created"
    for rel in names_under(str(tmp_path)):
        if os.path.basename(rel) != evil:
            continue
        p = str(tmp_path / rel)
        if mode == "--extract-to":
            assert p.startswith(str(target) + "/"), f"escaped: {p}"
        else:  # only inside one layer's own directory
            parts = os.path.relpath(p, work).split("/")
            assert not parts[0].startswith(".."), f"escaped: {p}"
            assert len(parts) >= 4 and parts[0] in ("layers", "tmp"), f"escaped: {p}"
    assert os.path.isdir(tmp_path / "box") and os.path.isdir(box)
    if mode == "--mount":
        assert not is_mountpoint(str(target))


# ---------------------------------------------------------------- auth

def test_token_auth(make_registry, token_server, pull, workdir, tmp_path):
    reg = make_registry(token=token_server)
    img = busybox_image(extra=[Layer([File("f1", "1")]), Layer([File("f2", "2")]),
                               Layer([File("f3", "3")])])
    push(reg, "t/tok", "v1", img)
    token_server.reset()
    root = str(tmp_path / "rootfs")
    assert_ok(pull(reg, reg.ref("t/tok", "v1"), root, workdir,
                   "--username", "alice", "--password", "wonderland"))
    assert open(os.path.join(root, "f3")).read() == "3"
    seen = [tuple(s) for s in token_server.scopes_seen(ok_only=True)]
    assert seen, "no token was requested"
    assert ("repository:t/tok:pull",) in seen
    dup = {s: seen.count(s) for s in seen if seen.count(s) > 1}
    assert not dup, f"token requested more than once per scope: {seen}"


def test_token_auth_wrong_password(make_registry, token_server, pull, workdir, tmp_path):
    reg = make_registry(token=token_server)
    push(reg, "t/tok", "v1", busybox_image())
    token_server.reset()
    res = pull(reg, reg.ref("t/tok", "v1"), str(tmp_path / "rootfs"), workdir,
               "--username", "alice", "--password", "wrong")
    assert_fails(res, 1, "401", "unauthorized", "denied", "credential", "authenticat")
    assert token_server.count(ok_only=False) >= 1
    assert token_server.count() == 0


def test_basic_auth_flags(make_registry, pull, workdir, tmp_path):
    reg = make_registry(htpasswd={"bob": "builder"})
    push(reg, "t/basic", "v1", busybox_image())
    root = str(tmp_path / "rootfs")
    assert_ok(pull(reg, reg.ref("t/basic", "v1"), root, workdir,
                   "--username", "bob", "--password", "builder"))
    assert_busybox_works(root)


def test_basic_auth_file(make_registry, pull, workdir, tmp_path):
    reg = make_registry(htpasswd={"bob": "builder"})
    push(reg, "t/basic", "v1", busybox_image())
    auth = tmp_path / "config.json"
    auth.write_text(json.dumps({"auths": {
        "other.example:5000": {"auth": base64.b64encode(b"x:y").decode()},
        reg.host: {"auth": base64.b64encode(b"bob:builder").decode()}}}))
    root = str(tmp_path / "rootfs")
    assert_ok(pull(reg, reg.ref("t/basic", "v1"), root, workdir, "--auth-file", str(auth)))
    assert_busybox_works(root)


def test_basic_auth_wrong_password(make_registry, pull, workdir, tmp_path):
    reg = make_registry(htpasswd={"bob": "builder"})
    push(reg, "t/basic", "v1", busybox_image())
    res = pull(reg, reg.ref("t/basic", "v1"), str(tmp_path / "rootfs"), workdir,
               "--username", "bob", "--password", "nope")
    assert_fails(res, 1, "401", "unauthorized")


def test_basic_auth_missing_credentials(make_registry, pull, workdir, tmp_path):
    reg = make_registry(htpasswd={"bob": "builder"})
    push(reg, "t/basic", "v1", busybox_image())
    res = pull(reg, reg.ref("t/basic", "v1"), str(tmp_path / "rootfs"), workdir)
    assert_fails(res, 1, "401", "unauthorized")


# ---------------------------------------------------------------- transport

def test_tls_registry_with_ca_file(make_registry, run_pull, workdir, tmp_path):
    d = str(tmp_path / "pki")
    ca = pki.CA.create(d)
    srv = ca.issue_server(d, "registry", dns=["localhost"], ips=["127.0.0.1"])
    reg = make_registry(tls=(srv.cert_path, srv.key_path), ca_file=ca.cert_path)
    push(reg, "t/tls", "v1", busybox_image())
    root = str(tmp_path / "rootfs")
    assert_ok(run_pull("--image", reg.ref("t/tls", "v1"), "--extract-to", root,
                       "--workdir", workdir, "--ca-file", ca.cert_path))
    assert_busybox_works(root)
    # Without the CA the certificate is not trusted.
    res = run_pull("--image", reg.ref("t/tls", "v1"), "--extract-to", str(tmp_path / "r2"),
                   "--workdir", str(tmp_path / "w2"), "--retries", "1",
                   env={"CELL_PULL_RETRY_BASE_MS": "20"})
    assert_fails(res, 1, "certificate", "ssl", "tls", "verify")


def test_plain_http_on_loopback_needs_no_flag(registry, run_pull, workdir, tmp_path):
    """Like Docker: a registry on 127.0.0.0/8 or ::1 may speak plain HTTP
    without --insecure-registry; TLS is tried first (the TLS registry tests
    above pull from loopback over TLS without the flag)."""
    push(registry, "t/plain", "v1", busybox_image())
    root = str(tmp_path / "rootfs")
    assert_ok(run_pull("--image", registry.ref("t/plain", "v1"), "--extract-to", root,
                       "--workdir", workdir, "--retries", "1",
                       env={"CELL_PULL_RETRY_BASE_MS": "20"}, timeout=30))
    assert_busybox_works(root)
    # An explicit https:// URL is never downgraded.
    res = run_pull("--image", "t/plain:v1", "--registry-url", "https://" + registry.host,
                   "--extract-to", str(tmp_path / "r2"), "--workdir", str(tmp_path / "w2"),
                   "--retries", "1", env={"CELL_PULL_RETRY_BASE_MS": "20"}, timeout=30)
    assert_fails(res, 1)


def test_registry_url_override(registry, run_pull, workdir, tmp_path):
    push(registry, "t/url", "v1", busybox_image())
    root = str(tmp_path / "rootfs")
    assert_ok(run_pull("--image", "t/url:v1", "--registry-url", registry.url,
                       "--extract-to", root, "--workdir", workdir,
                       "--insecure-registry", registry.host))
    assert_busybox_works(root)


# ---------------------------------------------------------------- integrity

def _assert_nothing_cached_for(workdir: str, layer: Layer) -> None:
    for sub in ("blobs", "layers"):
        for rel in names_under(os.path.join(workdir, sub)):
            assert layer.hex not in rel and layer.diff_hex not in rel, \
                f"{sub}/{rel} exists for a layer that failed verification"


@pytest.mark.parametrize("how", ["proxy", "storage"])
def test_layer_digest_mismatch(registry, make_proxy, pull, workdir, tmp_path, how):
    bad = Layer([Dir("d"), File("d/payload", os.urandom(100_000))])
    img = busybox_image(extra=[bad])
    push(registry, "t/bad", "v1", img)
    if how == "proxy":
        px = make_proxy(registry)
        px.corrupt(bad.digest, offset=1000)
        host, ref = px.host, f"{px.host}/t/bad:v1"
    else:
        registry.corrupt_blob(bad.digest)
        host, ref = registry.host, registry.ref("t/bad", "v1")
    root = str(tmp_path / "rootfs")
    res = pull(host, ref, root, workdir, "--retries", "1",
               env={"CELL_PULL_RETRY_BASE_MS": "20"})
    assert_fails(res, 1, "digest")
    _assert_nothing_cached_for(workdir, bad)
    assert not os.path.exists(os.path.join(root, "d", "payload"))


def test_config_digest_mismatch(registry, make_proxy, pull, workdir, tmp_path):
    img = busybox_image()
    push(registry, "t/badcfg", "v1", img)
    px = make_proxy(registry)
    px.corrupt(img.config_digest, offset=5)
    res = pull(px.host, f"{px.host}/t/badcfg:v1", str(tmp_path / "r"), workdir,
               "--retries", "1", env={"CELL_PULL_RETRY_BASE_MS": "20"})
    assert_fails(res, 1, "digest")
    cfg = os.path.join(workdir, "blobs", "sha256", img.config_digest.split(":")[1])
    assert not os.path.exists(cfg)


def test_substituted_manifest_for_digest_pull(registry, make_proxy, pull, workdir, tmp_path):
    a = busybox_image(extra=[Layer([File("which", "A")])])
    b = busybox_image(extra=[Layer([File("which", "B")])])
    push(registry, "t/sub", "a", a)
    push(registry, "t/sub", "b", b)
    px = make_proxy(registry)
    px.replace(f"/manifests/{a.manifest_digest}", b.manifest_bytes)
    root = str(tmp_path / "rootfs")
    res = pull(px.host, f"{px.host}/t/sub@{a.manifest_digest}", root, workdir,
               "--retries", "1", env={"CELL_PULL_RETRY_BASE_MS": "20"})
    assert_fails(res, 1, "digest")
    assert not os.path.exists(os.path.join(root, "which"))


@pytest.mark.parametrize("delta", [-7, 7])
def test_wrong_descriptor_size(registry, pull, workdir, tmp_path, delta):
    layer = Layer([File("f", os.urandom(50_000))])
    img = busybox_image(extra=[layer], mutate_manifest=im.wrong_size(1, delta))
    push(registry, "t/size", "v1", img)
    res = pull(registry, registry.ref("t/size", "v1"), str(tmp_path / "rootfs"), workdir,
               "--retries", "1", env={"CELL_PULL_RETRY_BASE_MS": "20"})
    assert_fails(res, 1, "size", "digest", "length", "short", "larger")
    _assert_nothing_cached_for(workdir, layer)


def test_dropped_connection_resumes_with_range(registry, make_proxy, pull, workdir, tmp_path):
    big = random_layer(2 << 20)
    img = busybox_image(extra=[big])
    push(registry, "t/drop", "v1", img)
    px = make_proxy(registry)
    px.drop_after(big.digest, 700_000, times=1)
    root = str(tmp_path / "rootfs")
    assert_ok(pull(px.host, f"{px.host}/t/drop:v1", root, workdir,
                   env={"CELL_PULL_RETRY_BASE_MS": "50"}))
    assert file_sha(os.path.join(root, "random.bin")) == \
        sha256_digest(big.entries[0].content)
    gets = px.requests(f"/blobs/{big.digest}", method="GET")
    assert len(gets) >= 2, [g.path for g in gets]
    assert gets[0].sent == 700_000
    later = [g.range for g in gets[1:]]
    assert any(r and r.startswith("bytes=") and 0 < int(r[6:].split("-")[0]) <= 700_000
               for r in later), f"no resuming Range header on the retry: {later}"


# slow (~12 s): a 20 MB layer throttled to 2 MB/s
def test_registry_restart_mid_blob(registry, start_pull, workdir, tmp_path):
    big = random_layer(20 << 20)
    img = busybox_image(extra=[big])
    push(registry, "t/restart", "v1", img)
    root = str(tmp_path / "rootfs")
    p = start_pull("--image", registry.ref("t/restart", "v1"), "--extract-to", root,
                   "--workdir", workdir, "--insecure-registry", registry.host,
                   "--progress", "json",
                   env={"CELL_PULL_MAX_RECV_SPEED": "2000000", "CELL_PULL_RETRY_BASE_MS": "200"})
    reader = LineReader(p.stdout)
    wait_for_download(reader, workdir, big.digest, big.size // 4, p)
    registry.stop()
    # The cut must really fall in the middle of the blob (this needs the
    # CELL_PULL_MAX_RECV_SPEED seam to hold the transfer to ~2 MB/s).
    got = reader.downloaded(big.digest)
    assert p.poll() is None and got < big.size, \
        f"the blob was already complete ({got}/{big.size} bytes) when the registry " \
        "stopped: CELL_PULL_MAX_RECV_SPEED did not throttle the download"
    time.sleep(1)
    registry.start()
    mark = registry.mark()
    rc, _, err = finish(p, timeout=90, reader=reader)
    assert rc == 0, f"pull failed after the registry came back: {err}"
    assert file_sha(os.path.join(root, "random.bin")) == sha256_digest(big.entries[0].content)
    assert_busybox_works(root)
    gets = registry.blob_gets(big.digest, since=mark)
    assert any(g.ranged and g.size < big.size for g in gets), \
        "no ranged (206) GET of the blob after the restart: " + \
        "; ".join(registry.request_lines(mark))


# ---------------------------------------------------------------- cache

def test_warm_pull_fetches_no_blobs(registry, pull, workdir, tmp_path):
    img = busybox_image(extra=[Layer([File("x", "1")]), Layer([File("y", "2")])])
    push(registry, "t/warm", "v1", img)
    first, second = str(tmp_path / "r1"), str(tmp_path / "r2")
    assert_ok(pull(registry, registry.ref("t/warm", "v1"), first, workdir))
    mark = registry.mark()
    assert_ok(pull(registry, registry.ref("t/warm", "v1"), second, workdir))
    assert registry.blob_gets(since=mark) == [], registry.request_lines(mark)
    a, b = tree_listing(first), tree_listing(second)
    assert not diff_listings(a, b), diff_listings(a, b)
    assert_busybox_works(second)


def test_validate_cache_refetches_corrupt_blob(registry, pull, workdir, tmp_path):
    layer = Layer([File("payload", os.urandom(300_000))])
    img = busybox_image(extra=[layer])
    push(registry, "t/val", "v1", img)
    assert_ok(pull(registry, registry.ref("t/val", "v1"), str(tmp_path / "r1"), workdir))
    blob = os.path.join(workdir, "blobs", "sha256", layer.hex)
    assert os.path.isfile(blob), "the layer blob is not in the cache after a pull"
    with open(blob, "r+b") as f:
        f.seek(1000)
        c = f.read(1)
        f.seek(1000)
        f.write(bytes([c[0] ^ 0xFF]))
    mark = registry.mark()
    root = str(tmp_path / "r2")
    assert_ok(pull(registry, registry.ref("t/val", "v1"), root, workdir, "--validate-cache"))
    assert registry.blob_gets(layer.digest, since=mark), \
        "the corrupt blob was not fetched again: " + "; ".join(registry.request_lines(mark))
    assert file_sha(blob) == layer.digest
    assert open(os.path.join(root, "payload"), "rb").read() == layer.entries[0].content


# slow (~5 s): two throttled pulls at once
def test_concurrent_pulls_same_workdir(registry, start_pull, workdir, tmp_path):
    big = random_layer(4 << 20)
    img = busybox_image(extra=[big, Layer([File("small", "s")])])
    push(registry, "t/conc", "v1", img)
    roots = [str(tmp_path / f"r{i}") for i in range(2)]
    env = {"CELL_PULL_MAX_RECV_SPEED": "4000000"}
    ps = [start_pull("--image", registry.ref("t/conc", "v1"), "--extract-to", r,
                     "--workdir", workdir, "--insecure-registry", registry.host, env=env)
          for r in roots]
    results = [finish(p, timeout=90) for p in ps]
    for rc, _, err in results:
        assert rc == 0, err
    a, b = tree_listing(roots[0]), tree_listing(roots[1])
    assert not diff_listings(a, b), diff_listings(a, b)
    assert file_sha(os.path.join(roots[0], "random.bin")) == sha256_digest(big.entries[0].content)
    # The blob was fetched once or at most twice, never more.
    assert len([g for g in registry.blob_gets(big.digest) if g.status in (200, 206)]) <= 2


# slow (~4 s): a throttled pull killed mid-download
def test_crashed_pull_is_recovered(registry, start_pull, run_pull, pull, workdir, tmp_path):
    big = random_layer(8 << 20)
    img = busybox_image(extra=[big])
    push(registry, "t/crash", "v1", img)
    ref = registry.ref("t/crash", "v1")
    p = start_pull("--image", ref, "--extract-to", str(tmp_path / "r1"), "--workdir", workdir,
                   "--insecure-registry", registry.host, "--progress", "json",
                   env={"CELL_PULL_MAX_RECV_SPEED": "2000000"})
    reader = LineReader(p.stdout)
    wait_for_download(reader, workdir, big.digest, big.size // 4, p)
    os.killpg(p.pid, signal.SIGKILL)
    assert p.wait(timeout=10) == -signal.SIGKILL, "the pull ended before it was killed"
    got = reader.downloaded(big.digest)
    assert got < big.size, f"the blob was already complete ({got}/{big.size}) when killed: " \
        "CELL_PULL_MAX_RECV_SPEED did not throttle the download"
    assert os.listdir(os.path.join(workdir, "tmp")), "no partial download left to recover"
    mark = registry.mark()
    root = str(tmp_path / "r2")
    assert_ok(pull(registry, ref, root, workdir))
    assert file_sha(os.path.join(root, "random.bin")) == sha256_digest(big.entries[0].content)
    assert_busybox_works(root)
    # Documented: the stale spool is resumed with Range, not fetched again.
    gets = registry.blob_gets(big.digest, since=mark)
    assert any(g.ranged for g in gets), "; ".join(registry.request_lines(mark))
    assert_ok(run_pull("--gc", "--workdir", workdir))
    tmp = os.path.join(workdir, "tmp")
    assert not os.path.exists(tmp) or os.listdir(tmp) == [], os.listdir(tmp)
    # The image is still whole in the cache after gc.
    mark = registry.mark()
    assert_ok(pull(registry, ref, str(tmp_path / "r3"), workdir))
    assert registry.blob_gets(since=mark) == []


def _du(path: str) -> int:
    total = 0
    for dp, dns, fns in os.walk(path):
        for n in fns:
            try:
                total += os.lstat(os.path.join(dp, n)).st_blocks * 512
            except OSError:
                pass
    return total


def test_gc_reclaims_space(registry, pull, run_pull, workdir, tmp_path, mounts):
    img = busybox_image(extra=[random_layer(1 << 20)])
    push(registry, "t/gc", "v1", img)
    ref = registry.ref("t/gc", "v1")
    mp = str(tmp_path / "mnt")
    os.mkdir(mp)
    mounts.append(mp)
    assert_ok(pull(registry, ref, mp, workdir, mode="--mount"))  # blobs and layers
    assert_ok(run_pull("--unmount", mp))
    old = time.time() - 3 * 86400
    junk_blob = os.path.join(workdir, "blobs", "sha256", "ab" * 32)
    junk_layer = os.path.join(workdir, "layers", "sha256", "cd" * 32)
    junk_tmp = os.path.join(workdir, "tmp", "blob-sha256:" + "ef" * 32)
    os.makedirs(junk_layer, exist_ok=True)
    os.makedirs(os.path.dirname(junk_tmp), exist_ok=True)
    for path in (junk_blob, os.path.join(junk_layer, "file"), junk_tmp):
        with open(path, "wb") as f:
            f.write(os.urandom(256 << 10))
        os.utime(path, (old, old))
    before = _du(workdir)
    assert_ok(run_pull("--gc", "--workdir", workdir))
    for path in (junk_blob, junk_layer, junk_tmp):
        assert not os.path.exists(path), f"gc left {path}"
    for l in img.layers:
        assert os.path.exists(os.path.join(workdir, "blobs", "sha256", l.hex))
        assert os.path.isdir(os.path.join(workdir, "layers", "sha256", l.diff_hex))
    mid = _du(workdir)
    assert mid <= before - (700 << 10)
    # Without the image records nothing is in use: gc takes the rest.
    for n in os.listdir(os.path.join(workdir, "images")):
        p = os.path.join(workdir, "images", n)
        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
    assert_ok(run_pull("--gc", "--workdir", workdir))
    after = _du(workdir)
    for l in img.layers:
        assert not os.path.exists(os.path.join(workdir, "blobs", "sha256", l.hex))
        assert not os.path.exists(os.path.join(workdir, "layers", "sha256", l.diff_hex))
    assert after <= mid - (2 << 20), (before, mid, after)


# ---------------------------------------------------------------- overlay mounts

def test_mount_overlay(registry, pull, run_pull, workdir, tmp_path, mounts):
    img = busybox_image(extra=[Layer([Dir("etc"), File("etc/motd", "lower\n")])])
    push(registry, "t/mnt", "v1", img)
    mp = str(tmp_path / "mnt")
    os.mkdir(mp)
    mounts.append(mp)
    assert_ok(pull(registry, registry.ref("t/mnt", "v1"), mp, workdir, mode="--mount"))
    assert is_mountpoint(mp)
    opts = mount_options(mp)
    assert opts["fstype"] == "overlay"
    assert_busybox_works(mp)
    # A write lands in the upper dir, never in a cached layer.
    with open(os.path.join(mp, "newfile"), "w") as f:
        f.write("upper")
    with open(os.path.join(mp, "etc/motd"), "a") as f:
        f.write("changed\n")
    p = chroot_run(mp, "/bin/sh", "-c", "echo via-chroot > /tmp/fromchroot")
    assert p.returncode == 0, p.stderr
    layers_dir = os.path.join(workdir, "layers")
    for rel in names_under(layers_dir):
        assert os.path.basename(rel) not in ("newfile", "fromchroot"), f"write reached layers/{rel}"
    motd_lower = [os.path.join(layers_dir, rel) for rel in names_under(layers_dir)
                  if rel.endswith("/etc/motd")]
    assert motd_lower and all(open(m).read() == "lower\n" for m in motd_lower)
    upper = opts.get("upperdir", "")
    if not upper.startswith("/"):
        upper = os.path.join(workdir, upper)
    assert open(os.path.join(upper, "newfile")).read() == "upper"
    assert open(os.path.join(upper, "tmp", "fromchroot")).read() == "via-chroot\n"
    assert os.path.realpath(upper).startswith(os.path.realpath(workdir) + "/")
    assert_ok(run_pull("--unmount", mp))
    assert not is_mountpoint(mp)
    assert not os.path.exists(os.path.join(mp, "newfile"))


def test_mount_whiteout_and_opaque(registry, pull, run_pull, workdir, tmp_path, mounts):
    l1 = Layer([Dir("etc"), File("etc/gone", "x"), File("etc/stays", "y"),
                Dir("d"), File("d/old", "o")])
    l2 = Layer([Whiteout("etc/gone"), Opaque("d"), File("d/new", "n")])
    push(registry, "t/mntwh", "v1", busybox_image(extra=[l1, l2]))
    mp = str(tmp_path / "mnt")
    os.mkdir(mp)
    mounts.append(mp)
    assert_ok(pull(registry, registry.ref("t/mntwh", "v1"), mp, workdir, mode="--mount"))
    assert not os.path.lexists(os.path.join(mp, "etc/gone"))
    assert os.path.exists(os.path.join(mp, "etc/stays"))
    assert sorted(os.listdir(os.path.join(mp, "d"))) == ["new"]
    assert not any(os.path.basename(n).startswith(".wh.") for n in names_under(mp))
    assert_ok(run_pull("--unmount", mp))
    assert not is_mountpoint(mp)


@pytest.mark.parametrize("mode", ["--extract-to", "--mount"])
def test_root_opaque_layer_hides_lower_layers(registry, pull, workdir, tmp_path, mounts, mode):
    # A top-level ".wh..wh..opq" hides everything below. overlayfs ignores
    # the opaque xattr on a lowerdir's root, so the mount must leave the
    # lower layers out; the flattened rootfs must come out the same.
    l1 = Layer([Dir("old"), File("old/f", "1"), File("top-old", "2")])
    l2 = Layer([Opaque(""), Dir("new"), File("new/f", "3")])
    push(registry, "t/rootopq", "v1", Image([l1, l2]))
    target = str(tmp_path / "target")
    if mode == "--mount":
        os.mkdir(target)
        mounts.append(target)
    assert_ok(pull(registry, registry.ref("t/rootopq", "v1"), target, workdir, mode=mode))
    assert sorted(os.listdir(target)) == ["new"]


def test_mount_60_layers(registry, pull, run_pull, workdir, tmp_path, mounts):
    layers = [busybox_layer()] + [Layer([Dir("many"), File(f"many/f{i:02d}", str(i))])
                                  for i in range(59)]
    img = Image(layers, config={"Cmd": ["/bin/sh"]}, fmt="oci")
    assert len(img.layers) == 60
    push(registry, "t/sixty", "v1", img)
    mp = str(tmp_path / "mnt")
    os.mkdir(mp)
    mounts.append(mp)
    assert_ok(pull(registry, registry.ref("t/sixty", "v1"), mp, workdir, mode="--mount"))
    assert sorted(os.listdir(os.path.join(mp, "many"))) == [f"f{i:02d}" for i in range(59)]
    assert open(os.path.join(mp, "many/f42")).read() == "42"
    assert_busybox_works(mp)
    assert_ok(run_pull("--unmount", mp))
    assert not is_mountpoint(mp)


# ---------------------------------------------------------------- CLI

def test_tosi_aliases(registry, run_pull, workdir, tmp_path):
    push(registry, "t/tosi", "v1", busybox_image())
    root, cfg = str(tmp_path / "rootfs"), str(tmp_path / "cfg.json")
    assert_ok(run_pull("-image", registry.ref("t/tosi", "v1"), "-extractto", root,
                       "-workdir", workdir, "-saveconfig", cfg, "-parallel-downloads", "2",
                       "--insecure-registry", registry.host))
    assert_busybox_works(root)
    assert json.load(open(cfg))["config"]["Cmd"] == ["/bin/sh"]


def test_help_and_version(run_pull):
    rc, out, err = run_pull("--help")
    assert rc == 0 and "--extract-to" in out + err
    rc, out, err = run_pull("--version")
    assert rc == 0 and (out + err).strip()


@pytest.mark.parametrize("args", [
    [],
    ["--no-such-option"],
    ["--image"],
    ["--extract-to", "/nonexistent/x"],
    ["--image", "127.0.0.1:1/x:y", "--extract-to", "/tmp/cp-a", "--mount", "/tmp/cp-b"],
    ["--image", "127.0.0.1:1/x:y", "--extract-to", "/tmp/cp-a", "--parallel", "many"],
    ["--image", "127.0.0.1:1/x:y", "--extract-to", "/tmp/cp-a", "--progress", "sparkles"],
    ["--image", "127.0.0.1:1/x:y", "--extract-to", "/tmp/cp-a", "--retries", "-3"],
], ids=lambda a: " ".join(a) or "no-args")
def test_usage_errors(run_pull, args):
    rc, out, err = run_pull(*args)
    assert rc == 2, f"rc={rc} stderr={err!r}"
    error_line(err)
    assert not os.path.exists("/tmp/cp-a") and not os.path.exists("/tmp/cp-b")


def test_connection_refused(pull, workdir, tmp_path):
    host = f"127.0.0.1:{free_port()}"
    t = time.monotonic()
    res = pull(host, f"{host}/t/none:v1", str(tmp_path / "rootfs"), workdir,
               "--retries", "1", env={"CELL_PULL_RETRY_BASE_MS": "50"}, timeout=30)
    assert time.monotonic() - t < 20
    assert_fails(res, 1, host, "refused", "connect")


def test_unknown_host(pull, workdir, tmp_path):
    t = time.monotonic()
    res = pull("no-such-registry.invalid", "no-such-registry.invalid/t/none:v1",
               str(tmp_path / "rootfs"), workdir, "--retries", "1",
               env={"CELL_PULL_RETRY_BASE_MS": "50"}, timeout=30)
    assert time.monotonic() - t < 20
    assert_fails(res, 1, "no-such-registry.invalid", "resolve")


def test_unknown_tag(registry, pull, workdir, tmp_path):
    push(registry, "t/some", "v1", busybox_image())
    res = pull(registry, registry.ref("t/some", "nope"), str(tmp_path / "r"), workdir,
               "--retries", "1", env={"CELL_PULL_RETRY_BASE_MS": "20"})
    assert_fails(res, 1, "not found", "unknown", "404")
