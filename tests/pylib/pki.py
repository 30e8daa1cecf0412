# SPDX-License-Identifier: Apache-2.0
"""A throwaway PKI for tests: a CA, server and client certificates.

Everything is ECDSA P-256 with SHA-256 signatures. Private keys are written
as SEC1 PEM ("-----BEGIN EC PRIVATE KEY-----"), the form the agent and the
controller use for their mutual TLS. Defaults follow Milpa/Kip naming (CA CN
"Milpa Server CA", leaf CN "MilpaNode", O "Elotl", OU "MilpaServer") so the
same module serves the registry's TLS tests now and the agent's mutual-TLS
tests later.

Example::

    ca = CA.create(tmpdir)                       # writes ca.pem, ca-key.pem
    srv = ca.issue_server(tmpdir, "registry", dns=["localhost"],
                          ips=["127.0.0.1"])    # registry.pem, registry-key.pem
    cli = ca.issue_client(tmpdir, "client")     # client.pem, client-key.pem
    srv.cert_path, srv.key_path, ca.cert_path
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from typing import Iterable, Optional

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CN = "Milpa Server CA"
LEAF_CN = "MilpaNode"
ORG = "Elotl"
ORG_UNIT = "MilpaServer"


def _name(cn: str, org: Optional[str] = ORG, ou: Optional[str] = ORG_UNIT) -> x509.Name:
    attrs = []
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def new_key() -> ec.EllipticCurvePrivateKey:
    """A fresh ECDSA P-256 private key."""
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """SEC1 ("EC PRIVATE KEY") PEM, unencrypted."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def cert_der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def _write(path: str, data: bytes, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


@dataclass
class Issued:
    """A certificate and its key, in memory and on disk."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_path: str
    key_path: str

    @property
    def cert_pem(self) -> bytes:
        return cert_pem(self.cert)

    @property
    def key_pem(self) -> bytes:
        return key_pem(self.key)

    @property
    def cert_der(self) -> bytes:
        return cert_der(self.cert)


class CA:
    """A self-signed certificate authority that issues leaf certificates."""

    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey,
                 cert_path: str, key_path: str):
        self.cert = cert
        self.key = key
        self.cert_path = cert_path
        self.key_path = key_path

    @classmethod
    def create(cls, directory: str, cn: str = CA_CN, org: Optional[str] = ORG,
               ou: Optional[str] = ORG_UNIT, basename: str = "ca",
               days: int = 3650) -> "CA":
        """Make a CA and write <basename>.pem and <basename>-key.pem."""
        os.makedirs(directory, exist_ok=True)
        key = new_key()
        name = _name(cn, org, ou)
        now = datetime.datetime.now(datetime.timezone.utc)
        ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False,
                    key_encipherment=False, data_encipherment=False,
                    key_agreement=False, key_cert_sign=True, crl_sign=True,
                    encipher_only=False, decipher_only=False),
                critical=True)
            .add_extension(ski, critical=False)
            .sign(key, hashes.SHA256())
        )
        cert_path = os.path.join(directory, basename + ".pem")
        key_path = os.path.join(directory, basename + "-key.pem")
        _write(cert_path, cert_pem(cert))
        _write(key_path, key_pem(key), 0o600)
        return cls(cert, key, cert_path, key_path)

    def issue(self, directory: str, basename: str, cn: str = LEAF_CN,
              dns: Iterable[str] = (), ips: Iterable[str] = (),
              server: bool = True, client: bool = False,
              org: Optional[str] = ORG, ou: Optional[str] = ORG_UNIT,
              days: int = 365, key: Optional[ec.EllipticCurvePrivateKey] = None,
              not_before: Optional[datetime.datetime] = None,
              not_after: Optional[datetime.datetime] = None) -> Issued:
        """Issue a leaf certificate; writes <basename>.pem and <basename>-key.pem.

        not_before/not_after override the validity window (for expired or
        not-yet-valid certificate tests).
        """
        os.makedirs(directory, exist_ok=True)
        key = key or new_key()
        now = datetime.datetime.now(datetime.timezone.utc)
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        sans = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        b = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, org, ou))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - datetime.timedelta(hours=1))
            .not_valid_after(not_after or now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False,
                    key_encipherment=False, data_encipherment=False,
                    key_agreement=True, key_cert_sign=False, crl_sign=False,
                    encipher_only=False, decipher_only=False),
                critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False)
        )
        if usages:
            b = b.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = b.sign(self.key, hashes.SHA256())
        cert_path = os.path.join(directory, basename + ".pem")
        key_path = os.path.join(directory, basename + "-key.pem")
        _write(cert_path, cert_pem(cert))
        _write(key_path, key_pem(key), 0o600)
        return Issued(cert, key, cert_path, key_path)

    def issue_server(self, directory: str, basename: str = "server",
                     cn: str = LEAF_CN, dns: Iterable[str] = ("localhost",),
                     ips: Iterable[str] = ("127.0.0.1",), **kw) -> Issued:
        """A TLS server certificate (serverAuth) with the given SANs."""
        return self.issue(directory, basename, cn=cn, dns=dns, ips=ips,
                          server=True, client=False, **kw)

    def issue_client(self, directory: str, basename: str = "client",
                     cn: str = LEAF_CN, **kw) -> Issued:
        """A TLS client certificate (clientAuth), no SANs unless given."""
        return self.issue(directory, basename, cn=cn, server=False, client=True, **kw)
