# SPDX-License-Identifier: Apache-2.0
"""A bearer-token server for docker-registry's ``auth: token`` mode.

It follows the Docker token authentication spec as distribution 2.8 checks
it (registry/auth/token/token.go):

* the JWT header is ``{"typ": "JWT", "alg": "ES256", "x5c": [base64 DER]}``:
  the registry verifies the x5c chain against ``rootcertbundle`` and uses
  the leaf's key. (Without x5c it falls back to ``kid``, the libtrust key ID
  of a key in the bundle; ``key_mode="kid"`` exercises that instead.)
* the ES256 signature is the raw ``r || s`` (32 + 32 bytes), base64url;
* claims: ``iss`` must equal the configured issuer, ``aud`` (a string in
  2.8) the service, ``exp``/``nbf`` are checked (60 s leeway), plus ``sub``,
  ``iat``, ``jti`` and ``access: [{type, name, actions}]`` which must cover
  what the request needs (e.g. repository:foo:pull).

Requests: ``GET /token?service=S&scope=repository:foo:pull[&scope=…]`` with
HTTP Basic credentials (one of ``users``); an OAuth2 ``POST /token`` form
(grant_type=password, username, password, service, scope) is accepted too.
Wrong credentials get 401; a missing or wrong service gets 400. The reply is
``{"token", "access_token", "expires_in", "issued_at"}``. Every request is
recorded in ``requests`` so tests can assert that a client caches its token
per scope (``count(scope=…)``).

The server runs in a daemon thread on 127.0.0.1; ``close()`` stops it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Sequence

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

import pki


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def libtrust_key_id(public_key) -> str:
    """The libtrust key ID: base32 of the first 30 bytes of SHA-256(SPKI DER),
    in 12 colon-separated groups of 4 characters."""
    der = public_key.public_bytes(serialization.Encoding.DER,
                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    s = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode().rstrip("=")
    return ":".join(s[i:i + 4] for i in range(0, 48, 4))


def parse_scope(scope: str) -> Optional[dict]:
    """"repository:name:pull,push" → {type, name, actions}; None if malformed."""
    typ, sep, rest = scope.partition(":")
    if not sep:
        return None
    name, sep, actions = rest.rpartition(":")
    if not sep or not name:
        return None
    return {"type": typ, "name": name,
            "actions": [a for a in actions.split(",") if a]}


def normalize_scope(scope: str) -> str:
    """Sort a scope's actions: the registry's challenges say "pull,push" or
    "push,pull" at random (Go map order)."""
    p = parse_scope(scope)
    if p is None:
        return scope
    return f"{p['type']}:{p['name']}:{','.join(sorted(set(p['actions'])))}"


@dataclass
class TokenRequest:
    method: str
    user: Optional[str]
    ok: bool
    status: int
    service: Optional[str]
    scopes: List[str]


class TokenServer:
    """See the module docstring."""

    def __init__(self, basedir: str, users: Optional[Dict[str, str]] = None, *,
                 service: str = "cell-test-registry", issuer: str = "cell-test-issuer",
                 expires_in: int = 300, key_mode: str = "x5c",
                 allow_anonymous: bool = False,
                 actions: Sequence[str] = ("pull", "push", "delete", "*")):
        os.makedirs(basedir, exist_ok=True)
        self.basedir = basedir
        self.users = dict(users or {"tester": "s3cret"})
        self.service = service
        self.issuer = issuer
        self.expires_in = expires_in
        self.key_mode = key_mode
        self.allow_anonymous = allow_anonymous
        self.allowed_actions = set(actions)
        self.requests: List[TokenRequest] = []
        self._lock = threading.Lock()
        # Signing key: a leaf issued by a throwaway CA. The bundle the
        # registry trusts holds the CA (for x5c) and the leaf (for kid).
        self.ca = pki.CA.create(basedir, cn="cell-test token CA", basename="token-ca")
        self.signer = self.ca.issue(basedir, "token-signer", cn="cell-test token signer",
                                    server=False, client=False)
        self.rootcertbundle = os.path.join(basedir, "token-bundle.pem")
        with open(self.rootcertbundle, "wb") as f:
            f.write(pki.cert_pem(self.ca.cert) + self.signer.cert_pem)
        self.kid = libtrust_key_id(self.signer.key.public_key())

        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 30

            def log_message(self, fmt, *args):  # quiet
                pass

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                if u.path != "/token":
                    return self._reply(404, {"error": "not found"})
                q = urllib.parse.parse_qs(u.query)
                user, pw = self._basic()
                self._handle("GET", user, pw, q.get("service", [None])[0],
                             q.get("scope", []))

            def do_POST(self):
                u = urllib.parse.urlsplit(self.path)
                if u.path != "/token":
                    return self._reply(404, {"error": "not found"})
                n = int(self.headers.get("Content-Length") or 0)
                if n > 65536:
                    return self._reply(413, {"error": "too large"})
                form = urllib.parse.parse_qs(self.rfile.read(n).decode("utf-8", "replace"))
                user = form.get("username", [None])[0]
                pw = form.get("password", [None])[0]
                if user is None:
                    user, pw = self._basic()
                scopes = []
                for s in form.get("scope", []):
                    scopes += s.split(" ")
                self._handle("POST", user, pw, form.get("service", [None])[0], scopes)

            def _basic(self):
                h = self.headers.get("Authorization", "")
                if not h.lower().startswith("basic "):
                    return None, None
                try:
                    dec = base64.b64decode(h[6:].strip()).decode()
                except Exception:
                    return None, None
                user, _, pw = dec.partition(":")
                return user, pw

            def _handle(self, method, user, pw, service, scopes):
                status, body = server._issue(user, pw, service, scopes)
                with server._lock:
                    server.requests.append(TokenRequest(method, user, status == 200, status,
                                                        service, list(scopes)))
                extra = {}
                if status == 401:
                    extra["WWW-Authenticate"] = 'Basic realm="cell-test token"'
                self._reply(status, body, extra)

            def _reply(self, status, obj, extra=None):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()

    # ---- config the registry needs ----
    @property
    def realm(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    # ---- issuing ----
    def _issue(self, user, pw, service, scopes):
        if user is None:
            if not self.allow_anonymous:
                return 401, {"errors": [{"code": "UNAUTHORIZED",
                                         "message": "authentication required"}]}
        elif self.users.get(user) != pw:
            return 401, {"errors": [{"code": "UNAUTHORIZED",
                                     "message": "invalid username or password"}]}
        if service != self.service:
            return 400, {"errors": [{"code": "INVALID_REQUEST",
                                     "message": f"unknown service {service!r}"}]}
        access = []
        for s in scopes:
            p = parse_scope(s)
            if p is None:
                return 400, {"errors": [{"code": "INVALID_REQUEST",
                                         "message": f"bad scope {s!r}"}]}
            if user is None:
                p["actions"] = [a for a in p["actions"] if a == "pull"]
            else:
                p["actions"] = [a for a in p["actions"] if a in self.allowed_actions]
            access.append(p)
        tok = self.make_token(user or "", access)
        now = time.time()
        return 200, {"token": tok, "access_token": tok, "expires_in": self.expires_in,
                     "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))}

    def make_token(self, subject: str, access: List[dict], *,
                   expires_in: Optional[int] = None, issuer: Optional[str] = None,
                   audience: Optional[str] = None) -> str:
        """A signed JWT (ES256) the registry accepts (overrides for negative tests)."""
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256"}
        if self.key_mode == "x5c":
            header["x5c"] = [base64.b64encode(self.signer.cert_der).decode()]
        else:
            header["kid"] = self.kid
        claims = {
            "iss": issuer or self.issuer,
            "sub": subject,
            "aud": audience or self.service,
            "exp": now + (self.expires_in if expires_in is None else expires_in),
            "nbf": now - 10,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": access,
        }
        signing_input = (b64url(json.dumps(header, separators=(",", ":")).encode()) + "." +
                         b64url(json.dumps(claims, separators=(",", ":")).encode()))
        der = self.signer.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return signing_input + "." + b64url(sig)

    # ---- inspection ----
    def count(self, scope: Optional[str] = None, ok_only: bool = True) -> int:
        """Token requests seen (that asked for ``scope``, if given; the order
        of actions does not matter)."""
        with self._lock:
            reqs = list(self.requests)
        want = normalize_scope(scope) if scope else None
        return sum(1 for r in reqs if (not ok_only or r.ok)
                   and (want is None or want in map(normalize_scope, r.scopes)))

    def scopes_seen(self, ok_only: bool = False) -> List[List[str]]:
        """The scopes of each request, normalized (actions sorted)."""
        with self._lock:
            return [[normalize_scope(s) for s in r.scopes] for r in self.requests
                    if r.ok or not ok_only]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)
