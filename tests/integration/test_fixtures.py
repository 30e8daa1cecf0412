# SPDX-License-Identifier: Apache-2.0
"""Checks of the test fixtures themselves, against independent clients.

The pull tests trust tests/pylib: the image builder, the registry wrapper,
the token server, the proxy and the PKI. Here each is checked with tools
that are not cell-pull: skopeo (copy to an OCI layout, with credentials),
umoci (raw unpack = the reference flattening), curl, openssl and plain
HTTP requests. None of these tests needs the cell-pull binary.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import socket
import stat
import subprocess
import tarfile
import time

import pytest
import requests

import images as im
from images import (Dir, File, Hardlink, Image, Index, Layer, Opaque, Raw, Symlink,
                    Whiteout, CharDev, BlockDev, Fifo, busybox_layer, platform_image,
                    push, pusher_for, sha256_digest, tree_listing)
from registry import skopeo_copy_to_oci, umoci_raw_unpack
import pki
from tokenserver import TokenServer

RUN_TIMEOUT = 60


def sh(*cmd, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", RUN_TIMEOUT)
    return subprocess.run(list(cmd), capture_output=True, text=True, **kw)


def unpack_with_umoci(registry, ref, tmp_path, tag="t", creds=None, extra=()):
    oci = str(tmp_path / "oci")
    out = str(tmp_path / f"rootfs-{tag}")
    skopeo_copy_to_oci(ref, oci, tag, creds=creds, extra=extra)
    umoci_raw_unpack(oci, tag, out)
    return out


# ---- the image builder, through skopeo + umoci ----

def test_busybox_image_unpacks_and_runs(registry, tmp_path):
    img = Image([busybox_layer()], config={"Cmd": ["/bin/sh"]})
    digest = push(registry, "fx/busybox", "v1", img)
    assert digest == img.manifest_digest
    root = unpack_with_umoci(registry, registry.ref("fx/busybox", "v1"), tmp_path)
    st = os.stat(os.path.join(root, "bin/busybox"))
    assert stat.S_ISREG(st.st_mode) and st.st_mode & 0o111
    assert os.readlink(os.path.join(root, "bin/sh")) == "busybox"
    assert stat.S_IMODE(os.stat(os.path.join(root, "tmp")).st_mode) == 0o1777
    p = sh("chroot", root, "/bin/busybox", "echo", "hi")
    assert p.returncode == 0 and p.stdout == "hi\n", p.stderr
    p = sh("chroot", root, "/bin/sh", "-c", "echo $((6*7))")
    assert p.stdout == "42\n", p.stderr


@pytest.mark.parametrize("fmt", ["docker", "oci"])
def test_manifest_and_config_served_verbatim(registry, fmt):
    img = Image([busybox_layer(), Layer([File("a", "b")], "none")],
                config={"Env": ["A=1"], "Entrypoint": ["/bin/sh"], "Cmd": ["-c", "true"],
                        "WorkingDir": "/tmp", "User": "65534:65534"}, fmt=fmt)
    push(registry, "fx/fmt", fmt, img)
    r = requests.get(f"{registry.url}/v2/fx/fmt/manifests/{fmt}", timeout=10,
                     headers={"Accept": img.media_type})
    assert r.status_code == 200
    assert r.headers["Content-Type"] == img.media_type
    assert r.content == img.manifest_bytes
    assert r.headers["Docker-Content-Digest"] == img.manifest_digest
    man = r.json()
    cfg = requests.get(f"{registry.url}/v2/fx/fmt/blobs/{man['config']['digest']}", timeout=10)
    assert sha256_digest(cfg.content) == img.config_digest
    c = json.loads(cfg.content)
    assert c["rootfs"]["diff_ids"] == [l.diff_id for l in img.layers]
    assert c["config"]["User"] == "65534:65534" and c["os"] == "linux"
    for desc, layer in zip(man["layers"], img.layers):
        b = requests.get(f"{registry.url}/v2/fx/fmt/blobs/{desc['digest']}", timeout=10)
        assert sha256_digest(b.content) == desc["digest"] and len(b.content) == desc["size"]


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
def test_layer_compression_roundtrip(compression):
    layer = Layer([Dir("d"), File("d/f", b"x" * 10000)], compression)
    assert sha256_digest(layer.blob) == layer.digest
    if compression == "gzip":
        raw = gzip.decompress(layer.blob)
    elif compression == "zstd":
        assert layer.blob[:4] == b"\x28\xb5\x2f\xfd"
        raw = subprocess.run(["zstd", "-d", "-c"], input=layer.blob, capture_output=True,
                             check=True, timeout=RUN_TIMEOUT).stdout
    else:
        raw = layer.blob
    assert sha256_digest(raw) == layer.diff_id
    with tarfile.open(fileobj=io.BytesIO(raw)) as tf:
        assert tf.getnames() == ["d", "d/f"]


@pytest.mark.parametrize("compression", ["gzip", "none"])
def test_compressed_layers_unpack_with_umoci(registry, tmp_path, compression):
    # (umoci 0.4.7 cannot read zstd layers; zstd is checked by decompression above.)
    img = Image([busybox_layer(), Layer([File("hello", "hi\n")], compression)], fmt="oci")
    push(registry, "fx/comp", compression, img)
    root = unpack_with_umoci(registry, registry.ref("fx/comp", compression), tmp_path)
    assert open(os.path.join(root, "hello")).read() == "hi\n"


def test_index_platforms_with_skopeo(registry, tmp_path):
    idx = Index([platform_image("linux", "amd64"), platform_image("linux", "arm64", "v8"),
                 platform_image("linux", "arm", "v7")])
    assert push(registry, "fx/multi", "latest", idx) == idx.manifest_digest
    r = requests.get(f"{registry.url}/v2/fx/multi/manifests/latest", timeout=10,
                     headers={"Accept": im.MT_OCI_INDEX})
    assert r.headers["Content-Type"] == im.MT_OCI_INDEX
    assert len(r.json()["manifests"]) == 3
    ref = registry.ref("fx/multi", "latest")
    root = unpack_with_umoci(registry, ref, tmp_path, "arm64",
                             extra=["--override-arch", "arm64", "--override-variant", "v8"])
    assert open(os.path.join(root, "platform")).read() == "linux/arm64/v8\n"
    root = unpack_with_umoci(registry, ref, tmp_path, "arm",
                             extra=["--override-arch", "arm", "--override-variant", "v7"])
    assert open(os.path.join(root, "platform")).read() == "linux/arm/v7\n"
    root = unpack_with_umoci(registry, ref, tmp_path, "default")
    assert open(os.path.join(root, "platform")).read() == "linux/amd64\n"


def test_docker_manifest_list_with_skopeo(registry, tmp_path):
    lst = Index([platform_image("linux", "amd64", fmt="docker"),
                 platform_image("linux", "arm64", "v8", fmt="docker")], fmt="docker")
    push(registry, "fx/dlist", "latest", lst)
    r = requests.get(f"{registry.url}/v2/fx/dlist/manifests/latest", timeout=10,
                     headers={"Accept": im.MT_DOCKER_LIST})
    assert r.headers["Content-Type"] == im.MT_DOCKER_LIST
    root = unpack_with_umoci(registry, registry.ref("fx/dlist", "latest"), tmp_path, "a",
                             extra=["--override-arch", "arm64"])
    assert open(os.path.join(root, "platform")).read() == "linux/arm64/v8\n"


def test_entry_kinds_and_whiteouts_with_umoci(registry, tmp_path):
    l1 = Layer([
        Dir("a"), File("a/keep", "k"), File("a/gone", "g"), Dir("d"), File("d/old", "o"),
        Dir("d/sub"), File("d/sub/x", "x"), File("suid", "s", mode=0o4755),
        File("owned", "o", uid=1234, gid=5678, mode=0o600),
        CharDev("null", 1, 3), BlockDev("blk", 7, 200), Fifo("pipe"),
        Symlink("abs", "/etc/passwd"), Symlink("rel", "a/keep"),
        File("h1", "same inode"), Hardlink("h2", "h1"),
    ])
    l2 = Layer([Whiteout("a/gone"), Opaque("d"), File("d/new", "n"), Whiteout("rel")])
    img = Image([l1, l2])
    push(registry, "fx/kinds", "v1", img)
    root = unpack_with_umoci(registry, registry.ref("fx/kinds", "v1"), tmp_path)
    L = tree_listing(root)
    assert "a/keep" in L and "a/gone" not in L and "rel" not in L
    assert "d/new" in L and "d/old" not in L and "d/sub" not in L
    assert L["suid"][1] == oct(0o4755)
    assert L["owned"][2:4] == (1234, 5678) and L["owned"][1] == oct(0o600)
    assert L["null"][0] == "char" and L["null"][6] == (1, 3)
    assert L["blk"][0] == "block" and L["blk"][6] == (7, 200)
    assert L["pipe"][0] == "fifo"
    assert L["abs"][5] == "/etc/passwd"
    assert os.stat(os.path.join(root, "h1")).st_ino == os.stat(os.path.join(root, "h2")).st_ino
    assert not any(".wh." in k for k in L)


def test_raw_hostile_names_are_verbatim():
    layer = Layer([Raw("../evil", content="x"), Raw("a/../../evil"),
                   Raw("up", "symlink", linkname="../../.."), Raw("up/evil", content="y"),
                   Raw("hl", "hardlink", linkname="../../outside"), Raw(".wh..")], "none")
    with tarfile.open(fileobj=io.BytesIO(layer.tar)) as tf:
        ms = tf.getmembers()
    assert [m.name for m in ms] == ["../evil", "a/../../evil", "up", "up/evil", "hl", ".wh.."]
    assert ms[2].issym() and ms[2].linkname == "../../.."
    assert ms[4].islnk() and ms[4].linkname == "../../outside"


# ---- the registry wrapper ----

def test_registry_log_restart_and_ranged_get(registry):
    data = os.urandom(300_000)
    p = pusher_for(registry)
    digest = p.push_blob("fx/log", data)
    url = f"{registry.url}/v2/fx/log/blobs/{digest}"
    mark = registry.mark()
    assert requests.get(url, timeout=10).content == data
    r = requests.get(url, headers={"Range": "bytes=1000-"}, timeout=10)
    assert r.status_code == 206 and r.content == data[1000:]
    gets = registry.blob_gets(digest, since=mark)
    assert [(g.status, g.size) for g in gets] == [(200, 300_000), (206, 299_000)]
    assert [g.ranged for g in gets] == [False, True]
    assert registry.request_lines(mark)[1].endswith("[ranged]")
    assert "response completed" in registry.app_log()
    port, before = registry.port, registry.mark()
    registry.stop()
    with pytest.raises(requests.ConnectionError):
        requests.get(url, timeout=2)
    registry.start()
    assert registry.port == port and registry.starts == 2
    assert requests.get(url, timeout=10).content == data  # same storage
    assert registry.mark() == before + 2  # log kept across restarts (/v2/ + GET)


def test_registry_stop_cuts_a_blob_mid_stream(registry):
    data = os.urandom(20 << 20)
    digest = pusher_for(registry).push_blob("fx/cut", data)
    url = f"{registry.url}/v2/fx/cut/blobs/{digest}"
    got = 0
    # A slow reader: the registry blocks on the socket once buffers fill.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.settimeout(10)
        s.connect(("127.0.0.1", registry.port))
        s.sendall(f"GET /v2/fx/cut/blobs/{digest} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        got += len(s.recv(65536))
        registry.stop()
        time.sleep(0.2)
        try:
            while True:
                b = s.recv(1 << 20)
                if not b:
                    break
                got += len(b)
        except ConnectionResetError:
            pass
    assert got < len(data)  # cut off
    registry.start()
    r = requests.get(url, headers={"Range": f"bytes={got - 500}-"}, timeout=10)
    assert r.status_code == 206 and r.content == data[got - 500:]
    assert registry.blob_gets(digest)[-1].ranged


def test_registry_corrupt_blob_serves_wrong_bytes(registry):
    data = os.urandom(5000)
    digest = pusher_for(registry).push_blob("fx/bad", data)
    registry.corrupt_blob(digest)
    r = requests.get(f"{registry.url}/v2/fx/bad/blobs/{digest}", timeout=10)
    assert r.status_code == 200 and len(r.content) == len(data)
    assert sha256_digest(r.content) != digest


def test_registry_accepts_wrong_descriptor_size(registry):
    img = Image([busybox_layer(), Layer([File("x", "y")])],
                mutate_manifest=im.wrong_size(1, -5))
    push(registry, "fx/size", "v1", img)
    man = requests.get(f"{registry.url}/v2/fx/size/manifests/v1", timeout=10,
                       headers={"Accept": img.media_type}).json()
    assert man["layers"][1]["size"] == img.layers[1].size - 5


def test_htpasswd_registry(make_registry, tmp_path):
    reg = make_registry(htpasswd={"bob": "builder"})
    r = requests.get(reg.url + "/v2/", timeout=10)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Basic ")
    assert requests.get(reg.url + "/v2/", auth=("bob", "builder"), timeout=10).status_code == 200
    push(reg, "fx/basic", "v1", Image([busybox_layer()]))
    root = unpack_with_umoci(reg, reg.ref("fx/basic", "v1"), tmp_path, creds="bob:builder")
    assert os.path.exists(os.path.join(root, "bin/busybox"))
    with pytest.raises(RuntimeError, match="(?i)unauthorized|401"):
        skopeo_copy_to_oci(reg.ref("fx/basic", "v1"), str(tmp_path / "oci2"), "x",
                           creds="bob:wrong")


# ---- the token server ----

@pytest.mark.parametrize("key_mode", ["x5c", "kid"])
def test_token_auth_with_skopeo_and_curl(make_registry, tmp_path, key_mode):
    ts = TokenServer(str(tmp_path / "tokens"), {"alice": "wonderland"}, key_mode=key_mode)
    try:
        reg = make_registry(token=ts)
        img = Image([busybox_layer(), Layer([File("f", "1")]), Layer([File("g", "2")])])
        push(reg, "fx/tok", "v1", img)
        assert ts.count("repository:fx/tok:pull,push") >= 1, ts.requests
        ts.reset()
        root = unpack_with_umoci(reg, reg.ref("fx/tok", "v1"), tmp_path, creds="alice:wonderland")
        assert open(os.path.join(root, "g")).read() == "2"
        # skopeo caches its token: one request for the one scope, not one per blob.
        assert ts.count() == 1 and ts.scopes_seen() == [["repository:fx/tok:pull"]]
        with pytest.raises(RuntimeError, match="(?i)unauthorized|invalid username"):
            skopeo_copy_to_oci(reg.ref("fx/tok", "v1"), str(tmp_path / "oci2"), "x",
                               creds="alice:wrong")

        # The raw flow with curl: challenge → token → authorized GET.
        p = sh("curl", "-s", "-i", f"{reg.url}/v2/fx/tok/manifests/v1")
        assert " 401 " in p.stdout.splitlines()[0]
        assert (f'Bearer realm="{ts.realm}",service="{ts.service}",'
                f'scope="repository:fx/tok:pull"') in p.stdout
        p = sh("curl", "-s", "-u", "alice:wonderland",
               f"{ts.realm}?service={ts.service}&scope=repository:fx/tok:pull")
        body = json.loads(p.stdout)
        assert body["token"] == body["access_token"] and body["expires_in"] > 0
        hdr = json.loads(base64.urlsafe_b64decode(body["token"].split(".")[0] + "=="))
        assert hdr["alg"] == "ES256" and (("x5c" in hdr) if key_mode == "x5c" else ("kid" in hdr))
        p = sh("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
               "-H", f"Authorization: Bearer {body['token']}",
               "-H", f"Accept: {img.media_type}", f"{reg.url}/v2/fx/tok/manifests/v1")
        assert p.stdout == "200"
        # The registry really checks tokens: wrong issuer, wrong audience,
        # expired, or a scope for another repository are all refused.
        good = [{"type": "repository", "name": "fx/tok", "actions": ["pull"]}]
        bad = [ts.make_token("alice", good, issuer="someone-else"),
               ts.make_token("alice", good, audience="other-service"),
               ts.make_token("alice", good, expires_in=-600),
               ts.make_token("alice", [{"type": "repository", "name": "fx/other",
                                        "actions": ["pull"]}])]
        for tok in bad:
            r = requests.get(f"{reg.url}/v2/fx/tok/manifests/v1", timeout=10,
                             headers={"Authorization": "Bearer " + tok})
            assert r.status_code == 401
        # Wrong credentials and a wrong service are refused by the token server.
        assert requests.get(ts.realm, params={"service": ts.service},
                            auth=("alice", "nope"), timeout=10).status_code == 401
        assert requests.get(ts.realm, params={"service": "x"},
                            auth=("alice", "wonderland"), timeout=10).status_code == 400
        assert requests.get(ts.realm, params={"service": ts.service}, timeout=10).status_code == 401
        r = requests.post(ts.realm, data={"grant_type": "password", "username": "alice",
                                          "password": "wonderland", "service": ts.service,
                                          "scope": "repository:fx/tok:pull"}, timeout=10)
        assert r.status_code == 200 and "access_token" in r.json()
    finally:
        ts.close()


# ---- PKI and a TLS registry ----

def test_pki_and_tls_registry(make_registry, tmp_path):
    d = str(tmp_path / "pki")
    ca = pki.CA.create(d)
    srv = ca.issue_server(d, "registry")
    cli = ca.issue_client(d, "client")
    assert open(ca.key_path).read().startswith("-----BEGIN EC PRIVATE KEY-----")
    assert open(srv.key_path).read().startswith("-----BEGIN EC PRIVATE KEY-----")
    subj = sh("openssl", "x509", "-noout", "-subject", "-in", ca.cert_path).stdout
    assert "CN = Milpa Server CA" in subj and "O = Elotl" in subj and "OU = MilpaServer" in subj
    subj = sh("openssl", "x509", "-noout", "-subject", "-ext", "subjectAltName",
              "-in", srv.cert_path).stdout
    assert "CN = MilpaNode" in subj and "IP Address:127.0.0.1" in subj
    for leaf in (srv, cli):
        p = sh("openssl", "verify", "-CAfile", ca.cert_path, leaf.cert_path)
        assert p.returncode == 0, p.stdout + p.stderr
    assert "prime256v1" in sh("openssl", "ec", "-in", cli.key_path, "-noout", "-text").stdout

    reg = make_registry(tls=(srv.cert_path, srv.key_path), ca_file=ca.cert_path)
    assert reg.url.startswith("https://")
    push(reg, "fx/tls", "v1", Image([busybox_layer()]))
    p = sh("curl", "-s", "--cacert", ca.cert_path, f"{reg.url}/v2/_catalog")
    assert json.loads(p.stdout) == {"repositories": ["fx/tls"]}
    p = sh("curl", "-s", "-o", "/dev/null", f"{reg.url}/v2/")  # no CA: refused
    assert p.returncode != 0
    certs = tmp_path / "certs.d"
    certs.mkdir()
    (certs / "ca.crt").write_bytes(open(ca.cert_path, "rb").read())
    skopeo_copy_to_oci(reg.ref("fx/tls", "v1"), str(tmp_path / "oci"), "v1", tls_verify=True,
                       extra=["--src-cert-dir", str(certs)])


# ---- the proxy ----

def test_proxy_passthrough_corrupt_drop_and_range(registry, make_proxy):
    data = os.urandom(1 << 20)
    digest = pusher_for(registry).push_blob("fx/px", data)
    px = make_proxy(registry)
    url = f"{px.url}/v2/fx/px/blobs/{digest}"
    assert requests.get(url, timeout=10).content == data
    r = requests.get(url, headers={"Range": "bytes=10-"}, timeout=10)
    assert r.status_code == 206 and r.content == data[10:]
    assert px.requests(digest)[-1].range == "bytes=10-"
    assert requests.head(url, timeout=10).headers["Content-Length"] == str(len(data))

    px.corrupt(digest, offset=12345, times=1)
    body = requests.get(url, timeout=10).content
    assert len(body) == len(data) and sha256_digest(body) != digest
    assert body[:12345] == data[:12345] and body[12346:] == data[12346:]
    assert requests.get(url, timeout=10).content == data  # times=1

    px.drop_after(digest, 100_000)
    with pytest.raises((requests.exceptions.ChunkedEncodingError,
                        requests.exceptions.ConnectionError)):
        requests.get(url, timeout=10).content
    assert px.requests(digest)[-1].sent == 100_000
    assert requests.get(url, timeout=10).content == data

    px.status("/manifests/", 503, times=2)
    assert requests.get(f"{px.url}/v2/fx/px/manifests/x", timeout=10).status_code == 503
    px.replace("/blobs/" + digest, b"other bytes", times=1)
    assert requests.get(url, timeout=10).content == b"other bytes"

    # Upstream down: the client connection is closed without an answer.
    registry.stop()
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(url, timeout=10)
    registry.start()
    assert requests.get(url, timeout=10).content == data


def test_pki_reference_names_default(tmp_path):
    ca = pki.CA.create(str(tmp_path))
    leaf = ca.issue_server(str(tmp_path), "node")
    from cryptography.x509.oid import NameOID
    assert ca.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "Milpa Server CA"
    assert leaf.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "MilpaNode"
    assert leaf.cert.issuer == ca.cert.subject
