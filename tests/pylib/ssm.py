# SPDX-License-Identifier: Apache-2.0
"""A fake AWS Systems Manager (SSM) Parameter Store endpoint on 127.0.0.1.

It speaks the AWS JSON 1.1 protocol the way the service does (``POST /`` with
``X-Amz-Target: AmazonSSM.<Operation>`` and a JSON body; errors are HTTP 400
with ``{"__type": ..., "message": ...}``) for the operations the cell and the
AWS CLI need: ``PutParameter``, ``GetParameter``, ``DeleteParameter``.

Every request must carry an ``Authorization: AWS4-HMAC-SHA256 ...`` header.
The fake recomputes the signature with **botocore's own SigV4 signer** over
the headers the request says it signed, with the secret of the access key
it knows, and compares; a wrong one is refused with
``InvalidSignatureException`` exactly as SSM refuses it. A session token must
match its key and be among the signed headers; an expired key gets
``ExpiredTokenException``. The real ``aws ssm`` CLI (``--endpoint-url``)
works against it unchanged, which is what proves the fake.

SecureString values come back as an opaque ciphertext unless the request
asks ``WithDecryption``, as the real service does.

Serves HTTPS when given a certificate (tests/pylib/pki.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Tuple

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,"
                     r"\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$")


class Key:
    def __init__(self, akid: str, secret: str, token: Optional[str] = None,
                 expires: Optional[float] = None):
        self.akid, self.secret, self.token, self.expires = akid, secret, token, expires


class SSM:
    def __init__(self, region: str = "us-east-1", cert: Optional[str] = None,
                 key: Optional[str] = None):
        self.region = region
        self.keys: Dict[str, Key] = {}
        self.params: Dict[str, dict] = {}
        # (operation, access key id, parameter name, outcome)
        self.log: List[Tuple[str, str, str, str]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                status, reply = outer._handle(self.path, self.headers, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("x-amzn-RequestId", "00000000-0000-0000-0000-000000000000")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            request_queue_size = 64
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        scheme = "http"
        if cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.port = self.httpd.server_address[1]
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    # ---------------------------------------------------------------- control

    def add_key(self, akid: str, secret: str, token: Optional[str] = None,
                expires: Optional[float] = None) -> None:
        with self.lock:
            self.keys[akid] = Key(akid, secret, token, expires)

    def put(self, name: str, value: str, type_: str = "SecureString") -> None:
        with self.lock:
            old = self.params.get(name)
            self.params[name] = {"Value": value, "Type": type_,
                                 "Version": (old["Version"] + 1) if old else 1,
                                 "LastModifiedDate": time.time()}

    def outcomes(self, op: Optional[str] = None) -> List[Tuple[str, str, str, str]]:
        with self.lock:
            return [x for x in self.log if op is None or x[0] == op]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---------------------------------------------------------------- protocol

    @staticmethod
    def _err(type_: str, msg: str) -> Tuple[int, dict]:
        return 400, {"__type": type_, "message": msg}

    def _verify(self, path: str, headers, body: bytes) -> Tuple[Optional[Key], Optional[tuple]]:
        """(key, None) when the signature is right, else (None, error)."""
        auth = headers.get("Authorization")
        if not auth:
            return None, self._err("MissingAuthenticationTokenException",
                                   "Missing Authentication Token")
        m = AUTH_RE.match(auth)
        if not m:
            return None, self._err("IncompleteSignatureException",
                                   f"Authorization header is malformed: {auth[:80]}")
        akid, day, region, service, signed, sig = m.groups()
        with self.lock:
            key = self.keys.get(akid)
        if key is None:
            return None, self._err("UnrecognizedClientException",
                                   "The security token included in the request is invalid.")
        amz_date = headers.get("X-Amz-Date") or ""
        if region != self.region or service != "ssm" or not amz_date.startswith(day):
            return None, self._err("InvalidSignatureException",
                                   f"Credential should be scoped to a valid region/service "
                                   f"({region}/{service}/{day})")
        names = signed.split(";")
        if "host" not in names or "x-amz-date" not in names:
            return None, self._err("InvalidSignatureException",
                                   "host and x-amz-date must be signed")
        if key.token is not None:
            if headers.get("X-Amz-Security-Token") != key.token:
                return None, self._err("UnrecognizedClientException",
                                       "The security token included in the request is invalid.")
            if "x-amz-security-token" not in names:
                return None, self._err("InvalidSignatureException",
                                       "x-amz-security-token must be signed")
        req = AWSRequest(method="POST", url=f"https://{headers.get('Host')}{path}", data=body,
                         headers={n: headers.get(n) or "" for n in names})
        req.context["timestamp"] = amz_date
        signer = SigV4Auth(Credentials(key.akid, key.secret, key.token), "ssm", self.region)
        canonical = signer.canonical_request(req)
        want = signer.signature(signer.string_to_sign(req, canonical), req)
        if want != sig:
            return None, self._err(
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you "
                "provided. Check your AWS Secret Access Key and signing method.")
        if key.expires is not None and time.time() >= key.expires:
            return None, self._err("ExpiredTokenException",
                                   "The security token included in the request is expired")
        return key, None

    def _handle(self, path: str, headers, body: bytes) -> Tuple[int, dict]:
        target = headers.get("X-Amz-Target") or ""
        op = target.split(".", 1)[1] if target.startswith("AmazonSSM.") else target
        key, err = self._verify(path, headers, body)
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            req = None
        name = req.get("Name", "") if isinstance(req, dict) else ""
        if err is None and not isinstance(req, dict):
            err = self._err("SerializationException", "body is not a JSON object")
        if err is None and not (headers.get("Content-Type") or "").startswith(
                "application/x-amz-json-1.1"):
            err = self._err("SerializationException", "wrong Content-Type")
        if err is None:
            fn = {"GetParameter": self._get, "PutParameter": self._put,
                  "DeleteParameter": self._delete}.get(op)
            if fn is None:
                err = self._err("UnknownOperationException", f"unknown operation {target!r}")
            else:
                status, reply = fn(req)
        if err is not None:
            status, reply = err
        with self.lock:
            self.log.append((op, key.akid if key else (headers.get("Authorization") or "")[28:48],
                             name, "ok" if status == 200 else reply.get("__type", "?")))
        return status, reply

    def _get(self, req: dict) -> Tuple[int, dict]:
        name = req.get("Name")
        with self.lock:
            p = self.params.get(name)
        if p is None:
            return self._err("ParameterNotFound", "")
        value = p["Value"]
        if p["Type"] == "SecureString" and not req.get("WithDecryption"):
            # What SSM returns without decryption: KMS ciphertext.
            value = base64.b64encode(b"\x01\x02\x02\x00x" +
                                     hashlib.sha256(value.encode()).digest()).decode()
        return 200, {"Parameter": {
            "Name": name, "Type": p["Type"], "Value": value, "Version": p["Version"],
            "LastModifiedDate": p["LastModifiedDate"], "DataType": "text",
            "ARN": f"arn:aws:ssm:{self.region}:123456789012:parameter{name}"}}

    def _put(self, req: dict) -> Tuple[int, dict]:
        name, value = req.get("Name"), req.get("Value")
        if not isinstance(name, str) or not isinstance(value, str):
            return self._err("ValidationException", "Name and Value are required")
        if len(value.encode()) > 4096 and req.get("Tier", "Standard") == "Standard":
            return self._err("ValidationException",
                             "Standard tier parameters support a maximum value of 4096 bytes")
        with self.lock:
            exists = name in self.params
        if exists and not req.get("Overwrite"):
            return self._err("ParameterAlreadyExists", "The parameter already exists.")
        self.put(name, value, req.get("Type", "String"))
        return 200, {"Version": self.params[name]["Version"], "Tier": "Standard"}

    def _delete(self, req: dict) -> Tuple[int, dict]:
        with self.lock:
            if self.params.pop(req.get("Name"), None) is None:
                return self._err("ParameterNotFound", "")
        return 200, {}
