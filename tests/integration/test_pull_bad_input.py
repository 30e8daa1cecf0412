# SPDX-License-Identifier: Apache-2.0
"""cell-pull against bad input and bad conditions: full disks, oversized and
malformed documents from the registry, a registry that answers errors.

Each test checks the two halves of "a clear error and loses nothing": exit
1 with one 'cell-pull: ' line that says what went wrong, and no damage (a
flattened target emptied again, a cache that still serves the next pull).
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from images import Dir, File, Image, Layer, busybox_layer, push
from conftest import is_mountpoint
from test_pull import assert_busybox_works, assert_fails, assert_ok


def small_tmpfs(path, size: str, mounts) -> str:
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                   check=True)
    mounts.append(str(path))
    return str(path)


def big_image(mb: int) -> Image:
    blob = os.urandom(mb << 20)  # incompressible
    return Image([busybox_layer(), Layer([Dir("data"), File("data/big", blob)])],
                 config={"Cmd": ["/bin/sh"]})


def test_full_target_disk_is_reported_and_target_emptied(registry, pull, workdir, tmp_path,
                                                          mounts):
    push(registry, "t/big", "v1", big_image(6))
    small = small_tmpfs(tmp_path / "small", "4m", mounts)
    root = os.path.join(small, "rootfs")
    line = assert_fails(pull(registry, registry.ref("t/big", "v1"), root, workdir), 1,
                        "no space left")
    assert "data/big" in line or "layer" in line, line
    # The target was empty before; it is empty again (nothing half-written).
    assert os.listdir(root) == []
    # The cache is intact: the same image pulls fine into a roomy target.
    root2 = str(tmp_path / "rootfs2")
    assert_ok(pull(registry, registry.ref("t/big", "v1"), root2, workdir))
    assert os.path.getsize(os.path.join(root2, "data/big")) == 6 << 20


def test_full_cache_disk_is_reported_and_cache_still_works(registry, pull, run_pull, tmp_path,
                                                           mounts):
    push(registry, "t/small", "v1", Image([busybox_layer()]))
    push(registry, "t/big", "v1", big_image(12))
    cache = small_tmpfs(tmp_path / "cache", "10m", mounts)
    mnt = str(tmp_path / "mnt")
    assert_ok(pull(registry, registry.ref("t/small", "v1"), str(tmp_path / "r1"), cache))
    assert_fails(pull(registry, registry.ref("t/big", "v1"), mnt, cache, mode="--mount"), 1,
                 "no space left")
    assert not is_mountpoint(mnt)
    # Nothing half-done was committed: no layer dir for the big layer and no
    # blob of a size other than its digest's.
    assert_ok(run_pull("--gc", "--workdir", cache))
    assert os.listdir(os.path.join(cache, "tmp")) == []
    # What was cached before still serves a warm pull.
    r2 = str(tmp_path / "r2")
    before = registry.mark()
    assert_ok(pull(registry, registry.ref("t/small", "v1"), r2, cache))
    assert_busybox_works(r2)
    assert registry.blob_gets(since=before) == []


@pytest.mark.parametrize("what", ["manifest", "config"])
def test_oversized_documents_are_refused(registry, make_proxy, pull, workdir, tmp_path, what):
    img = Image([busybox_layer()], config={"Cmd": ["/bin/sh"]})
    push(registry, "t/huge", "v1", img)
    proxy = make_proxy(registry)
    # Well-formed JSON, far over the caps (4 MiB manifests, 8 MiB configs).
    filler = json.dumps({"schemaVersion": 2, "pad": "x" * (9 << 20)}).encode()
    match = "/manifests/v1" if what == "manifest" else img.config_digest
    proxy.replace(match, filler)
    root = str(tmp_path / "rootfs")
    assert_fails(pull(proxy.host, f"{proxy.host}/t/huge:v1", root, workdir), 1,
                 "limit", "too large", "exceeds")
    assert os.listdir(root) == [] if os.path.exists(root) else True


@pytest.mark.parametrize("body", [b"{", b"[]", b"{\"schemaVersion\": 2, \"layers\": 7}",
                                  b"\xff\xfe not json"],
                         ids=["truncated", "array", "wrong-type", "binary"])
def test_malformed_manifest_is_refused(registry, make_proxy, pull, workdir, tmp_path, body):
    push(registry, "t/bad", "v1", Image([busybox_layer()]))
    proxy = make_proxy(registry)
    proxy.replace("/manifests/v1", body)
    assert_fails(pull(proxy.host, f"{proxy.host}/t/bad:v1", str(tmp_path / "r"), workdir), 1,
                 "manifest")


def test_malformed_config_is_refused(registry, pull, workdir, tmp_path):
    # A config whose diff_ids do not match the layers: pushed for real, so
    # its digest is right and only the content is wrong.
    img = Image([busybox_layer()], config={"Cmd": ["/bin/sh"]},
                mutate_config=lambda c: c["rootfs"].update(diff_ids=[]))
    push(registry, "t/cfg", "v1", img)
    assert_fails(pull(registry, registry.ref("t/cfg", "v1"), str(tmp_path / "r"), workdir), 1,
                 "diff-id", "diff_id")


def test_blob_404_is_reported(registry, make_proxy, pull, workdir, tmp_path):
    img = Image([busybox_layer()])
    push(registry, "t/gone", "v1", img)
    proxy = make_proxy(registry)
    proxy.status(img.layers[0].digest, 404)
    assert_fails(pull(proxy.host, f"{proxy.host}/t/gone:v1", str(tmp_path / "r"), workdir,
                      "--retries", "1"), 1, "404")
    assert not os.path.exists(os.path.join(workdir, "blobs", "sha256", img.layers[0].hex))


def test_persistent_5xx_gives_up_with_the_status(registry, make_proxy, pull, workdir, tmp_path):
    push(registry, "t/busy", "v1", Image([busybox_layer()]))
    proxy = make_proxy(registry)
    proxy.status("/manifests/v1", 503)
    assert_fails(pull(proxy.host, f"{proxy.host}/t/busy:v1", str(tmp_path / "r"), workdir,
                      "--retries", "2", env={"CELL_PULL_RETRY_BASE_MS": "10"}), 1, "503")
    assert len(proxy.requests("/manifests/v1")) == 3  # one try plus two retries


def test_target_not_empty_is_refused_and_untouched(registry, pull, workdir, tmp_path):
    push(registry, "t/bb", "v1", Image([busybox_layer()]))
    root = tmp_path / "rootfs"
    root.mkdir()
    (root / "precious").write_text("keep me")
    assert_fails(pull(registry, registry.ref("t/bb", "v1"), str(root), workdir), 1, "not empty")
    assert (root / "precious").read_text() == "keep me"
    assert os.listdir(root) == ["precious"]
