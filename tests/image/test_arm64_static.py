# SPDX-License-Identifier: Apache-2.0
"""The arm64 static binaries (`make static ARCH=arm64`, build-static-arm64/)
on this amd64 machine, through qemu-user (qemu-aarch64-static run by
hand: no binfmt registration is assumed): each is a static aarch64 ELF
with no interpreter and answers --help; cell-pull, which sees an aarch64
machine under qemu-user (uname -m), takes linux/arm64/v8 from a multi-arch
index by default and refuses an amd64-only image, naming its platforms.
`make arm64-static-test` (part of `make image-test`)."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess

import pytest

from conftest import ROOT
from images import Index, platform_image, push

BUILD = os.environ.get("CELL_STATIC_ARM64_BUILD") or os.path.join(ROOT, "build-static-arm64")
QEMU = shutil.which("qemu-aarch64-static")
BINARIES = ["cell-agent", "cell-boot", "cell-cloudinit", "cell-monitor", "cell-net",
            "cell-pull", "cell-pull-cached", "cell-unpack", "cellctl"]
EM_AARCH64 = 183
PT_INTERP = 3


def binary(name: str) -> str:
    path = os.path.join(BUILD, "bin", name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} missing: run make static ARCH=arm64", pytrace=False)
    if not QEMU:
        pytest.fail("qemu-aarch64-static missing: run scripts/deps.sh", pytrace=False)
    return path


def elf_facts(path: str) -> tuple:
    """(e_machine, has PT_INTERP) of a 64-bit little-endian ELF."""
    with open(path, "rb") as f:
        head = f.read(64)
        assert head[:4] == b"\x7fELF" and head[4] == 2 and head[5] == 1, path
        machine = struct.unpack_from("<H", head, 18)[0]
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        interp = False
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            if struct.unpack("<I", f.read(4))[0] == PT_INTERP:
                interp = True
    return machine, interp


@pytest.mark.parametrize("name", BINARIES)
def test_static_aarch64_binary_answers_help(name):
    path = binary(name)
    assert elf_facts(path) == (EM_AARCH64, False), name
    out = subprocess.run(["file", "-b", path], capture_output=True, text=True).stdout
    assert "ARM aarch64" in out and "statically linked" in out, out
    if name == "cell-pull-cached":
        return  # its --help execs cell-pull (no binfmt here)
    r = subprocess.run([QEMU, path, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 2), (name, r.stderr)  # 2: usage on stderr
    assert "usage" in (r.stdout + r.stderr).lower(), (name, r.stdout, r.stderr)


def test_arm64_pull_takes_arm64_from_an_index(tmp_path, registry):
    pull = binary("cell-pull")
    push(registry, "t/multi", "v1", Index([platform_image("linux", "amd64"),
                                           platform_image("linux", "arm64", "v8"),
                                           platform_image("linux", "arm", "v7")]))
    push(registry, "t/amd", "v1", Index([platform_image("linux", "amd64")]))

    def run(ref, dest):
        return subprocess.run(
            [QEMU, pull, "--image", registry.ref(ref, "v1"), "--extract-to", str(dest),
             "--workdir", str(tmp_path / "work"), "--insecure-registry", registry.host],
            capture_output=True, text=True, timeout=300)
    r = run("t/multi", tmp_path / "root")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "root" / "platform").read_text() == "linux/arm64/v8\n"
    r = run("t/amd", tmp_path / "root2")
    assert r.returncode == 1
    assert "no image for platform linux/arm64/v8" in r.stderr, r.stderr
    assert "available: linux/amd64" in r.stderr, r.stderr
