# SPDX-License-Identifier: Apache-2.0
"""The lazy layer's FUSE server (imagepull/lazyfs.c, the kernel's protocol
over /dev/fuse) at the edges a user can reach: names of 255 bytes and names
longer than any in the layer, a directory read in many READDIR calls,
xattr buffers of size 0, too small and exact, a read larger than one
request, writes refused, many readers served while one read waits on a
held registry reply, and the server's end when its mount is taken away."""
from __future__ import annotations

import concurrent.futures
import ctypes
import errno
import os
import subprocess
import threading
import time

import pytest

from conftest import is_mountpoint
from estargz import EstargzLayer, annotate
from images import Dir, File, Image, Opaque, push, _prng
from test_pull_lazy import lazy, stop  # noqa: F401 (a fixture)

LONG = "n" * 255
MANY = 1500
BIG = _prng(b"lazy-fuse-big", 3 << 20)

libc = ctypes.CDLL(None, use_errno=True)
libc.getxattr.restype = libc.listxattr.restype = ctypes.c_ssize_t
libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p,
                          ctypes.c_size_t]
libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]


def getxattr(path: str, name: str, size: int):
    """getxattr(2) with a buffer of exactly size bytes: (ret, errno, bytes)."""
    buf = ctypes.create_string_buffer(max(size, 1))
    r = libc.getxattr(path.encode(), name.encode(), buf if size else None, size)
    return r, (ctypes.get_errno() if r < 0 else 0), buf.raw[:max(r, 0)]


def listxattr(path: str, size: int):
    buf = ctypes.create_string_buffer(max(size, 1))
    r = libc.listxattr(path.encode(), buf if size else None, size)
    return r, (ctypes.get_errno() if r < 0 else 0), buf.raw[:max(r, 0)]


def many_name(i: int) -> str:
    return f"entry-{i:05d}-" + "x" * 180


def edge_layer() -> EstargzLayer:
    return EstargzLayer(
        [File(LONG, "long name\n"), Dir("many"),
         *[File(f"many/{many_name(i)}", f"{i}\n") for i in range(MANY)],
         Dir("o"), Opaque("o"),
         File("attrs", "x", pax={"SCHILY.xattr.user.a": "1",
                                 "SCHILY.xattr.user.big": "v" * 3000}),
         File("big", BIG)],
        chunk_size=256 << 10)


@pytest.fixture
def edge(registry, lazy, tmp_path):  # noqa: F811
    layer = edge_layer()
    img = Image([layer], fmt="oci", mutate_manifest=annotate([layer]))
    push(registry, "lazy/edge", "v1", img)
    mp, p = lazy(registry, registry.ref("lazy/edge", "v1"), layer,
                 str(tmp_path / "w"))
    yield mp, p
    if p.poll() is None:
        stop(p, mp)


def test_lazy_fuse_names_and_a_large_directory(edge):
    mp, _ = edge
    assert open(os.path.join(mp, LONG)).read() == "long name\n"
    assert LONG in os.listdir(mp)
    # longer than any name of the layer, past NAME_MAX: not found (and a
    # negative entry cached: asked again, the same); the longest a path
    # may hold, not found or too long (the kernel's FUSE limit)
    for n in ("m" * 256, "m" * 1024):
        for _ in range(2):
            with pytest.raises(FileNotFoundError):
                os.stat(os.path.join(mp, n))
    with pytest.raises(OSError) as ei:
        os.stat(os.path.join(mp, "m" * 4000))
    assert ei.value.errno in (errno.ENOENT, errno.ENAMETOOLONG)
    # about 300 KiB of entries: many READDIR calls, each resuming at the
    # offset the last entry of the one before gave
    with os.scandir(os.path.join(mp, "many")) as it:
        got = [(e.name, e.inode(), e.is_file(follow_symlinks=False)) for e in it]
    names = [g[0] for g in got]
    assert len(names) == len(set(names)) == MANY
    assert sorted(names) == sorted(many_name(i) for i in range(MANY))
    assert all(is_file for _, _, is_file in got)
    for name, ino, _ in got[::97]:
        assert os.stat(os.path.join(mp, "many", name)).st_ino == ino
    i = 1234
    assert open(os.path.join(mp, "many", many_name(i))).read() == f"{i}\n"


def test_lazy_fuse_xattr_buffers(edge):
    mp, _ = edge
    a = os.path.join(mp, "attrs")
    assert getxattr(a, "user.big", 0)[:2] == (3000, 0)
    assert getxattr(a, "user.big", 2999)[:2] == (-1, errno.ERANGE)
    assert getxattr(a, "user.big", 3000) == (3000, 0, b"v" * 3000)
    assert getxattr(a, "user.none", 64)[:2] == (-1, errno.ENODATA)
    want = b"user.a\0user.big\0"
    assert listxattr(a, 0)[:2] == (len(want), 0)
    assert listxattr(a, len(want) - 1)[:2] == (-1, errno.ERANGE)
    r, _, names = listxattr(a, len(want))
    assert r == len(want) and sorted(names.split(b"\0")) == sorted(want.split(b"\0"))
    o = os.path.join(mp, "o")
    assert getxattr(o, "trusted.overlay.opaque", 1) == (1, 0, b"y")
    assert getxattr(o, "trusted.overlay.opaque", 0)[:2] == (1, 0)
    assert listxattr(os.path.join(mp, LONG), 0)[:2] == (0, 0)


def test_lazy_fuse_big_reads_and_writes_refused(edge):
    mp, _ = edge
    fd = os.open(os.path.join(mp, "big"), os.O_RDONLY)
    try:
        assert os.pread(fd, len(BIG), 0) == BIG  # more than one READ
        assert os.pread(fd, 10, len(BIG) - 4) == BIG[-4:]
        assert os.pread(fd, 10, len(BIG) + 100) == b""
    finally:
        os.close(fd)
    for f in (lambda: os.open(os.path.join(mp, "big"), os.O_WRONLY),
              lambda: os.mkdir(os.path.join(mp, "new")),
              lambda: os.setxattr(os.path.join(mp, "attrs"), "user.b", b"1"),
              lambda: os.unlink(os.path.join(mp, "attrs"))):
        with pytest.raises(OSError) as ei:
            f()
        assert ei.value.errno == errno.EROFS
    st = os.statvfs(mp)
    assert st.f_namemax == 255


def test_lazy_fuse_readers_go_on_while_one_read_waits(registry, make_proxy, lazy,  # noqa: F811
                                                      tmp_path):
    """One read waits on a held range request; a crowd of readers (each
    its own chunk, so each its own request) and lookups are answered
    meanwhile, by the server's other threads."""
    small = [File(f"s{i}", f"small {i}\n" * 100) for i in range(24)]
    layer = EstargzLayer([File("held", BIG[:100_000]), *small])
    img = Image([layer], fmt="oci", mutate_manifest=annotate([layer]))
    push(registry, "lazy/crowd", "v1", img)
    proxy = make_proxy(registry)
    mp, p = lazy(registry, f"{proxy.host}/lazy/crowd:v1", layer, str(tmp_path / "w"),
                 host=proxy.host, env={"CELL_PULL_RANGE_TIMEOUT_MS": "60000"})
    rule = proxy.hold("/blobs/", times=1)
    held = {}

    def read_held():
        held["data"] = open(os.path.join(mp, "held"), "rb").read()
    t = threading.Thread(target=read_held, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while rule.hits == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rule.hits == 1, "the held read never reached the registry"

        def read_small(i: int) -> bool:
            os.stat(os.path.join(mp, f"s{i}"))
            return open(os.path.join(mp, f"s{i}")).read() == f"small {i}\n" * 100
        with concurrent.futures.ThreadPoolExecutor(len(small)) as ex:
            assert all(ex.map(read_small, range(len(small)), timeout=30))
        assert sorted(os.listdir(mp)) == sorted(["held", *(f"s{i}" for i in range(24))])
        assert t.is_alive() and "data" not in held
    finally:
        rule.release()
    t.join(60)
    assert held.get("data") == BIG[:100_000]
    stop(p, mp)


def test_lazy_fuse_server_ends_with_its_mount(edge):
    """Unmounted from outside (as the gc detaches it), the server sees the
    connection end and exits cleanly."""
    mp, p = edge
    subprocess.run(["umount", "-l", mp], check=True)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err.decode(errors="replace")[-2000:]
    assert not is_mountpoint(mp)
