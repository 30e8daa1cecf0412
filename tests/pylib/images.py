# SPDX-License-Identifier: Apache-2.0
"""Build OCI/Docker images in Python and push them to a registry; no Docker.

Layers are tar streams (tarfile, PAX format) made from a declarative list of
entries; they are compressed with gzip (Python), zstd (the ``zstd`` CLI) or
not at all; digests and diff_ids are computed here. An ``Image`` is config +
layers + manifest (Docker schema2 or OCI); an ``Index`` is an OCI index or a
Docker manifest list over several images. ``Pusher`` uploads blobs and
manifests through the registry HTTP API (POST /v2/<name>/blobs/uploads/ then
PUT …?digest=, PUT /v2/<name>/manifests/<ref>), answering Basic or Bearer
challenges with the credentials it was given.

Entries (paths are relative to the layer root, without a leading slash)::

    File("etc/hosts", b"…", mode=0o644, uid=0, gid=0, mtime=…)
    Dir("var/lib", mode=0o755)
    Symlink("bin/sh", "busybox")
    Hardlink("bin/ls2", "bin/ls")           # link target is a layer path
    CharDev("dev/null", 1, 3); BlockDev("dev/loop9", 7, 9); Fifo("run/p")
    Whiteout("etc/hosts")                    # -> etc/.wh.hosts
    Opaque("var/cache")                      # -> var/cache/.wh..wh..opq
    Raw("../evil", kind="file", content=b"x")  # name used verbatim (hostile)

Example::

    img = Image([busybox_layer(), Layer([File("hello", b"hi\\n")])],
                config={"Cmd": ["/bin/sh"]}, fmt="oci")
    Pusher(registry.url, auth=("user", "pw")).push_image("test/bb", "v1", img)
    img.manifest_digest  # "sha256:…"
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile
import urllib.parse
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import requests

# ---- media types ----
MT_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MT_DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MT_DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
MT_DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"
MT_DOCKER_LAYER_TAR = "application/vnd.docker.image.rootfs.diff.tar"
MT_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MT_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
MT_OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
MT_OCI_LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"

DEFAULT_MTIME = 1700000000  # fixed, so that layers are reproducible
BUSYBOX = "/bin/busybox"
HTTP_TIMEOUT = 60


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---- entries ----
@dataclass
class Entry:
    """One tar member. ``kind`` is file, dir, symlink, hardlink, char,
    block or fifo; ``name`` goes into the tar verbatim."""

    name: str
    kind: str = "file"
    content: bytes = b""
    mode: Optional[int] = None
    uid: int = 0
    gid: int = 0
    mtime: int = DEFAULT_MTIME
    linkname: str = ""
    major: int = 0
    minor: int = 0
    uname: str = ""
    gname: str = ""
    size: Optional[int] = None  # override the header size (Raw only)
    pax: Dict[str, str] = field(default_factory=dict)  # extra PAX records (xattrs…)

    _TYPES = {
        "file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE,
        "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
        "char": tarfile.CHRTYPE, "block": tarfile.BLKTYPE,
        "fifo": tarfile.FIFOTYPE,
    }
    _DEFAULT_MODES = {"file": 0o644, "dir": 0o755, "symlink": 0o777,
                      "hardlink": 0o644, "char": 0o666, "block": 0o660,
                      "fifo": 0o644}

    def tarinfo(self) -> tarfile.TarInfo:
        ti = tarfile.TarInfo(self.name)
        ti.type = self._TYPES[self.kind]
        ti.mode = self._DEFAULT_MODES[self.kind] if self.mode is None else self.mode
        ti.uid, ti.gid = self.uid, self.gid
        ti.uname, ti.gname = self.uname, self.gname
        ti.mtime = self.mtime
        ti.linkname = self.linkname
        ti.devmajor, ti.devminor = self.major, self.minor
        ti.size = len(self.content) if self.kind == "file" else 0
        if self.pax:
            ti.pax_headers = dict(self.pax)
        return ti


def File(path: str, content: bytes | str = b"", mode: int = 0o644, uid: int = 0,
         gid: int = 0, mtime: int = DEFAULT_MTIME, **kw) -> Entry:
    if isinstance(content, str):
        content = content.encode()
    return Entry(path, "file", content=content, mode=mode, uid=uid, gid=gid,
                 mtime=mtime, **kw)


def Dir(path: str, mode: int = 0o755, uid: int = 0, gid: int = 0,
        mtime: int = DEFAULT_MTIME, **kw) -> Entry:
    return Entry(path, "dir", mode=mode, uid=uid, gid=gid, mtime=mtime, **kw)


def Symlink(path: str, target: str, uid: int = 0, gid: int = 0, **kw) -> Entry:
    return Entry(path, "symlink", linkname=target, mode=0o777, uid=uid, gid=gid, **kw)


def Hardlink(path: str, target: str, **kw) -> Entry:
    """A hard link to an earlier entry ``target`` (a path in the layer)."""
    return Entry(path, "hardlink", linkname=target, **kw)


def CharDev(path: str, major: int, minor: int, mode: int = 0o666, **kw) -> Entry:
    return Entry(path, "char", major=major, minor=minor, mode=mode, **kw)


def BlockDev(path: str, major: int, minor: int, mode: int = 0o660, **kw) -> Entry:
    return Entry(path, "block", major=major, minor=minor, mode=mode, **kw)


def Fifo(path: str, mode: int = 0o644, **kw) -> Entry:
    return Entry(path, "fifo", mode=mode, **kw)


def Whiteout(path: str) -> Entry:
    """Delete ``path`` (from lower layers): an empty ``dir/.wh.base`` file."""
    d, b = os.path.split(path.rstrip("/"))
    return Entry(os.path.join(d, ".wh." + b), "file", mode=0o644)


def Opaque(dirpath: str) -> Entry:
    """Hide everything lower layers put in ``dirpath``."""
    return Entry(os.path.join(dirpath.rstrip("/"), ".wh..wh..opq"), "file", mode=0o644)


def Raw(name: str, kind: str = "file", content: bytes | str = b"", linkname: str = "",
        mode: Optional[int] = None, **kw) -> Entry:
    """An entry with an arbitrary (possibly hostile) name and link name."""
    if isinstance(content, str):
        content = content.encode()
    return Entry(name, kind, content=content, linkname=linkname, mode=mode, **kw)


# ---- layers ----
def _zstd(data: bytes) -> bytes:
    p = subprocess.run(["zstd", "-q", "-c", "-3", "--no-progress"], input=data,
                       capture_output=True, timeout=120, check=True)
    return p.stdout


def compress(data: bytes, compression: str) -> bytes:
    if compression == "gzip":
        return gzip.compress(data, compresslevel=6, mtime=0)
    if compression == "zstd":
        return _zstd(data)
    if compression in ("none", None):
        return data
    raise ValueError(f"unknown compression {compression!r}")


def make_tar(entries: Iterable[Entry]) -> bytes:
    """A PAX tar stream of ``entries``, in order, names verbatim."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            ti = e.tarinfo()
            if e.kind == "file":
                tf.addfile(ti, io.BytesIO(e.content))
            else:
                tf.addfile(ti)
    return buf.getvalue()


class Layer:
    """A layer blob: entries → tar (diff_id) → compressed blob (digest)."""

    def __init__(self, entries: Sequence[Entry] = (), compression: str = "gzip", *,
                 tar: Optional[bytes] = None, media_type: Optional[str] = None):
        self.entries = list(entries)
        self.compression = compression
        self.tar = tar if tar is not None else make_tar(self.entries)
        self.blob = compress(self.tar, compression)
        self.diff_id = sha256_digest(self.tar)
        self.digest = sha256_digest(self.blob)
        self.size = len(self.blob)
        self._media_type = media_type

    def media_type(self, fmt: str) -> str:
        if self._media_type:
            return self._media_type
        if fmt == "docker":
            return {"gzip": MT_DOCKER_LAYER_GZIP, "none": MT_DOCKER_LAYER_TAR,
                    "zstd": MT_OCI_LAYER_ZSTD}[self.compression]
        return {"gzip": MT_OCI_LAYER_GZIP, "none": MT_OCI_LAYER_TAR,
                "zstd": MT_OCI_LAYER_ZSTD}[self.compression]

    @property
    def hex(self) -> str:
        return self.digest.split(":", 1)[1]

    @property
    def diff_hex(self) -> str:
        return self.diff_id.split(":", 1)[1]


_busybox_cache: Dict[Tuple[str, Optional[str]], Layer] = {}


def busybox_entries(busybox: Optional[str] = None) -> List[Entry]:
    """The standard test rootfs: static busybox, a few applet links, passwd.
    busybox: another build of it (an arm64 one for a multi-arch index)."""
    with open(busybox or BUSYBOX, "rb") as f:
        bb = f.read()
    return [
        Dir("bin"),
        File("bin/busybox", bb, mode=0o755),
        Symlink("bin/sh", "busybox"),
        Symlink("bin/ls", "busybox"),
        Symlink("bin/echo", "busybox"),
        Symlink("bin/cat", "busybox"),
        Dir("etc"),
        File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"
             "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"),
        File("etc/group", "root:x:0:\nnogroup:x:65534:\n"),
        Dir("tmp", mode=0o1777),
    ]


def busybox_layer(compression: str = "gzip", busybox: Optional[str] = None) -> Layer:
    """A layer with /bin/busybox (busybox-static, or the file busybox) and
    the basics (cached)."""
    key = (compression, busybox)
    if key not in _busybox_cache:
        _busybox_cache[key] = Layer(busybox_entries(busybox), compression)
    return _busybox_cache[key]


def random_layer(size: int, name: str = "random.bin", compression: str = "gzip",
                 seed: Optional[bytes] = None) -> Layer:
    """A layer with one incompressible file of ``size`` bytes."""
    data = os.urandom(size) if seed is None else _prng(seed, size)
    return Layer([File(name, data)], compression)


def _prng(seed: bytes, size: int) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(seed + counter.to_bytes(8, "big")).digest()
        counter += 1
    return bytes(out[:size])


# ---- images ----
class Image:
    """Config + layers + manifest. ``fmt`` is "docker" (schema2) or "oci".

    ``config`` holds the runtime part (Env, Entrypoint, Cmd, WorkingDir,
    User, …). ``mutate_manifest(dict)`` may change the manifest before it is
    serialized (e.g. a wrong layer size); ``mutate_config(dict)`` likewise.
    """

    def __init__(self, layers: Sequence[Layer], config: Optional[dict] = None, *,
                 os_: str = "linux", arch: str = "amd64", variant: Optional[str] = None,
                 fmt: str = "docker", history: Optional[List[dict]] = None,
                 created: str = "2024-01-01T00:00:00Z",
                 mutate_config: Optional[Callable[[dict], None]] = None,
                 mutate_manifest: Optional[Callable[[dict], None]] = None,
                 annotations: Optional[Dict[str, str]] = None):
        if fmt not in ("docker", "oci"):
            raise ValueError("fmt must be docker or oci")
        self.layers = list(layers)
        self.fmt = fmt
        self.os, self.arch, self.variant = os_, arch, variant
        cfg = {
            "created": created,
            "architecture": arch,
            "os": os_,
            "config": dict(config or {}),
            "rootfs": {"type": "layers", "diff_ids": [l.diff_id for l in self.layers]},
            "history": history if history is not None else [
                {"created": created, "created_by": f"cell-test layer {i}"}
                for i in range(len(self.layers))],
        }
        if variant:
            cfg["variant"] = variant
        if mutate_config:
            mutate_config(cfg)
        self.config_dict = cfg
        self.config_bytes = json.dumps(cfg, sort_keys=True, separators=(",", ":")).encode()
        self.config_digest = sha256_digest(self.config_bytes)
        man = {
            "schemaVersion": 2,
            "mediaType": self.media_type,
            "config": {
                "mediaType": MT_DOCKER_CONFIG if fmt == "docker" else MT_OCI_CONFIG,
                "digest": self.config_digest,
                "size": len(self.config_bytes),
            },
            "layers": [
                {"mediaType": l.media_type(fmt), "digest": l.digest, "size": l.size}
                for l in self.layers
            ],
        }
        if annotations:
            man["annotations"] = dict(annotations)
        if mutate_manifest:
            mutate_manifest(man)
        self.manifest_dict = man
        self.manifest_bytes = json.dumps(man, indent=3).encode()
        self.manifest_digest = sha256_digest(self.manifest_bytes)

    @property
    def media_type(self) -> str:
        return MT_DOCKER_MANIFEST if self.fmt == "docker" else MT_OCI_MANIFEST

    @property
    def platform(self) -> dict:
        p = {"architecture": self.arch, "os": self.os}
        if self.variant:
            p["variant"] = self.variant
        return p

    def blobs(self) -> List[Tuple[str, bytes]]:
        return [(self.config_digest, self.config_bytes)] + \
               [(l.digest, l.blob) for l in self.layers]


class Index:
    """An OCI image index (fmt="oci") or Docker manifest list ("docker")."""

    def __init__(self, images: Sequence[Image], fmt: str = "oci",
                 mutate: Optional[Callable[[dict], None]] = None):
        self.images = list(images)
        self.fmt = fmt
        idx = {
            "schemaVersion": 2,
            "mediaType": self.media_type,
            "manifests": [
                {"mediaType": im.media_type, "digest": im.manifest_digest,
                 "size": len(im.manifest_bytes), "platform": im.platform}
                for im in self.images
            ],
        }
        if mutate:
            mutate(idx)
        self.manifest_dict = idx
        self.manifest_bytes = json.dumps(idx, indent=3).encode()
        self.manifest_digest = sha256_digest(self.manifest_bytes)

    @property
    def media_type(self) -> str:
        return MT_OCI_INDEX if self.fmt == "oci" else MT_DOCKER_LIST


def platform_image(os_: str, arch: str, variant: Optional[str] = None,
                   fmt: str = "oci") -> Image:
    """Busybox plus a /platform file naming the platform ("linux/arm64/v8")."""
    name = "/".join(p for p in (os_, arch, variant) if p)
    return Image([busybox_layer(), Layer([File("platform", name + "\n")])],
                 config={"Cmd": ["/bin/sh"], "Env": [f"PLATFORM={name}"]},
                 os_=os_, arch=arch, variant=variant, fmt=fmt)


# ---- push ----
def _parse_challenge(header: str) -> Tuple[str, Dict[str, str]]:
    scheme, _, rest = header.strip().partition(" ")
    params: Dict[str, str] = {}
    i = 0
    while i < len(rest):
        while i < len(rest) and rest[i] in " ,":
            i += 1
        eq = rest.find("=", i)
        if eq < 0:
            break
        key = rest[i:eq].strip().lower()
        i = eq + 1
        if i < len(rest) and rest[i] == '"':
            end = rest.find('"', i + 1)
            if end < 0:
                end = len(rest)
            params[key] = rest[i + 1:end]
            i = end + 1
        else:
            end = rest.find(",", i)
            if end < 0:
                end = len(rest)
            params[key] = rest[i:end].strip()
            i = end
    return scheme.lower(), params


class PushError(RuntimeError):
    pass


class Pusher:
    """Registry API client for pushing (and a little reading).

    ``base_url`` is e.g. "http://127.0.0.1:5000"; ``auth`` (user, password)
    answers Basic challenges directly and Bearer challenges through the
    token realm (tokens cached per scope). ``verify`` is passed to requests
    (a CA file path for TLS registries).
    """

    def __init__(self, base_url: str, auth: Optional[Tuple[str, str]] = None,
                 verify=False, timeout: float = HTTP_TIMEOUT):
        self.base = base_url.rstrip("/")
        self.auth = auth
        self.verify = verify
        self.timeout = timeout
        self.s = requests.Session()
        self.s.trust_env = False
        self._tokens: Dict[str, str] = {}
        self._basic = False
        self.token_requests = 0

    # -- auth --
    def _headers(self, scope: str) -> Dict[str, str]:
        if scope in self._tokens:
            return {"Authorization": "Bearer " + self._tokens[scope]}
        return {}

    def _answer(self, resp: requests.Response, scope: str) -> None:
        hdr = resp.headers.get("WWW-Authenticate", "")
        scheme, params = _parse_challenge(hdr)
        if scheme == "basic":
            if not self.auth:
                raise PushError("registry wants Basic auth and no credentials were given")
            self._basic = True
            return
        if scheme == "bearer":
            q = {"scope": params.get("scope") or scope}
            if "service" in params:
                q["service"] = params["service"]
            self.token_requests += 1
            r = self.s.get(params["realm"], params=q, auth=self.auth,
                           timeout=self.timeout, verify=self.verify)
            if r.status_code != 200:
                raise PushError(f"token request failed: {r.status_code} {r.text[:200]}")
            body = r.json()
            self._tokens[scope] = body.get("token") or body["access_token"]
            return
        raise PushError(f"unexpected challenge {hdr!r}")

    def request(self, method: str, url: str, scope: str, **kw) -> requests.Response:
        """One API request, answering one auth challenge if needed."""
        if not url.startswith("http"):
            url = self.base + url
        kw.setdefault("timeout", self.timeout)
        kw.setdefault("verify", self.verify)
        base_headers = dict(kw.pop("headers", None) or {})
        r = None
        for attempt in range(2):
            headers = dict(base_headers)
            headers.update(self._headers(scope))
            auth = self.auth if self._basic else None
            r = self.s.request(method, url, headers=headers, auth=auth, **kw)
            if r.status_code != 401 or attempt == 1:
                return r
            self._answer(r, scope)
        return r

    # -- blobs --
    def blob_exists(self, name: str, digest: str) -> bool:
        r = self.request("HEAD", f"/v2/{name}/blobs/{digest}", self._scope(name, "pull"))
        return r.status_code == 200

    def push_blob(self, name: str, data: bytes, digest: Optional[str] = None) -> str:
        digest = digest or sha256_digest(data)
        scope = self._scope(name, "pull,push")
        if self.blob_exists(name, digest):
            return digest
        r = self.request("POST", f"/v2/{name}/blobs/uploads/", scope)
        if r.status_code != 202:
            raise PushError(f"POST upload for {name}: {r.status_code} {r.text[:300]}")
        loc = urllib.parse.urljoin(self.base + "/", r.headers["Location"])
        sep = "&" if "?" in loc else "?"
        r = self.request("PUT", f"{loc}{sep}digest={urllib.parse.quote(digest)}", scope,
                         data=data,
                         headers={"Content-Type": "application/octet-stream",
                                  "Content-Length": str(len(data))})
        if r.status_code != 201:
            raise PushError(f"PUT blob {digest}: {r.status_code} {r.text[:300]}")
        return digest

    # -- manifests --
    def push_manifest(self, name: str, ref: str, data: bytes, media_type: str) -> str:
        r = self.request("PUT", f"/v2/{name}/manifests/{ref}",
                         self._scope(name, "pull,push"), data=data,
                         headers={"Content-Type": media_type})
        if r.status_code != 201:
            raise PushError(f"PUT manifest {name}:{ref}: {r.status_code} {r.text[:500]}")
        return r.headers.get("Docker-Content-Digest", sha256_digest(data))

    def push_image(self, name: str, tag: Optional[str], image: Image) -> str:
        """Push every blob, then the manifest (by tag, or by digest if None)."""
        for digest, data in image.blobs():
            self.push_blob(name, data, digest)
        return self.push_manifest(name, tag or image.manifest_digest,
                                  image.manifest_bytes, image.media_type)

    def push_index(self, name: str, tag: Optional[str], index: Index) -> str:
        """Push every image (by digest), then the index/list under ``tag``."""
        for im in index.images:
            self.push_image(name, None, im)
        return self.push_manifest(name, tag or index.manifest_digest,
                                  index.manifest_bytes, index.media_type)

    def get_manifest(self, name: str, ref: str, accept: Sequence[str] = (
            MT_OCI_INDEX, MT_DOCKER_LIST, MT_OCI_MANIFEST, MT_DOCKER_MANIFEST)) -> requests.Response:
        return self.request("GET", f"/v2/{name}/manifests/{ref}", self._scope(name, "pull"),
                            headers={"Accept": ", ".join(accept)})

    def get_blob(self, name: str, digest: str) -> requests.Response:
        return self.request("GET", f"/v2/{name}/blobs/{digest}", self._scope(name, "pull"))

    def delete_manifest(self, name: str, digest: str) -> requests.Response:
        return self.request("DELETE", f"/v2/{name}/manifests/{digest}",
                            self._scope(name, "*"))

    @staticmethod
    def _scope(name: str, actions: str) -> str:
        return f"repository:{name}:{actions}"

    def close(self) -> None:
        self.s.close()


def pusher_for(registry, **kw) -> Pusher:
    """A Pusher with the registry's own URL, credentials and CA."""
    verify = getattr(registry, "ca_file", None) or False
    return Pusher(registry.url, auth=registry.client_auth(), verify=verify, **kw)


def push(registry, name: str, tag: Optional[str], image) -> str:
    """Push an Image or Index to a Registry fixture; returns the manifest digest."""
    p = pusher_for(registry)
    try:
        if isinstance(image, Index):
            return p.push_index(name, tag, image)
        return p.push_image(name, tag, image)
    finally:
        p.close()


def wrong_size(layer_index: int, delta: int) -> Callable[[dict], None]:
    """A mutate_manifest that makes one layer descriptor's size wrong."""
    def m(man: dict) -> None:
        man["layers"][layer_index]["size"] += delta
    return m


def with_layer_digest(layer_index: int, digest: str) -> Callable[[dict], None]:
    """A mutate_manifest that points one layer descriptor at another blob."""
    def m(man: dict) -> None:
        man["layers"][layer_index]["digest"] = digest
    return m


def clone(obj):
    return copy.deepcopy(obj)


# ---- inspecting unpacked trees ----
def tree_listing(root: str, *, sizes_for=("file", "symlink")) -> Dict[str, tuple]:
    """Every entry under ``root`` (not root itself), keyed by relative path:
    (type, mode, uid, gid, size, symlink target, device numbers).

    Sizes are compared for regular files and symlinks only (a directory's
    size depends on the file system's history). Modes include the setuid,
    setgid and sticky bits.
    """
    import stat as st
    out: Dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in sorted(dirnames + filenames):
            p = os.path.join(dirpath, n)
            s = os.lstat(p)
            m = s.st_mode
            if st.S_ISREG(m):
                t = "file"
            elif st.S_ISDIR(m):
                t = "dir"
            elif st.S_ISLNK(m):
                t = "symlink"
            elif st.S_ISCHR(m):
                t = "char"
            elif st.S_ISBLK(m):
                t = "block"
            elif st.S_ISFIFO(m):
                t = "fifo"
            elif st.S_ISSOCK(m):
                t = "socket"
            else:
                t = "?"
            target = os.readlink(p) if t == "symlink" else None
            dev = (os.major(s.st_rdev), os.minor(s.st_rdev)) if t in ("char", "block") else None
            size = s.st_size if t in sizes_for else None
            out[os.path.relpath(p, root)] = (t, oct(st.S_IMODE(m)), s.st_uid, s.st_gid,
                                             size, target, dev)
    return out


def diff_listings(a: Dict[str, tuple], b: Dict[str, tuple]) -> List[str]:
    """Human-readable differences between two tree_listing() results."""
    out = []
    for k in sorted(set(a) | set(b)):
        if k not in b:
            out.append(f"only in first: {k} {a[k]}")
        elif k not in a:
            out.append(f"only in second: {k} {b[k]}")
        elif a[k] != b[k]:
            out.append(f"differs: {k}: {a[k]} != {b[k]}")
    return out
