#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Write the seed corpus of fuzz-deploy into tests/fuzz/corpus/deploy/.

Each seed is a deploy package as Kip uploads one: a tar (gzip'd, as Kip
sends it, or plain) whose entries under ROOTFS/ are the package. Good
packages reach every entry type and rule (set-id bits, 0555 directories,
ROOTFS/ link targets, hardlinks, skipped devices and names outside
ROOTFS/); hostile ones are the cases tests/unit/test-deploy.c refuses.

The harness keeps a sentinel directory next to packages/ (packages/pkg is
the package, packages/../sentinel holds "file"); hostile seeds aim at it.

Run: /usr/bin/python3 tests/fuzz/make-deploy-corpus.py
"""
import gzip
import io
import os
import tarfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "deploy")
MTIME = 1600000000


def ti(name, kind="f", data=b"", mode=None, link="", dev=(0, 0)):
    t = tarfile.TarInfo(name)
    t.type = {"f": tarfile.REGTYPE, "d": tarfile.DIRTYPE, "l": tarfile.SYMTYPE,
              "h": tarfile.LNKTYPE, "c": tarfile.CHRTYPE, "p": tarfile.FIFOTYPE}[kind]
    t.mode = mode if mode is not None else (0o755 if kind == "d" else 0o644)
    t.mtime = MTIME
    t.linkname = link
    t.devmajor, t.devminor = dev
    t.size = len(data) if kind == "f" else 0
    return t, (data if kind == "f" else None)


def tar(entries, gz=True):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for t, data in entries:
            tf.addfile(t, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    return gzip.compress(raw, mtime=0) if gz else raw


def seeds():
    good = [
        ti("README", data=b"outside ROOTFS: skipped\n"),
        ti("ROOTFS", "d"),
        ti("ROOTFS/etc", "d", mode=0o750),
        ti("ROOTFS/etc/hosts", data=b"127.0.0.1 localhost\n", mode=0o640),
        ti("ROOTFS/ro", "d", mode=0o555),
        ti("ROOTFS/ro/inside", data=b"x\n"),
        ti("ROOTFS/deep/er/file", data=b"implicit parents\n"),
        ti("ROOTFS/suid", data=b"#!/bin/sh\n", mode=0o4755),
        ti("ROOTFS/deep/er/to-hosts", "l", link="ROOTFS/etc/hosts"),
        ti("ROOTFS/rel", "l", link="etc/hosts"),
        ti("ROOTFS/deep/up", "l", link="../etc/hosts"),
        ti("ROOTFS/hard", "h", link="ROOTFS/etc/hosts"),
        ti("ROOTFS/null", "c", dev=(1, 3)),
        ti("ROOTFS/fifo", "p"),
        ti("ROOTFS/.wh.notawhiteout", data=b"a plain file in a package\n"),
    ]
    esc = "../../sentinel/file"
    return {
        "good": tar(good),
        "good-plain-tar": tar(good, gz=False),
        "good-two-gzip-members": tar(good[:4]) + tar(good[4:8]),
        "empty-tar": tar([]),
        "truncated-gzip": tar(good)[:-9],
        "hostile-dotdot": tar([ti("ROOTFS/ok", data=b"fine\n"),
                               ti("ROOTFS/../" + esc, data=b"gotcha\n")]),
        "hostile-outside-dotdot": tar([ti("../sentinel/file", data=b"gotcha\n")]),
        "hostile-abs-link-then-write": tar([ti("ROOTFS/evil", "l", link="/tmp"),
                                            ti("ROOTFS/evil/escaped", data=b"gotcha\n")]),
        "hostile-climb-link-then-write": tar([
            ti("ROOTFS/evil", "l", link="../../sentinel"),
            ti("ROOTFS/evil/file", data=b"gotcha\n")]),
        "hostile-link-deep": tar([ti("ROOTFS/a", "d"),
                                  ti("ROOTFS/a/l", "l", link="../../x")]),
        "hostile-link-mid": tar([ti("ROOTFS/a", "d"),
                                 ti("ROOTFS/a/l", "l", link="b/../../../x")]),
        "hostile-hard-outside": tar([ti("ROOTFS/h", "h", link="etc/passwd")]),
        "hostile-hard-dotdot": tar([ti("ROOTFS/h", "h", link="ROOTFS/" + esc)]),
        "hostile-hard-symlink": tar([ti("ROOTFS/a/b/l", "l", link="../../x"),
                                     ti("ROOTFS/h", "h", link="ROOTFS/a/b/l")]),
        "hostile-hard-dir": tar([ti("ROOTFS/d", "d"), ti("ROOTFS/h", "h", link="ROOTFS/d")]),
        "hostile-via-dirlink": tar([ti("ROOTFS/a/b", "d"), ti("ROOTFS/s", "l", link="."),
                                    ti("ROOTFS/s/s/l", "l", link="../x")]),
        "hostile-dir-replaced-by-link": tar([
            ti("ROOTFS/d", "d"), ti("ROOTFS/d", "l", link="../../sentinel"),
            ti("ROOTFS/d/file", data=b"gotcha\n")]),
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in sorted(seeds().items()):
        with open(os.path.join(OUT, name + ".tgz"), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(seeds()), OUT))


if __name__ == "__main__":
    main()
