"""Self-signed TLS material: a CA, leaves it signs, and PEM files (for tests and development).

One home for the certificates Tephra makes itself: the real control plane's PKI
(`batch.sandbox.control_plane`) and the webhook's development certificate
(`tephra webhook --self-signed`). Keys are EC P-256; a certificate without an issuer is its own
CA. Production certificates come from the chart's hook Job or cert-manager, not from here.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["Issued", "issue", "new_key", "self_signed", "write_pem"]

Issued = tuple[ec.EllipticCurvePrivateKey, x509.Certificate]


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str, organization: str | None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def issue(
    common_name: str,
    *,
    organization: str | None = None,
    issuer: Issued | None = None,
    hosts: Sequence[str] = (),
    usage: x509.ObjectIdentifier | None = None,
    days: int = 30,
) -> Issued:
    """A new key and its certificate: a self-signed CA when `issuer` is None, else a leaf.

    `hosts` become subject alternative names (IP addresses or DNS names), `usage` the one
    extended key usage (e.g. `ExtendedKeyUsageOID.SERVER_AUTH`).
    """
    key = new_key()
    subject = _name(common_name, organization)
    signer_key, signer_name = (issuer[0], issuer[1].subject) if issuer else (key, subject)
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(signer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False
        )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return key, builder.sign(signer_key, hashes.SHA256())


def write_pem(
    path: Path, item: ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey | x509.Certificate
) -> Path:
    """Write a key (mode 0600, PKCS#8), public key or certificate as PEM; returns `path`."""
    if isinstance(item, ec.EllipticCurvePrivateKey):
        path.write_bytes(
            item.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)
    elif isinstance(item, x509.Certificate):
        path.write_bytes(item.public_bytes(serialization.Encoding.PEM))
    else:
        path.write_bytes(
            item.public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    return path


def self_signed(
    directory: Path, *, hosts: Sequence[str] = ("localhost", "127.0.0.1"), days: int = 365
) -> tuple[Path, Path]:
    """Write `tls.crt` (self-signed, SANs = hosts) and `tls.key` into `directory`: (cert, key).

    The certificate is its own CA, so it is also the caBundle a client trusts.
    """
    key, cert = issue(hosts[0], hosts=hosts, days=days)
    directory.mkdir(parents=True, exist_ok=True)
    return write_pem(directory / "tls.crt", cert), write_pem(directory / "tls.key", key)
