# SPDX-License-Identifier: Apache-2.0
"""cell-agent: the smaller faults of issue 14, each of which failed before
its fix: negative `lines`/`bytes` (500 instead of 400), a relative
`file/?path=` (resolved against the agent's working directory), package
names of 243-253 characters (refused by the temporary directory's name,
against the documented limit of 253), and a deploy package whose gzip CRC
is wrong (extracted with the damaged bytes).
"""
from __future__ import annotations

import gzip
import io
import os
import struct
import tarfile
import zlib

import pytest

from wire import WireError, make_package


def status_of(client, method, path, **kw) -> int:
    try:
        client.request(method, path, **kw)
        return 200
    except WireError as e:
        return e.status


def test_negative_lines_and_bytes_are_400(client, tmp_path):
    p = tmp_path / "f"
    p.write_text("a\nb\n")
    for q in ("lines=-1", "bytes=-5", "lines=-1&bytes=-1", "lines=x",
              "bytes=99999999999999999999999"):
        assert status_of(client, "GET", f"rest/v1/file/?path={p}&{q}") == 400, q
        assert status_of(client, "GET", f"rest/v1/logs/nosuch?{q}") == 400, q
        # The controller's follow URL carries the query in the path.
        assert status_of(client, "GET", f"rest/v1/logs/nosuch%3F{q}") == 400, q
    assert client.file(str(p), lines=1) == b"b\n"


def test_file_path_must_be_absolute(agent, client):
    # The agent's working directory is wherever it was started from: a
    # relative path would read whatever is there.
    cwd = os.readlink(f"/proc/{agent.proc.pid}/cwd")
    name = "relative-probe-%d" % os.getpid()
    with open(os.path.join(cwd, name), "w") as f:
        f.write("must not be served\n")
    try:
        for rel in (name, "./" + name, "../" + os.path.basename(cwd) + "/" + name):
            with pytest.raises(WireError) as ei:
                client.request("GET", "rest/v1/file/", params={"path": rel})
            assert ei.value.status == 400 and "absolute" in ei.value.body, \
                (rel, ei.value.status, ei.value.body)
    finally:
        os.unlink(os.path.join(cwd, name))


def visible(d: str) -> list:
    """A package's top-level names, without the layout's ..data and
    versions (agent/pod/pkgswap.c)."""
    return sorted(n for n in os.listdir(d) if not n.startswith(".."))


@pytest.mark.parametrize("length", [1, 200, 242, 243, 250, 253])
def test_package_names_up_to_the_documented_limit(agent, client, length):
    name = ("p%d-" % length + "x" * 300)[:length]
    client.deploy("ns_pod", name, {"f": "v1\n"})
    with open(os.path.join(agent.packages, name, "f")) as f:
        assert f.read() == "v1\n"
    # A second deploy replaces it (in the same directory: the layout's
    # ..data link and one version beside the top-level names).
    client.deploy("ns_pod", name, {"g": "v2\n"})
    assert visible(os.path.join(agent.packages, name)) == ["g"]
    assert not [n for n in os.listdir(agent.packages) if n.startswith(".")]


def test_package_name_over_the_limit_is_400(client):
    with pytest.raises(WireError) as ei:
        client.deploy("ns_pod", "y" * 254, {"f": "x"})
    assert ei.value.status == 400


def stored_gzip(tar: bytes) -> bytes:
    """A gzip member with stored (uncompressed) deflate blocks: a flipped
    byte in the data is then caught by nothing but the CRC."""
    c = zlib.compressobj(0, zlib.DEFLATED, -15)
    body = c.compress(tar) + c.flush()
    head = b"\x1f\x8b\x08\x00" + b"\x00" * 4 + b"\x00\xff"
    return head + body + struct.pack("<II", zlib.crc32(tar), len(tar) & 0xffffffff)


def plain_tar(files: dict) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tf:
        for path, data in files.items():
            ti = tarfile.TarInfo("ROOTFS/" + path)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return out.getvalue()


def test_gzip_crc_is_checked(agent, client):
    tar = plain_tar({"data": b"the right bytes\n" * 64})
    good = stored_gzip(tar)
    assert gzip.decompress(good) == tar
    client.deploy("ns_pod", "crcvol", good)
    root = os.path.join(agent.packages, "crcvol")
    with open(os.path.join(root, "data"), "rb") as f:
        assert f.read() == b"the right bytes\n" * 64
    # One byte of file content flipped: the deflate stream stays valid.
    i = good.index(b"the right bytes")
    bad = good[:i] + b"T" + good[i + 1:]
    with pytest.raises(WireError) as ei:
        client.deploy("ns_pod", "crcvol", bad)
    assert ei.value.status == 400 and "gzip" in ei.value.body, ei.value.body
    # The old package is untouched, and nothing half-extracted is left.
    with open(os.path.join(root, "data"), "rb") as f:
        assert f.read() == b"the right bytes\n" * 64
    with pytest.raises(WireError) as ei:
        client.deploy("ns_pod", "crcnew", bad)
    assert ei.value.status == 400
    assert not os.path.exists(os.path.join(agent.packages, "crcnew"))
    assert not [n for n in os.listdir(agent.packages) if n.startswith(".")]
    # Only the trailer wrong (CRC, then length): refused as well.
    for off in (-8, -4):
        t = bytearray(good)
        t[off] ^= 0xff
        with pytest.raises(WireError) as ei:
            client.deploy("ns_pod", "crcvol", bytes(t))
        assert ei.value.status == 400, off
    # Truncated inside the deflate data.
    with pytest.raises(WireError) as ei:
        client.deploy("ns_pod", "crcvol", good[:len(good) // 2])
    assert ei.value.status == 400
    # Two members, as `cat a.gz b.gz` makes: each is checked and both count.
    half = len(tar) // 2
    two = gzip.compress(tar[:half]) + gzip.compress(tar[half:])
    client.deploy("ns_pod", "crcvol", two)
    # A normal package from the usual writer still works.
    client.deploy("ns_pod", "crcvol", make_package({"ok": "1\n"}))
    assert visible(root) == ["ok"]
