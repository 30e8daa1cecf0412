# SPDX-License-Identifier: Apache-2.0
"""A client that speaks WIRE.md the way the Kip controller does.

* Mutual TLS with a client certificate (see pki.py); the cell is verified by
  the name ``MilpaNode`` against the given CA only, never by IP and never
  against the system's CAs.
* The controller's timeouts: 120 s per call, 10 s to connect, 3 s for
  ``ping``. One kept-alive ``requests.Session`` per cell, as the
  controller's ``http.Client`` reuses connections.
* ``PodParameters`` with the controller's mixed-case keys (``pod_params``).
* Deploy packages: a tar.gz of ``ROOTFS/<path>`` entries (``make_package``)
  sent as multipart field ``package``, streamed with chunked encoding like
  the controller's io.Pipe.
* Logs with the controller's URLs, including the follow URL whose ``?`` is
  percent-encoded into the path (``logs/<unit>%3Ffollow=1&metadata=1``).
* Websocket streams (exec, attach, port-forward, log follow): a first raw
  JSON message, then text frames of one channel digit and standard base64.

Example::

    c = CellClient("127.0.0.1", port, ca=ca.cert_path, cert=cli.cert_path,
                   key=cli.key_path)
    c.ping()
    c.deploy("ns_pod", "resolvconf", {"etc/resolv.conf": "nameserver 1.1.1.1\\n"})
    c.update_pod(pod_params("ns_pod", units=[unit("app", "busybox")]))
    st = c.wait_status(lambda s: s["unitStatus"] and
                       "running" in s["unitStatus"][0]["state"])
    out, err, code = c.exec("app", ["echo", "hi"]).collect()
"""

from __future__ import annotations

import base64
import io
import json
import ssl
import tarfile
import time
from typing import Callable, Dict, Iterable, List, Optional, Tuple, Union

import requests
import websocket
from requests.adapters import HTTPAdapter

SERVER_NAME = "MilpaNode"
PORT = 6421
CALL_TIMEOUT = 120.0
CONNECT_TIMEOUT = 10.0
PING_TIMEOUT = 3.0
MULTIPART_FIELD = "package"

STDIN, STDOUT, STDERR, EXIT_CODE, RESIZE = 0, 1, 2, 3, 4


class WireError(Exception):
    """A non-200 reply (the controller treats every one as an error)."""

    def __init__(self, method: str, path: str, status: int, body: str):
        super().__init__(f"{method} {path}: HTTP {status}: {body.strip()[:300]}")
        self.status = status
        self.body = body


def tls_context(ca: str, cert: Optional[str], key: Optional[str]) -> ssl.SSLContext:
    """Trust only ca; present cert/key; check the name MilpaNode."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_verify_locations(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class _MilpaAdapter(HTTPAdapter):
    """Connect to the cell's IP, but verify the certificate as MilpaNode."""

    def __init__(self, ctx: ssl.SSLContext, **kw):
        self._ctx = ctx
        super().__init__(**kw)

    def init_poolmanager(self, *args, **kw):
        kw["ssl_context"] = self._ctx
        kw["server_hostname"] = SERVER_NAME
        kw["assert_hostname"] = SERVER_NAME
        return super().init_poolmanager(*args, **kw)


# ---------------------------------------------------------------------------
# payloads


def unit(name: str, image: str, command: Optional[List[str]] = None,
         args: Optional[List[str]] = None, **extra) -> dict:
    """A Unit as the controller serializes it (lower camelCase keys)."""
    u = {"name": name, "image": image, "command": command or [],
         "args": args or [], "env": [], "volumeMounts": [], "ports": [],
         "workingDir": "", "securityContext": None}
    u.update(extra)
    return u


def pod_params(pod_name: str, units: Iterable[dict] = (),
               init_units: Iterable[dict] = (), restart_policy: str = "Always",
               pod_ip: str = "", node_name: str = "", volumes: Iterable[dict] = (),
               secrets: Optional[dict] = None, credentials: Optional[dict] = None,
               annotations: Optional[dict] = None, **spec_extra) -> dict:
    """PodParameters with the controller's exact mixed-case keys."""
    spec = {"phase": "Running", "restartPolicy": restart_policy,
            "units": list(units), "initUnits": list(init_units),
            "imagePullSecrets": [], "instanceType": "t3.nano",
            "spot": {"policy": "Never"},
            "resources": {"cpu": "", "memory": "", "gpu": "", "volumeSize": "",
                          "dedicatedCPU": False, "sustainedCPU": None,
                          "privateIPOnly": True},
            "volumes": list(volumes),
            "securityContext": {"namespaceOptions": None, "runAsUser": None,
                                "runAsGroup": None, "supplementalGroups": [],
                                "sysctls": []},
            "dnsPolicy": "Default", "dnsConfig": None, "hostname": "",
            "subdomain": "", "hostAliases": []}
    spec.update(spec_extra)
    return {"secrets": secrets or {}, "credentials": credentials or {},
            "spec": spec, "Annotations": annotations or {},
            "PodName": pod_name, "NodeName": node_name, "PodIP": pod_ip,
            "PodHostname": pod_name.split("_", 1)[-1]}


FileSpec = Union[str, bytes, Tuple[int, Union[str, bytes]]]


def make_package(files: Dict[str, FileSpec], symlinks: Optional[Dict[str, str]] = None,
                 prefix: str = "ROOTFS/", raw: Optional[List[tarfile.TarInfo]] = None,
                 raw_data: Optional[Dict[str, bytes]] = None) -> bytes:
    """A deploy package: a tar.gz of prefix+path entries.

    files maps a path to its contents (str or bytes) or to (mode, contents);
    symlinks maps a path to its target. ``raw`` adds TarInfo entries as they
    are (hostile names included), with data from ``raw_data``.
    """
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        for path, spec in files.items():
            mode, data = spec if isinstance(spec, tuple) else (0o644, spec)
            if isinstance(data, str):
                data = data.encode()
            ti = tarfile.TarInfo(prefix + path)
            ti.size, ti.mode, ti.mtime = len(data), mode, int(time.time())
            tf.addfile(ti, io.BytesIO(data))
        for path, target in (symlinks or {}).items():
            ti = tarfile.TarInfo(prefix + path)
            ti.type, ti.linkname = tarfile.SYMTYPE, target
            tf.addfile(ti)
        for ti in raw or []:
            data = (raw_data or {}).get(ti.name, b"")
            ti.size = len(data) if ti.isreg() else 0
            tf.addfile(ti, io.BytesIO(data) if ti.isreg() else None)
    return out.getvalue()


# ---------------------------------------------------------------------------
# websocket streams


class WireStream:
    """One websocket stream: exec, attach, port-forward or log follow."""

    def __init__(self, ws: websocket.WebSocket):
        self.ws = ws

    def send_params(self, params: dict) -> None:
        """The first message: raw, unframed JSON."""
        self.ws.send(json.dumps(params))

    def send(self, channel: int, data: Union[bytes, str]) -> None:
        if isinstance(data, str):
            data = data.encode()
        self.ws.send(str(channel) + base64.b64encode(data).decode())

    def resize(self, rows: int, cols: int) -> None:
        self.send(RESIZE, json.dumps({"Rows": rows, "Cols": cols, "X": 0, "Y": 0}))

    def recv(self, timeout: float = 10.0) -> Optional[Tuple[int, bytes]]:
        """The next frame as (channel, payload); None when the stream ends.
        Pings are answered by websocket-client while it reads."""
        self.ws.settimeout(timeout)
        try:
            msg = self.ws.recv()
        except (websocket.WebSocketConnectionClosedException, ConnectionError,
                ssl.SSLError, OSError):
            return None
        if msg in ("", b"", None):
            return None
        if isinstance(msg, bytes):
            msg = msg.decode()
        return int(msg[0]), base64.b64decode(msg[1:])

    def collect(self, timeout: float = 30.0) -> Tuple[bytes, bytes, Optional[int]]:
        """stdout, stderr and the exit code, reading until channel 3 or the
        end of the stream."""
        out, err, code = b"", b"", None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            f = self.recv(max(0.1, deadline - time.monotonic()))
            if f is None:
                break
            ch, data = f
            if ch == STDOUT:
                out += data
            elif ch == STDERR:
                err += data
            elif ch == EXIT_CODE:
                code = int(data.decode())
                break
        return out, err, code

    def close(self) -> None:
        try:
            self.ws.close(timeout=2)
        except Exception:  # noqa: BLE001 - closing a broken stream
            pass


# ---------------------------------------------------------------------------
# the client


class CellClient:
    """The controller's view of one cell."""

    def __init__(self, host: str, port: int = PORT, ca: Optional[str] = None,
                 cert: Optional[str] = None, key: Optional[str] = None,
                 plain: bool = False):
        self.host, self.port, self.plain = host, port, plain
        self.ca, self.cert, self.key = ca, cert, key
        scheme = "http" if plain else "https"
        self.base = f"{scheme}://{host}:{port}/"
        self.session = requests.Session()
        self.session.trust_env = False  # no proxies, no netrc
        if not plain:
            self.ctx = tls_context(ca, cert, key)
            self.session.mount("https://", _MilpaAdapter(self.ctx))
            # requests would otherwise add its own CA bundle to the context.
            self.session.verify = ca

    # -- plumbing --

    def request(self, method: str, path: str, timeout: float = CALL_TIMEOUT,
                ok: bool = True, **kw) -> requests.Response:
        r = self.session.request(method, self.base + path,
                                 timeout=(CONNECT_TIMEOUT, timeout), **kw)
        if ok and r.status_code != 200:
            raise WireError(method, path, r.status_code, r.text)
        return r

    def close(self) -> None:
        self.session.close()

    # -- endpoints --

    def ping(self) -> str:
        body = self.request("GET", "rest/v1/ping", timeout=PING_TIMEOUT).text
        if body.lower() != "pong":
            raise WireError("GET", "rest/v1/ping", 200, f"expected pong, got {body!r}")
        return body

    def version(self) -> str:
        return self.request("GET", "rest/v1/version").text

    def update_pod(self, params: dict) -> None:
        self.request("POST", "rest/v1/updatepod", data=json.dumps(params),
                     headers={"Content-Type": "application/json"})

    def status(self) -> dict:
        # The controller does not check this status code; it parses.
        return json.loads(self.request("GET", "rest/v1/status", ok=False).text)

    def wait_status(self, pred: Callable[[dict], bool], timeout: float = 60.0,
                    every: float = 0.2) -> dict:
        deadline = time.monotonic() + timeout
        st: dict = {}
        while time.monotonic() < deadline:
            st = self.status()
            if pred(st):
                return st
            time.sleep(every)
        raise TimeoutError(f"status never matched; last: {json.dumps(st)[:2000]}")

    def logs(self, unit_name: str = "", lines: int = 0, nbytes: int = 0,
             query: Optional[str] = None) -> bytes:
        path = "rest/v1/logs/" + unit_name
        if query is not None:
            path += query
        elif lines > 0 or nbytes > 0:
            path += f"?lines={lines}&bytes={nbytes}"
        return self.request("GET", path).content

    def file(self, path: str, lines: int = 0, nbytes: int = 0) -> bytes:
        params = {"path": path}
        if lines > 0:
            params["lines"] = str(lines)
        if nbytes > 0:
            params["bytes"] = str(nbytes)
        return self.request("GET", "rest/v1/file/", params=params).content

    def deploy(self, pod: str, name: str, package: Union[bytes, Dict[str, FileSpec]],
               chunked: bool = True, field: str = MULTIPART_FIELD) -> None:
        """Upload a package (bytes, or a dict for make_package)."""
        data = package if isinstance(package, bytes) else make_package(package)
        boundary = "cellwire" + base64.b16encode(name.encode()[:8]).decode()
        head = (f"--{boundary}\r\nContent-Disposition: form-data; "
                f"name=\"{field}\"; filename=\"{name}\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n").encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        if chunked:
            def gen():
                yield head
                for i in range(0, len(data), 32768):
                    yield data[i:i + 32768]
                yield tail
            body = gen()
        else:
            body = head + data + tail
        self.request("POST", f"rest/v1/deploy/{pod}/{name}", data=body,
                     headers=headers)

    def resize_volume(self) -> str:
        return self.request("POST", "rest/v1/resizevolume").text

    # -- streams --

    def stream(self, path: str, timeout: float = CONNECT_TIMEOUT) -> WireStream:
        scheme = "ws" if self.plain else "wss"
        sslopt = {} if self.plain else {"context": self.ctx,
                                        "server_hostname": SERVER_NAME}
        ws = websocket.create_connection(
            f"{scheme}://{self.host}:{self.port}/{path}", timeout=timeout,
            sslopt=sslopt,
            header=["Content-Type: application/x-www-form-urlencoded"])
        return WireStream(ws)

    def exec(self, unit_name: str, command: List[str], pod: str = "",
             interactive: bool = False, tty: bool = False) -> WireStream:
        s = self.stream("rest/v1/exec/")
        s.send_params({"PodName": pod, "UnitName": unit_name, "Command": command,
                       "Interactive": interactive, "TTY": tty,
                       "SkipNSEnter": False})
        return s

    def attach(self, unit_name: str, pod: str = "", interactive: bool = False,
               tty: bool = False) -> WireStream:
        s = self.stream("rest/v1/attach/")
        s.send_params({"PodName": pod, "UnitName": unit_name,
                       "Interactive": interactive, "TTY": tty})
        return s

    def port_forward(self, port: int, pod: str = "") -> WireStream:
        s = self.stream("rest/v1/portforward/")
        s.send_params({"PodName": pod, "Port": str(port)})
        return s

    def follow_logs(self, unit_name: str, metadata: bool = False) -> WireStream:
        """The controller's URL: Go's url.URL{Path: "…?follow=1…"} escapes
        the '?' into the path."""
        return self.stream(f"rest/v1/logs/{unit_name}%3Ffollow=1&metadata="
                           f"{1 if metadata else 0}")
