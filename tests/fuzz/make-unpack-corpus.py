#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Write the seed corpus of fuzz-unpack into tests/fuzz/corpus/unpack/.

Each seed is a small tar: valid layers that reach every entry type and
whiteout form, and the hostile cases the unpacker must refuse. The harness
picks FLAT or OVERLAY by the low bit of the first byte, so every seed starts
with an entry for the root: "./" (0x2e, FLAT) or "/" (0x2f, OVERLAY).

The harness keeps a sentinel directory next to the root (root/../sentinel
holds "file"); hostile seeds aim at it with relative escapes, so that a bug
shows up as a changed sentinel rather than as damage to this machine.

Run: /usr/bin/python3 tests/fuzz/make-unpack-corpus.py
"""
import io
import os
import tarfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "unpack")
MTIME = 1600000000


def ti(name, kind="f", data=b"", mode=None, link="", uid=0, gid=0, pax=None,
       dev=(0, 0)):
    t = tarfile.TarInfo(name)
    t.type = {
        "f": tarfile.REGTYPE,
        "d": tarfile.DIRTYPE,
        "l": tarfile.SYMTYPE,
        "h": tarfile.LNKTYPE,
        "c": tarfile.CHRTYPE,
        "b": tarfile.BLKTYPE,
        "p": tarfile.FIFOTYPE,
    }[kind]
    t.mode = mode if mode is not None else (0o755 if kind == "d" else 0o644)
    t.uid, t.gid = uid, gid
    t.mtime = MTIME
    t.linkname = link
    t.devmajor, t.devminor = dev
    if pax:
        t.pax_headers = dict(pax)
    t.size = len(data) if kind == "f" else 0
    return t, (data if kind == "f" else None)


def tar(entries, overlay=False, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        root, _ = ti("/" if overlay else "./", "d")
        tf.addfile(root)
        for t, data in entries:
            tf.addfile(t, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def sparse():
    """A PAX 1.0 sparse file: the map (two regions) leads the data."""
    amap = b"2\n0\n4096\n524288\n4096\n"
    data = amap + b"\0" * (512 - len(amap)) + b"A" * 4096 + b"B" * 4096
    t, d = ti("GNUSparseFile.0/sparse", data=data, pax={
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": "sparse",
        "GNU.sparse.realsize": "1048576",
    })
    return t, d


def seeds():
    basic = [
        ti("etc", "d"),
        ti("etc/passwd", data=b"root:x:0:0:root:/root:/bin/sh\n"),
        ti("bin", "d"),
        ti("bin/su", data=b"\x7fELF", mode=0o4755, uid=0, gid=0),
        ti("home/user", "d", mode=0o700, uid=1000, gid=1000),
        ti("home/user/.profile", data=b"x", uid=1000, gid=1000),
        ti("bin/sh", "l", link="su"),
        ti("bin/ash", "h", link="bin/su"),
        ti("dev/null", "c", mode=0o666, dev=(1, 3)),
        ti("dev/loop0", "b", mode=0o660, dev=(7, 0)),
        ti("run/fifo", "p"),
        ti("tmp", "d", mode=0o1777),
        ti("abs", "l", link="/etc/passwd"),
        ti("/etc/absolute-entry", data=b"lands inside"),
    ]
    xattrs = [
        ti("x", data=b"x", pax={"SCHILY.xattr.user.foo": "bar",
                                "SCHILY.xattr.security.cell": "s"}),
        ti("forged", "d", pax={"SCHILY.xattr.trusted.overlay.opaque": "y"}),
        ti("redir", data=b"r",
           pax={"SCHILY.xattr.trusted.overlay.redirect": "/etc"}),
        ti("l", "l", link="x", pax={"SCHILY.xattr.user.l": "v"}),
    ]
    whiteouts = [
        ti("a", "d"),
        ti("a/keep", data=b"k"),
        ti("a/.wh..wh..opq"),
        ti("a/new", data=b"n"),
        ti(".wh.gone"),
        ti("b/.wh.c"),
        ti(".wh..wh.plnk", "d"),
        ti(".wh.y"),
        ti("y", data=b"replaces the whiteout"),
        ti("z", "d"),
        ti("z/inner", data=b"i"),
        ti("z", data=b"file replaces dir"),
        ti("w", data=b"w"),
        ti("w", "d"),
    ]
    long_name = "d/" + "n" * 200 + "/" + "m" * 200
    longs = [
        ti(long_name, data=b"long"),
        ti("longlink", "l", link="t" * 1000),
        ti("unicode-\u00e9\u4e2d", data=b"u"),
    ]
    return {
        "valid-basic": tar(basic),
        "valid-basic-overlay": tar(basic, overlay=True),
        "valid-xattrs": tar(xattrs, overlay=True),
        "valid-whiteouts-flat": tar(whiteouts),
        "valid-whiteouts-overlay": tar(whiteouts, overlay=True),
        "valid-sparse": tar([sparse()]),
        "valid-long-names-gnu": tar(longs, fmt=tarfile.GNU_FORMAT),
        "hostile-dotdot": tar([ti("../sentinel/evil", data=b"e")]),
        "hostile-dotdot-middle": tar([ti("a/../../sentinel/evil", data=b"e")],
                                     overlay=True),
        "hostile-symlink-then-write": tar([
            ti("link", "l", link="../sentinel"),
            ti("link/evil", data=b"e")]),
        "hostile-symlink-climb": tar([
            ti("link", "l", link="a/../../sentinel"),
            ti("a", "d"),
            ti("link/evil", "d")], overlay=True),
        "hostile-hardlink-outside": tar([
            ti("h", "h", link="../sentinel/file")]),
        "hostile-hardlink-via-symlink": tar([
            ti("link", "l", link="../sentinel"),
            ti("h", "h", link="link/file")], overlay=True),
        "hostile-hardlink-dir": tar([ti("d", "d"), ti("h", "h", link="d")]),
        "hostile-whiteout-dots": tar([
            ti("dir", "d"), ti("dir/.wh.."), ti(".wh..."), ti(".wh..")]),
        "hostile-whiteout-via-symlink": tar([
            ti("link", "l", link="../sentinel"),
            ti("link/.wh.file")]),
        "hostile-opaque-via-symlink": tar([
            ti("link", "l", link="../sentinel"),
            ti("link/.wh..wh..opq")], overlay=True),
        "hostile-symlink-replaces-dir": tar([
            ti("d", "d"),
            ti("d/f", data=b"f"),
            ti("d", "l", link="../sentinel"),
            ti("d/evil", data=b"e")]),
        "hostile-root-as-symlink": tar([ti(".", "l", link="../sentinel")]),
        "hostile-truncated": tar(basic)[:1800],
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in sorted(seeds().items()):
        with open(os.path.join(OUT, name + ".tar"), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(seeds()), OUT))


if __name__ == "__main__":
    main()
