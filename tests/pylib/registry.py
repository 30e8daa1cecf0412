# SPDX-License-Identifier: Apache-2.0
"""A real registry for tests: Debian's docker-registry (distribution 2.8).

``Registry`` runs ``/usr/bin/docker-registry serve CONFIG`` on 127.0.0.1 with
a free port, a private storage directory and a generated config, waits until
``GET /v2/`` answers, and can be stopped and started again on the same port
with the same storage (to cut a client off in the middle of a blob). The
process runs in its own process group and is always killed by ``close()``
(and at interpreter exit; PR_SET_PDEATHSIG kills it if the test process dies).

Authentication (optional, one of):
  * ``htpasswd={"user": "password"}``: the registry's ``auth: htpasswd``
    (bcrypt file made with ``htpasswd -B``);
  * ``token=TokenServer``: the registry's ``auth: token`` (see tokenserver.py),
    with realm, service, issuer and rootcertbundle taken from the server.
TLS (optional): ``tls=(cert_path, key_path)``; the URL is then https.

Logs. The registry writes an Apache "combined" access log line per request on
its stdout, e.g.::

    127.0.0.1 - - [22/Nov/2026:05:07:43 +0000] "GET /v2/t/blobs/sha256:ad7c… HTTP/1.1" 206 99900 "" "curl/7.88.1"

and its application log (logrus, ``level=info msg="response completed" …``)
on stderr. Both are appended to files under the base dir across restarts.
Distribution 2.8 does NOT log the Range request header, at any log level
(checked: ``level: debug`` does not show it either). A ranged GET is still
visible: the registry answers it ``206`` with the partial byte count, so
``Request.ranged`` is inferred from the status. Tests that need the exact
Range header put ``proxy.Proxy`` in front, which records request headers.
A request whose response was cut by killing the registry is never logged
(the access line is written after the handler returns).
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import requests

REGISTRY_BIN = "/usr/bin/docker-registry"
HTPASSWD_BIN = "/usr/bin/htpasswd"

# host - user [time] "METHOD PATH PROTO" status size "referer" "user-agent"
_ACCESS_RE = re.compile(
    r'^(?P<remote>\S+) \S+ (?P<user>\S+) \[(?P<time>[^\]]+)\] '
    r'"(?P<method>[A-Z]+) (?P<path>\S+) (?P<proto>[^"]+)" '
    r'(?P<status>\d{3}) (?P<size>\d+|-) "(?P<referer>[^"]*)" "(?P<agent>[^"]*)"'
)
_BLOB_RE = re.compile(r"^/v2/(?P<name>.+)/blobs/(?P<digest>sha256:[0-9a-f]{64})$")
_MANIFEST_RE = re.compile(r"^/v2/(?P<name>.+)/manifests/(?P<ref>[^/]+)$")


_live: "set[Registry]" = set()


def _kill_all() -> None:
    for r in list(_live):
        r.close()


atexit.register(_kill_all)


def _child_setup() -> None:
    """In the child: die with the parent (PR_SET_PDEATHSIG = 1). Note that
    this follows the *thread* that started the registry: call start() from a
    thread that lives as long as the test (normally the main thread)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except Exception:
        pass


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _yaml(obj, indent: int = 0) -> str:
    """A tiny block-YAML emitter for the config (str/int/bool/list/dict)."""
    pad = "  " * indent
    out = []
    for k, v in obj.items():
        if isinstance(v, dict):
            out.append(f"{pad}{k}:")
            out.append(_yaml(v, indent + 1))
        elif isinstance(v, list):
            out.append(f"{pad}{k}:")
            for item in v:
                out.append(f"{pad}  - {json.dumps(item)}")
        elif isinstance(v, bool):
            out.append(f"{pad}{k}: {'true' if v else 'false'}")
        elif isinstance(v, int):
            out.append(f"{pad}{k}: {v}")
        else:
            out.append(f"{pad}{k}: {json.dumps(str(v))}")
    return "\n".join(out)


@dataclass
class Request:
    """One line of the registry's access log."""

    method: str
    path: str
    status: int
    size: int
    agent: str
    line: str

    @property
    def ranged(self) -> bool:
        """True for a GET answered with partial content (a Range request)."""
        return self.status == 206

    @property
    def blob_digest(self) -> Optional[str]:
        m = _BLOB_RE.match(self.path.split("?", 1)[0])
        return m.group("digest") if m else None

    @property
    def is_blob_get(self) -> bool:
        return self.method == "GET" and self.blob_digest is not None

    @property
    def is_manifest(self) -> bool:
        return _MANIFEST_RE.match(self.path.split("?", 1)[0]) is not None

    def __str__(self) -> str:
        return f"{self.method} {self.path} {self.status} {self.size}"


class Registry:
    """A docker-registry process on loopback; see the module docstring."""

    def __init__(self, basedir: Optional[str] = None, *,
                 htpasswd: Optional[Dict[str, str]] = None,
                 token=None,
                 tls: Optional[Tuple[str, str]] = None,
                 ca_file: Optional[str] = None,
                 port: Optional[int] = None,
                 start: bool = True,
                 start_timeout: float = 15.0):
        if htpasswd and token:
            raise ValueError("htpasswd and token auth are exclusive")
        self._own_basedir = basedir is None
        self.basedir = basedir or tempfile.mkdtemp(prefix="registry-")
        os.makedirs(self.basedir, exist_ok=True)
        self.storage = os.path.join(self.basedir, "storage")
        os.makedirs(self.storage, exist_ok=True)
        self.config_path = os.path.join(self.basedir, "config.yml")
        self.access_log_path = os.path.join(self.basedir, "access.log")
        self.app_log_path = os.path.join(self.basedir, "registry.log")
        self.htpasswd = dict(htpasswd or {})
        self.token = token
        self.tls = tls
        self.ca_file = ca_file
        self.port = port or free_port()
        self.start_timeout = start_timeout
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0
        self._write_config()
        if start:
            self.start()

    # ---- addresses ----
    @property
    def host(self) -> str:
        """"127.0.0.1:PORT", what goes into image references."""
        return f"127.0.0.1:{self.port}"

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}"

    def ref(self, name: str, tag: Optional[str] = None,
            digest: Optional[str] = None) -> str:
        """An image reference on this registry: host/name[:tag][@digest]."""
        r = f"{self.host}/{name}"
        if tag:
            r += f":{tag}"
        if digest:
            r += f"@{digest}"
        return r

    # ---- config ----
    def _write_config(self) -> None:
        cfg = {
            "version": "0.1",
            "log": {
                "level": "info",
                "formatter": "text",
                "accesslog": {"disabled": False},
                "fields": {"service": "registry"},
            },
            "storage": {
                "filesystem": {"rootdirectory": self.storage},
                "delete": {"enabled": True},
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            "http": {"addr": self.host, "secret": "cell-test-secret",
                     "headers": {"X-Content-Type-Options": ["nosniff"]}},
        }
        if self.tls:
            cfg["http"]["tls"] = {"certificate": self.tls[0], "key": self.tls[1]}
        if self.htpasswd:
            path = os.path.join(self.basedir, "htpasswd")
            lines = []
            for user, pw in self.htpasswd.items():
                out = subprocess.run([HTPASSWD_BIN, "-Bbn", user, pw], check=True,
                                     capture_output=True, timeout=30)
                lines.append(out.stdout.decode().strip())
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            cfg["auth"] = {"htpasswd": {"realm": "cell-test-realm", "path": path}}
        elif self.token is not None:
            cfg["auth"] = {"token": {
                "realm": self.token.realm,
                "service": self.token.service,
                "issuer": self.token.issuer,
                "rootcertbundle": self.token.rootcertbundle,
            }}
        with open(self.config_path, "w") as f:
            f.write(_yaml(cfg) + "\n")

    # ---- lifecycle ----
    def start(self) -> None:
        """Start (or start again) on the same port and storage; wait for /v2/."""
        if self.running:
            return
        last_err = None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            out = open(self.access_log_path, "ab")
            err = open(self.app_log_path, "ab")
            try:
                self.proc = subprocess.Popen(
                    [REGISTRY_BIN, "serve", self.config_path],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    start_new_session=True, cwd=self.basedir,
                    preexec_fn=_child_setup)
            finally:
                out.close()
                err.close()
            self.starts += 1
            _live.add(self)
            try:
                self._wait_ready(deadline)
                return
            except RuntimeError as e:
                last_err = e
                self._kill()
                # The port may have been taken meanwhile (or be in a bad
                # state); retry a few times until the deadline.
                time.sleep(0.2)
        raise RuntimeError(f"registry did not start on {self.host}: {last_err}\n"
                           + self.app_log()[-3000:])

    def _wait_ready(self, deadline: float) -> None:
        verify = self.ca_file if (self.tls and self.ca_file) else False
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"registry exited with {self.proc.returncode}")
            try:
                r = requests.get(self.url + "/v2/", timeout=1, verify=verify)
                if r.status_code in (200, 401):
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise RuntimeError("timed out waiting for GET /v2/")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        self.proc = None
        _live.discard(self)

    def stop(self, graceful: bool = False) -> None:
        """Stop the registry. Default SIGKILL: open connections are cut at once."""
        self._kill(signal.SIGTERM if graceful else signal.SIGKILL)

    def restart(self, pause: float = 0.0) -> None:
        self.stop()
        if pause:
            time.sleep(pause)
        self.start()

    def close(self) -> None:
        """Kill the process group. The base dir stays (pytest's tmp dirs own it)."""
        self._kill()

    def __enter__(self) -> "Registry":
        return self

    def __exit__(self, *a) -> None:
        self.close()

    # ---- logs ----
    def access_log(self) -> str:
        try:
            with open(self.access_log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def app_log(self) -> str:
        try:
            with open(self.app_log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_text(self) -> str:
        """Both logs, access log first."""
        return self.access_log() + self.app_log()

    def settle(self, quiet: float = 0.05, timeout: float = 2.0) -> None:
        """Wait until the access log has not grown for ``quiet`` seconds.

        The registry writes a request's line just after the response, so a
        client may have its answer a moment before the line exists.
        """
        deadline = time.monotonic() + timeout
        last = -1
        while time.monotonic() < deadline:
            try:
                size = os.path.getsize(self.access_log_path)
            except FileNotFoundError:
                size = 0
            if size == last:
                return
            last = size
            time.sleep(quiet)

    def requests(self, since: int = 0, settle: bool = True) -> List[Request]:
        """Parsed access-log lines (from request index ``since`` on).

        ``settle`` first waits for the log to stop growing (see settle()).
        """
        if settle and self.running:
            self.settle()
        out = []
        for line in self.access_log().splitlines():
            m = _ACCESS_RE.match(line)
            if not m:
                continue
            size = m.group("size")
            out.append(Request(m.group("method"), m.group("path"),
                               int(m.group("status")),
                               0 if size == "-" else int(size),
                               m.group("agent"), line))
        return out[since:]

    def mark(self) -> int:
        """The number of requests logged so far; pass to requests(since=)."""
        return len(self.requests())

    def request_lines(self, since: int = 0) -> List[str]:
        """"METHOD PATH STATUS SIZE" per request; "[ranged]" added for 206.

        The registry does not log the Range header itself (see module doc).
        """
        return [str(r) + (" [ranged]" if r.ranged else "")
                for r in self.requests(since)]

    def blob_gets(self, digest: Optional[str] = None, since: int = 0) -> List[Request]:
        """GET requests for blobs (optionally one digest)."""
        return [r for r in self.requests(since)
                if r.is_blob_get and (digest is None or r.blob_digest == digest)]

    def wait_for_request(self, pred, timeout: float = 10.0, since: int = 0) -> Request:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for r in self.requests(since, settle=False):
                if pred(r):
                    return r
            time.sleep(0.05)
        raise TimeoutError("no matching request in the registry log")

    # ---- storage ----
    def blob_path(self, digest: str) -> str:
        """Where the filesystem driver keeps a blob's bytes."""
        algo, hexd = digest.split(":", 1)
        return os.path.join(self.storage, "docker", "registry", "v2", "blobs",
                            algo, hexd[:2], hexd, "data")

    def corrupt_blob(self, digest: str, offset: Optional[int] = None) -> None:
        """Flip one byte of a stored blob in place (same size, wrong digest).

        The registry serves stored bytes without re-hashing them, so a client
        that verifies what it fetched sees a real digest mismatch.
        """
        path = self.blob_path(digest)
        size = os.path.getsize(path)
        if size == 0:
            raise ValueError("cannot corrupt an empty blob")
        off = size // 2 if offset is None else offset
        with open(path, "r+b") as f:
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ 0xFF]))
        with open(path, "rb") as f:
            assert "sha256:" + hashlib.sha256(f.read()).hexdigest() != digest

    def client_auth(self) -> Optional[Tuple[str, str]]:
        """The first configured (user, password), for pushing."""
        if self.htpasswd:
            return next(iter(self.htpasswd.items()))
        if self.token is not None:
            return next(iter(self.token.users.items()))
        return None


def skopeo_copy_to_oci(ref: str, oci_dir: str, tag: str, *,
                       creds: Optional[str] = None, tls_verify: bool = False,
                       extra: Sequence[str] = (), timeout: float = 120) -> subprocess.CompletedProcess:
    """``skopeo copy docker://REF oci:DIR:TAG``; raises with stderr on failure."""
    cmd = ["skopeo", "--insecure-policy", "copy",
           f"--src-tls-verify={'true' if tls_verify else 'false'}"]
    if creds:
        cmd += ["--src-creds", creds]
    cmd += list(extra) + [f"docker://{ref}", f"oci:{oci_dir}:{tag}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, HOME=os.environ.get("HOME", "/root")))
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    return p


def umoci_raw_unpack(oci_dir: str, tag: str, out: str,
                     timeout: float = 120) -> subprocess.CompletedProcess:
    """``umoci raw unpack --image DIR:TAG OUT`` (flattened rootfs, as root)."""
    cmd = ["umoci", "raw", "unpack", "--image", f"{oci_dir}:{tag}", out]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    return p
