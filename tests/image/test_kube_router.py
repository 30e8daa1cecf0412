# SPDX-License-Identifier: Apache-2.0
"""kube-router gets into an image the way KOPS' nodeup fetches an asset
(image-build/kube-router.conf: version, URL, SHA-256): downloaded and
checked before anything else, refused on a wrong hash, and a kube-router
image is not built at all without a hash. A stand-in release tarball is
served from a local HTTP server with its own hash (the machine that runs
this cannot reach GitHub; the real hash comes from kube-router's checksum
file at build time)."""
from __future__ import annotations

import hashlib
import http.server
import io
import os
import subprocess
import tarfile
import threading

import pytest

from conftest import ROOT

FETCH = os.path.join(ROOT, "image-build", "kube-router.sh")
STAND_IN = b"#!/bin/sh\necho kube-router stand-in\n"


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


@pytest.fixture
def release(tmp_path):
    """A release tarball like kube-router's (the binary at the top, a
    LICENSE beside it) on a loopback HTTP server: (url, sha256, hits)."""
    www = tmp_path / "www"
    www.mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data, mode in (("LICENSE", b"Apache-2.0\n", 0o644),
                                 ("kube-router", STAND_IN, 0o755)):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), mode
            t.addfile(ti, io.BytesIO(data))
    asset = www / "kube-router_0.0.0_linux_amd64.tar.gz"
    asset.write_bytes(buf.getvalue())
    hits = []

    class Counting(Quiet):
        def do_GET(self):
            hits.append(self.path)
            super().do_GET()

    srv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a, **kw: Counting(*a, directory=str(www), **kw))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/{asset.name}"
    yield url, hashlib.sha256(asset.read_bytes()).hexdigest(), hits
    srv.shutdown()
    srv.server_close()


def run(args, url: str, sha: str | None, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE_ROUTER")}
    env["KUBE_ROUTER_URL"] = url
    if sha is not None:
        env["KUBE_ROUTER_SHA256"] = sha
    env.update(kw.pop("extra_env", {}))
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, **kw)


def test_fetch_checks_the_pinned_hash(release, tmp_path):
    url, sha, hits = release
    out = tmp_path / "cache"
    r = run([FETCH, str(out)], url, sha)
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip()
    assert path == str(out / f"kube-router-{sha}")
    with open(path, "rb") as f:
        assert f.read() == STAND_IN
    assert os.stat(path).st_mode & 0o111
    # The same hash again: the checked binary is reused, not fetched.
    r = run([FETCH, str(out)], url, sha)
    assert r.returncode == 0 and r.stdout.strip() == path, r.stderr
    assert len(hits) == 1, hits


def test_a_wrong_hash_stops_the_fetch(release, tmp_path):
    url, sha, hits = release
    out = tmp_path / "cache"
    wrong = hashlib.sha256(b"not the asset").hexdigest()
    r = run([FETCH, str(out)], url, wrong)
    assert r.returncode != 0
    assert f"has sha256:{sha}, not the pinned sha256:{wrong}" in r.stderr, r.stderr
    assert hits, "the asset was never downloaded"
    assert os.listdir(out) == [], "a refused download left something behind"


def test_no_hash_no_kube_router_image(release, tmp_path):
    url, _, hits = release
    r = run([FETCH, str(tmp_path / "cache")], url, "")
    assert r.returncode != 0
    assert "no SHA-256 for kube-router" in r.stderr and "refusing" in r.stderr, r.stderr
    assert "checksums.txt" in r.stderr, "the message says where the hash comes from"
    assert hits == []


@pytest.mark.parametrize("recipe", [["lean.sh"], ["debian.sh"]])
def test_a_recipe_checks_kube_router_before_anything_else(release, tmp_path, recipe):
    """KUBE_ROUTER=1 with a wrong hash: the recipe stops at the download,
    before any root file system, package or disk exists in its output."""
    url, _, hits = release
    out = tmp_path / "out"
    wrong = hashlib.sha256(b"not the asset").hexdigest()
    r = run([os.path.join(ROOT, "image-build", recipe[0]), str(out)], url, wrong,
            extra_env={"KUBE_ROUTER": "1"})
    assert r.returncode != 0
    assert "refusing it" in r.stderr, r.stderr
    assert hits, "the recipe never fetched kube-router"
    left = os.listdir(out) if out.exists() else []
    assert [f for f in left if not f.startswith(".kube-router")] == [], left
