# SPDX-License-Identifier: Apache-2.0
"""A test-only eStargz writer (stargz-snapshotter's docs/estargz.md), for
the edge and hostile cases ctr-remote does not make: chunked files, hard
links, whiteouts, a prefetch landmark, a TOC or chunk that lies.

The blob is a gzip stream whose members start at the top of the blob, at
each non-empty file's payload (and each further chunk), at the TOC's tar
header, and at the footer; decompressed it is one tar stream (the diff-id).
"""
import gzip
import hashlib
import io
import json
import struct
import tarfile
from typing import Callable, List, Optional, Sequence

from images import Entry, Layer, MT_OCI_LAYER_GZIP, sha256_digest

TOC_ANNOTATION = "containerd.io/snapshot/stargz/toc.digest"


def footer(toc_offset: int) -> bytes:
    extra = b"SG" + struct.pack("<H", 22) + b"%016xSTARGZ" % toc_offset
    return (bytes([0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 255]) + struct.pack("<H", len(extra))
            + extra + bytes([1, 0, 0, 0xff, 0xff]) + bytes(8))


class _Writer:
    def __init__(self) -> None:
        self.blob = bytearray()
        self.tar = bytearray()  # the whole uncompressed stream
        self.member = bytearray()  # uncompressed bytes of the open member

    def flush(self) -> None:
        if self.member:
            self.blob += gzip.compress(bytes(self.member), mtime=0)
            self.member = bytearray()

    def write(self, data: bytes) -> None:
        self.member += data
        self.tar += data


class EstargzLayer(Layer):
    """An eStargz layer of ``entries`` (images.Entry). ``prefetch``: how
    many leading entries are prioritized (a .prefetch.landmark after them);
    None: a .no.prefetch.landmark first. ``mutate_toc(dict)`` may change the
    TOC (a hostile one); ``corrupt_chunk(name, index)`` says which chunk's
    data to alter after its digest was taken."""

    def __init__(self, entries: Sequence[Entry], *, chunk_size: int = 4096,
                 prefetch: Optional[int] = None,
                 mutate_toc: Optional[Callable[[dict], None]] = None,
                 corrupt_chunk: Optional[Callable[[str, int], bool]] = None):
        self.entries = list(entries)
        self.compression = "gzip"
        self._media_type = MT_OCI_LAYER_GZIP
        w = _Writer()
        toc: List[dict] = []
        items = list(self.entries)
        if prefetch is None:
            items.insert(0, Entry(".no.prefetch.landmark", "file", content=b"\x0f"))
        else:
            items.insert(prefetch, Entry(".prefetch.landmark", "file", content=b"\x0f"))
        for e in items:
            self._entry(w, e, toc, chunk_size, corrupt_chunk)
        w.flush()
        toc_offset = len(w.blob)
        doc = {"version": 1, "entries": toc}
        if mutate_toc:
            mutate_toc(doc)
        toc_json = json.dumps(doc, indent="\t").encode()
        tb = io.BytesIO()
        with tarfile.open(fileobj=tb, mode="w", format=tarfile.USTAR_FORMAT) as tf:
            ti = tarfile.TarInfo("stargz.index.json")
            ti.size = len(toc_json)
            tf.addfile(ti, io.BytesIO(toc_json))
        w.write(tb.getvalue())
        w.flush()
        w.blob += footer(toc_offset)
        self.tar = bytes(w.tar)
        self.blob = bytes(w.blob)
        self.diff_id = sha256_digest(self.tar)
        self.digest = sha256_digest(self.blob)
        self.size = len(self.blob)
        self.toc = doc
        self.toc_digest = sha256_digest(toc_json)
        self.toc_offset = toc_offset

    @staticmethod
    def _entry(w: _Writer, e: Entry, toc: List[dict], chunk_size: int,
               corrupt) -> None:
        ti = e.tarinfo()
        w.write(ti.tobuf(format=tarfile.PAX_FORMAT))
        kind = {"file": "reg", "dir": "dir", "symlink": "symlink",
                "hardlink": "hardlink", "char": "char", "block": "block",
                "fifo": "fifo"}[e.kind]
        t = {"name": e.name, "type": kind, "mode": ti.mode, "uid": e.uid,
             "gid": e.gid, "modtime": "2024-01-01T00:00:00Z"}
        if e.linkname:
            t["linkName"] = e.linkname
        if e.kind in ("char", "block"):
            t["devMajor"], t["devMinor"] = e.major, e.minor
        xattrs = {k[len("SCHILY.xattr."):]: v for k, v in e.pax.items()
                  if k.startswith("SCHILY.xattr.")}
        if xattrs:
            import base64
            t["xattrs"] = {k: base64.b64encode(v.encode()).decode()
                           for k, v in xattrs.items()}
        data = e.content if e.kind == "file" else b""
        if not data:
            toc.append(t)
            return
        t["size"] = len(data)
        t["digest"] = sha256_digest(data)
        for i, at in enumerate(range(0, len(data), chunk_size)):
            piece = data[at:at + chunk_size]
            w.flush()
            ent = dict(t) if i == 0 else {"name": e.name, "type": "chunk"}
            ent["offset"] = len(w.blob)
            if i:
                ent["chunkOffset"] = at
            if at + chunk_size < len(data):
                ent["chunkSize"] = len(piece)
            ent["chunkDigest"] = sha256_digest(piece)
            if corrupt and corrupt(e.name, i):
                piece = bytes([piece[0] ^ 0xff]) + piece[1:]
            w.write(piece)
            toc.append(ent)
        pad = (-len(data)) % 512
        w.write(bytes(pad))


def annotate(layers: Sequence[Layer]) -> Callable[[dict], None]:
    """A mutate_manifest that adds the TOC digest annotation of each
    eStargz layer among ``layers``."""
    def m(man: dict) -> None:
        for desc, l in zip(man["layers"], layers):
            if isinstance(l, EstargzLayer):
                desc["annotations"] = {TOC_ANNOTATION: l.toc_digest}
    return m
