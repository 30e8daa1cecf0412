# SPDX-License-Identifier: Apache-2.0
"""A small fault-injecting HTTP proxy for registry tests (loopback only).

``Proxy(upstream_port)`` listens on 127.0.0.1:<free port> and forwards every
request to the registry at 127.0.0.1:<upstream_port> (plain HTTP), streaming
the response back. Rules make it misbehave for chosen requests:

* ``corrupt(digest)``: flip one byte of that blob's body (same length), so
  the client receives bytes whose sha256 differs from the digest it asked
  for: a real digest mismatch, which the registry itself never serves.
* ``drop_after(digest, n)``: send the headers and the first ``n`` body bytes,
  then cut the connection (RST); the client sees a short read mid-blob.
* ``status(path_substring, code)``: answer with an error status instead of
  forwarding (e.g. 503 for the first N manifest GETs).
* ``replace(path_substring, data)``: forward, but answer with ``data`` as
  the body (upstream status and headers kept, Content-Length fixed): e.g. a
  different, valid manifest for a pull by digest.
* ``delay(path_substring, seconds)``: wait before forwarding.
* ``hold(path_substring)``: wait before forwarding until the rule's
  ``release()`` (or the proxy's timeout): a request stalled for as long as
  a test needs, no longer.

Each rule applies ``times`` times (None = always). Every request is recorded
with its headers (so the Range header is visible here even though the
registry does not log it), the upstream status and the body bytes sent.

If the upstream is down the client connection is closed without a response.
Threads are daemons with socket timeouts; ``close()`` stops everything.
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional

CHUNK = 64 * 1024
MAX_BUFFERED_BODY = 256 << 20
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
              "te", "trailers", "transfer-encoding", "upgrade"}


@dataclass
class Rule:
    action: str                 # corrupt | drop | status | replace | delay | hold
    match: str                  # substring of the request path
    method: Optional[str] = "GET"
    offset: int = 0             # corrupt: byte to flip; drop: bytes to send
    code: int = 503             # status
    seconds: float = 0.0        # delay
    body: bytes = b""           # replace
    headers: Optional[Dict[str, str]] = None  # status: extra reply headers
    times: Optional[int] = None
    hits: int = 0
    held: threading.Event = field(default_factory=threading.Event)  # hold

    def release(self) -> None:
        """hold: let the held requests (and later ones) through."""
        self.held.set()

    def applies(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method and method != self.method:
            return False
        return self.match in path


@dataclass
class ProxiedRequest:
    method: str
    path: str
    headers: Dict[str, str]
    status: Optional[int] = None
    sent: int = 0
    action: Optional[str] = None
    done: bool = False
    error: Optional[str] = None
    t: float = field(default_factory=time.monotonic)

    @property
    def range(self) -> Optional[str]:
        for k, v in self.headers.items():
            if k.lower() == "range":
                return v
        return None


class Proxy:
    """See the module docstring."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1",
                 timeout: float = 30.0, rate: Optional[float] = None):
        """``rate``: bytes/s of reply bodies, all connections together (a
        registry far away); None: as fast as loopback goes."""
        self.upstream = (upstream_host, upstream_port)
        self.timeout = timeout
        self.rate = rate
        self._next_free = 0.0  # when the throttled link is free again
        self.rules: List[Rule] = []
        self.log: List[ProxiedRequest] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                pass

            def setup(self):
                super().setup()
                self.connection.settimeout(proxy.timeout)

            def do_GET(self):
                proxy._forward(self)

            do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = do_GET

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    # ---- rules ----
    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def corrupt(self, digest: str, offset: int = 0, times: Optional[int] = None) -> Rule:
        return self.add(Rule("corrupt", f"/blobs/{digest}", offset=offset, times=times))

    def drop_after(self, digest: str, nbytes: int, times: Optional[int] = 1) -> Rule:
        return self.add(Rule("drop", f"/blobs/{digest}", offset=nbytes, times=times))

    def status(self, match: str, code: int, times: Optional[int] = None,
               method: Optional[str] = "GET",
               headers: Optional[Dict[str, str]] = None) -> Rule:
        return self.add(Rule("status", match, method=method, code=code, times=times,
                             headers=headers))

    def replace(self, match: str, data: bytes, times: Optional[int] = None) -> Rule:
        return self.add(Rule("replace", match, body=data, times=times))

    def delay(self, match: str, seconds: float, times: Optional[int] = None) -> Rule:
        return self.add(Rule("delay", match, seconds=seconds, times=times))

    def hold(self, match: str, times: Optional[int] = None) -> Rule:
        return self.add(Rule("hold", match, times=times))

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def _take_rule(self, method: str, path: str) -> Optional[Rule]:
        with self._lock:
            for r in self.rules:
                if r.applies(method, path):
                    r.hits += 1
                    return r
        return None

    # ---- inspection ----
    def requests(self, match: str = "", method: Optional[str] = None) -> List[ProxiedRequest]:
        with self._lock:
            return [r for r in self.log if match in r.path
                    and (method is None or r.method == method)]

    # ---- forwarding ----
    def _forward(self, h: BaseHTTPRequestHandler) -> None:
        method, path = h.command, h.path
        rec = ProxiedRequest(method, path, {k: v for k, v in h.headers.items()})
        with self._lock:
            self.log.append(rec)
        rule = self._take_rule(method, path)
        rec.action = rule.action if rule else None

        if "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
            return self._simple(h, rec, 411, b"chunked request bodies not supported")
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n else None

        if rule and rule.action == "status":
            return self._simple(h, rec, rule.code,
                                b'{"errors":[{"code":"UNAVAILABLE","message":"injected"}]}',
                                rule.headers)
        if rule and rule.action == "delay":
            time.sleep(rule.seconds)
        if rule and rule.action == "hold":
            rule.held.wait(self.timeout)

        headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Host"] = f"{self.upstream[0]}:{self.upstream[1]}"
        conn = http.client.HTTPConnection(*self.upstream, timeout=self.timeout)
        try:
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
            except OSError as e:
                rec.error = f"upstream: {e}"
                self._abort(h)
                return
            rec.status = resp.status
            length = resp.getheader("Content-Length")
            data = None
            if rule and rule.action == "replace":
                resp.read(MAX_BUFFERED_BODY)
                data = rule.body
                length = str(len(data))
            elif length is None and method != "HEAD" and resp.status not in (204, 304):
                data = resp.read(MAX_BUFFERED_BODY)
                length = str(len(data))
            h.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() in HOP_BY_HOP or k.lower() == "content-length":
                    continue
                if k.lower() == "location":
                    v = v.replace(f"{self.upstream[0]}:{self.upstream[1]}", self.host)
                h.send_header(k, v)
            if length is not None:
                h.send_header("Content-Length", length)
            h.end_headers()
            if method == "HEAD":
                rec.done = True
                return
            self._stream(h, rec, rule, resp, data)
        finally:
            conn.close()

    def _stream(self, h, rec, rule, resp, data) -> None:
        pos = 0
        while True:
            chunk = data if data is not None else resp.read(CHUNK)
            data = b"" if data is not None else None
            if not chunk:
                break
            if rule and rule.action == "corrupt" and pos <= rule.offset < pos + len(chunk):
                i = rule.offset - pos
                chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1:]
            if rule and rule.action == "drop" and pos + len(chunk) >= rule.offset:
                chunk = chunk[:rule.offset - pos]
                try:
                    h.wfile.write(chunk)
                    h.wfile.flush()
                except OSError:
                    pass
                rec.sent = pos + len(chunk)
                self._abort(h)
                return
            self._pace(len(chunk))
            try:
                h.wfile.write(chunk)
            except OSError as e:
                rec.error = f"client: {e}"
                h.close_connection = True
                return
            pos += len(chunk)
            rec.sent = pos
        try:
            h.wfile.flush()
        except OSError:
            pass
        rec.done = True

    def _pace(self, n: int) -> None:
        """Hold n bytes until the shared link (``rate``) has room for them."""
        if not self.rate:
            return
        with self._lock:
            now = time.monotonic()
            until = max(now, self._next_free) + n / self.rate
            self._next_free = until
        if until > now:
            time.sleep(until - now)

    def sent_bytes(self) -> int:
        """Reply body bytes sent so far, every request together."""
        with self._lock:
            return sum(r.sent or 0 for r in self.log)

    @staticmethod
    def _abort(h) -> None:
        """Cut the client connection with a RST, as a dying server would."""
        h.close_connection = True
        try:
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
            h.connection.close()
        except OSError:
            pass

    @staticmethod
    def _simple(h, rec, code: int, body: bytes,
                headers: Optional[Dict[str, str]] = None) -> None:
        rec.status = code
        h.send_response(code)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)
        rec.sent = len(body)
        rec.done = True

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)
