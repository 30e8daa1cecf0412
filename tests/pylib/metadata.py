# SPDX-License-Identifier: Apache-2.0
"""Fake cloud metadata services on 127.0.0.1, for cell-cloudinit's tests.

They follow the public APIs as the clouds document them, closely enough that
real clients (curl as AWS's docs use it, botocore's InstanceMetadataFetcher)
work against them unchanged:

``IMDS`` (EC2 Instance Metadata Service)
    * ``PUT /latest/api/token`` with ``X-aws-ec2-metadata-token-ttl-seconds``
      (an integer 1–21600; missing or out of range → 400) returns a session
      token, echoing the TTL header. A token request carrying
      ``X-Forwarded-For`` is refused (403), as IMDS refuses proxied ones.
      ``GET`` on the token path → 405.
    * ``GET`` under ``/latest/`` with ``X-aws-ec2-metadata-token``: an unknown
      or expired token → 401 in every mode; no token → 401 when
      ``mode="required"`` (IMDSv2 only), allowed with ``mode="optional"``.
      ``mode="v1"`` is an IMDS without IMDSv2 at all: the token path is 404
      and tokens are ignored, which is what makes clients fall back to v1.
    * directory listings end in ``/`` (``meta-data/``, ``public-keys/`` gives
      ``0=name``), missing paths are 404, ``/latest/user-data`` is 404 when
      there is none. ``iam/security-credentials/<role>`` serves credentials
      JSON (what botocore fetches).
``GCE`` (Compute Engine metadata server)
    * ``Metadata-Flavor: Google`` is required (else 403) and is sent back on
      every reply; ``X-Forwarded-For`` → 403. ``/computeMetadata/v1/…`` with
      listings for paths ending in ``/`` and ``?recursive=true`` JSON.
``Azure`` (Azure Instance Metadata Service)
    * ``Metadata: true`` is required (else 400 with a JSON error), as is a
      known ``api-version`` (else 400); ``X-Forwarded-For`` → 400.
      ``/metadata/instance`` is the JSON document; leaf paths need
      ``format=text``; ``/metadata/instance/compute/userData`` is base64.

Every server records ``requests`` as (method, path, headers) and can be told
to answer slowly (``delay``) or to drop its tokens (``IMDS.revoke_tokens``).
``Silent`` accepts connections and never answers, like a filtered address.
"""

from __future__ import annotations

import base64
import json
import secrets
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Tuple

EC2_MAX_TTL = 21600
AZURE_VERSIONS = ("2017-04-02", "2018-10-01", "2019-06-01", "2020-09-01",
                  "2021-01-01", "2021-02-01", "2021-05-01", "2023-07-01")


class Headers(dict):
    """Request headers as recorded: names compare case-blind, like HTTP's."""

    def __init__(self, items):
        super().__init__((k.lower(), v) for k, v in items)

    def get(self, k, d=None):
        return super().get(k.lower(), d)

    def __getitem__(self, k):
        return super().__getitem__(k.lower())

    def __contains__(self, k):
        return super().__contains__(k.lower())


class _Server:
    """A threaded HTTP server in a daemon thread; subclasses handle()."""

    def __init__(self, delay: float = 0.0, bind: Tuple[str, int] = ("127.0.0.1", 0)):
        self.requests: List[Tuple[str, str, Headers]] = []
        self.delay = delay
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # keep pytest output clean
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(min(n, 1 << 20))
                with outer.lock:
                    outer.requests.append((self.command, self.path,
                                           Headers(self.headers.items())))
                if outer.delay:
                    time.sleep(outer.delay)
                status, headers, body = outer.handle(self.command, self.path, self.headers)
                if isinstance(body, str):
                    body = body.encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        class Server(ThreadingHTTPServer):
            # The default backlog of 5 drops the SYNs of a client that
            # opens more connections at once; it then waits 1 s to retry.
            request_queue_size = 128

        self.httpd = Server(bind, Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://{bind[0]}:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def handle(self, method, path, headers):  # pragma: no cover - abstract
        raise NotImplementedError

    def paths(self, method: Optional[str] = None) -> List[str]:
        with self.lock:
            return [p for m, p, _ in self.requests if method is None or m == method]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _tree_get(tree: dict, parts: List[str]):
    node = tree
    for p in parts:
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node


def _listing(node: dict) -> str:
    return "\n".join(k + ("/" if isinstance(v, dict) else "") for k, v in node.items())


class IMDS(_Server):
    """EC2's IMDS. ``meta`` maps meta-data keys to values (nested dicts for
    directories); ``public_keys`` is a list of (name, openssh key)."""

    def __init__(self, instance_id: str = "i-0123456789abcdef0", mode: str = "required",
                 user_data: Optional[bytes] = None, hostname: str = "ip-10-0-0-5.ec2.internal",
                 local_ipv4: str = "10.0.0.5", public_ipv4: Optional[str] = "203.0.113.5",
                 public_keys: Optional[List[Tuple[str, str]]] = None, **kw):
        assert mode in ("required", "optional", "v1")
        self.mode = mode
        self.user_data = user_data
        self.tokens: Dict[str, float] = {}
        self.meta: dict = {
            "ami-id": "ami-0abcdef1234567890",
            "instance-id": instance_id,
            "instance-type": "t3.micro",
            "hostname": hostname,
            "local-hostname": hostname,
            "local-ipv4": local_ipv4,
            "placement": {"availability-zone": "us-east-1a", "region": "us-east-1"},
            "iam": {"security-credentials": {"cell-role": json.dumps({
                "Code": "Success", "Type": "AWS-HMAC",
                "AccessKeyId": "ASIAFAKEFAKEFAKEFAKE",
                "SecretAccessKey": "fakeSecretKeyfakeSecretKeyfakeSecretKey",
                "Token": "fakeSessionToken", "Expiration": "2999-01-01T00:00:00Z",
                "LastUpdated": "2024-01-01T00:00:00Z"})}},
        }
        if public_ipv4:
            self.meta["public-ipv4"] = public_ipv4
        self.key_names = [name for name, _ in public_keys or []]
        if public_keys:
            self.meta["public-keys"] = {str(i): {"openssh-key": key}
                                        for i, (_, key) in enumerate(public_keys)}
        super().__init__(**kw)

    def set_instance_id(self, iid: str) -> None:
        self.meta["instance-id"] = iid

    def revoke_tokens(self) -> None:
        with self.lock:
            self.tokens.clear()

    def token_requests(self) -> int:
        return len([p for p in self.paths("PUT") if p == "/latest/api/token"])

    def _token(self, headers) -> Tuple[int, dict, str]:
        if self.mode == "v1":
            return 404, {"Content-Type": "text/html"}, "<html>404 - Not Found</html>"
        if headers.get("X-Forwarded-For"):
            return 403, {}, "Forbidden"
        ttl = headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        try:
            n = int(ttl) if ttl is not None and ttl.strip().isdigit() else -1
        except ValueError:
            n = -1
        if not 1 <= n <= EC2_MAX_TTL:
            return 400, {}, "Bad Request"
        tok = secrets.token_urlsafe(42)
        with self.lock:
            self.tokens[tok] = time.monotonic() + n
        return 200, {"Content-Type": "text/plain",
                     "X-Aws-Ec2-Metadata-Token-Ttl-Seconds": str(n)}, tok

    def _authorized(self, headers) -> Tuple[bool, dict]:
        tok = headers.get("X-aws-ec2-metadata-token")
        if self.mode == "v1":
            return True, {}
        if tok is None:
            return self.mode == "optional", {}
        with self.lock:
            exp = self.tokens.get(tok)
        if exp is None or exp <= time.monotonic():
            return False, {}
        return True, {"X-Aws-Ec2-Metadata-Token-Ttl-Seconds": str(int(exp - time.monotonic()))}

    def handle(self, method, path, headers):
        u = urllib.parse.urlsplit(path)
        if u.path == "/latest/api/token":
            if method != "PUT":
                return 405, {"Allow": "PUT"}, "Method Not Allowed"
            return self._token(headers)
        if method not in ("GET", "HEAD"):
            return 405, {"Allow": "GET"}, "Method Not Allowed"
        ok, extra = self._authorized(headers)
        if not ok:
            return 401, {"Content-Type": "text/plain"}, "Unauthorized"
        hdrs = {"Content-Type": "text/plain", "Server": "EC2ws", **extra}
        if u.path in ("/", ""):
            return 200, hdrs, "latest"
        if u.path == "/latest/" or u.path == "/latest":
            return 200, hdrs, "dynamic\nmeta-data\nuser-data"
        if u.path == "/latest/user-data":
            if self.user_data is None:
                return 404, {"Content-Type": "text/html"}, "Not Found"
            return 200, {**hdrs, "Content-Type": "application/octet-stream"}, self.user_data
        if u.path.startswith("/latest/meta-data"):
            rest = u.path[len("/latest/meta-data"):].strip("/")
            node = _tree_get(self.meta, rest.split("/") if rest else [])
            if node is None:
                return 404, {"Content-Type": "text/html"}, "Not Found"
            if rest == "public-keys":  # IMDS lists keys as "0=name"
                return 200, hdrs, "\n".join(f"{i}={n}" for i, n in enumerate(self.key_names))
            if isinstance(node, dict):
                return 200, hdrs, _listing(node)
            return 200, hdrs, node
        return 404, {"Content-Type": "text/html"}, "Not Found"


class GCE(_Server):
    def __init__(self, instance_id: str = "4520031799277581759", hostname: str =
                 "cell-1.c.project.internal", ip: str = "10.128.0.7",
                 external_ip: Optional[str] = "34.1.2.3",
                 attributes: Optional[dict] = None, project_attributes: Optional[dict] = None,
                 **kw):
        self.tree = {
            "instance": {
                "id": instance_id,
                "hostname": hostname,
                "zone": "projects/1234/zones/us-central1-a",
                "network-interfaces": {"0": {
                    "ip": ip,
                    "access-configs": {"0": {"external-ip": external_ip or ""}},
                }},
                "attributes": dict(attributes or {}),
            },
            "project": {"project-id": "project", "attributes": dict(project_attributes or {})},
        }
        if external_ip is None:
            del self.tree["instance"]["network-interfaces"]["0"]["access-configs"]
        super().__init__(**kw)

    def handle(self, method, path, headers):
        base = {"Metadata-Flavor": "Google", "Server": "Metadata Server for VM"}
        if headers.get("X-Forwarded-For") or headers.get("Metadata-Flavor") != "Google":
            return 403, {"Content-Type": "text/html"}, \
                "Your client does not have permission to get URL from this server. " \
                "Missing Metadata-Flavor:Google header."
        if method != "GET":
            return 405, base, "Method Not Allowed"
        u = urllib.parse.urlsplit(path)
        q = urllib.parse.parse_qs(u.query)
        if not u.path.startswith("/computeMetadata/v1/"):
            return 404, base, "Not Found"
        rest = u.path[len("/computeMetadata/v1/"):]
        node = _tree_get(self.tree, [p for p in rest.split("/") if p])
        if node is None:
            return 404, {**base, "Content-Type": "text/html"}, "Not Found"
        if q.get("recursive") == ["true"] or q.get("alt") == ["json"]:
            return 200, {**base, "Content-Type": "application/json"}, json.dumps(node)
        if isinstance(node, dict):
            if not rest.endswith("/"):  # GCE redirects a directory without '/'
                return 301, {**base, "Location": u.path + "/"}, ""
            return 200, {**base, "Content-Type": "application/text"}, _listing(node) + "\n"
        return 200, {**base, "Content-Type": "application/text"}, node


class Azure(_Server):
    def __init__(self, vm_id: str = "02aab8a4-74ef-476e-8182-f6d2ba4166a6",
                 name: str = "cell-az", private_ip: str = "10.1.0.4",
                 public_ip: Optional[str] = "20.30.40.50", user_data: Optional[bytes] = None,
                 public_keys: Optional[List[str]] = None, **kw):
        self.user_data = user_data
        self.doc = {
            "compute": {
                "azEnvironment": "AzurePublicCloud", "location": "westeurope",
                "name": name, "vmId": vm_id, "vmSize": "Standard_B1s",
                "osProfile": {"adminUsername": "azureuser", "computerName": name},
                "publicKeys": [{"keyData": k, "path": "/home/azureuser/.ssh/authorized_keys"}
                               for k in (public_keys or [])],
                "userData": base64.b64encode(user_data or b"").decode(),
            },
            "network": {"interface": [{
                "ipv4": {"ipAddress": [{"privateIpAddress": private_ip,
                                        "publicIpAddress": public_ip or ""}],
                         "subnet": [{"address": "10.1.0.0", "prefix": "24"}]},
                "macAddress": "000D3AF806EC"}]},
        }
        super().__init__(**kw)

    def _error(self, msg: str):
        return 400, {"Content-Type": "application/json; charset=utf-8"}, \
            json.dumps({"error": msg, "newest-versions": list(AZURE_VERSIONS[-3:])})

    def handle(self, method, path, headers):
        if headers.get("X-Forwarded-For"):
            return self._error("Bad request. Request was forwarded by a proxy.")
        if (headers.get("Metadata") or "").lower() != "true":
            return self._error("Bad request. Required metadata header not specified")
        u = urllib.parse.urlsplit(path)
        q = urllib.parse.parse_qs(u.query)
        ver = (q.get("api-version") or [None])[0]
        if ver is None:
            return self._error("Bad request. api-version was not specified in the request. "
                               "For more information refer to aka.ms/azureimds")
        if ver not in AZURE_VERSIONS:
            return self._error("Bad request. api-version is invalid or was not specified "
                               "in the request. For more information refer to aka.ms/azureimds")
        if method != "GET":
            return 405, {}, "Method Not Allowed"
        if not u.path.startswith("/metadata/instance"):
            return 404, {"Content-Type": "application/json"}, json.dumps({"error": "Not found"})
        parts = [p for p in u.path[len("/metadata/instance"):].split("/") if p]
        node = _tree_get(self.doc, parts)
        if node is None:
            return 404, {"Content-Type": "application/json"}, json.dumps({"error": "Not found"})
        fmt = (q.get("format") or ["json"])[0]
        if not isinstance(node, (dict, list)):
            if fmt != "text":
                return self._error("Bad request. format=json is not supported for leaf nodes")
            return 200, {"Content-Type": "text/plain; charset=utf-8"}, str(node)
        return 200, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(node)


class Static(_Server):
    """Serves fixed bodies by path (the URL datasource)."""

    def __init__(self, files: Dict[str, bytes], **kw):
        self.files = files
        super().__init__(**kw)

    def handle(self, method, path, headers):
        body = self.files.get(urllib.parse.urlsplit(path).path)
        if body is None:
            return 404, {}, "Not Found"
        return 200, {"Content-Type": "application/octet-stream"}, body


class Silent:
    """Accepts TCP connections and never answers: a black-holed service."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.conns: List[socket.socket] = []
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.sock.accept()
                self.conns.append(c)
            except OSError:
                continue

    def close(self):
        self.stop = True
        self.thread.join(timeout=2)
        for c in self.conns:
            c.close()
        self.sock.close()


def refused_url() -> str:
    """A loopback URL where nothing listens (connections are refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"
