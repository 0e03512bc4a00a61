"""The self-signed certificate script the chart's hook Jobs run (charts/tephra/files/).

The API server must trust the webhook's serving certificate through the caBundle: the chain,
the Service DNS names and the renewal rule are checked here, and a real TLS handshake is made
with the CA as the only trust anchor, as the API server would.
"""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path
from types import ModuleType

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.charts.helmtools import CHART_DIR
from tests.scripts import load_script

SCRIPT = CHART_DIR / "files" / "webhook-certs.py"
SERVICE, NAMESPACE = "tephra-webhook", "tephra-system"


@pytest.fixture(scope="module")
def certs() -> ModuleType:
    return load_script(SCRIPT, "tephra_webhook_certs")


def _names(certs: ModuleType) -> list[str]:
    names: list[str] = certs.service_dns_names(SERVICE, NAMESPACE)
    return names


def test_generated_chain(certs: ModuleType) -> None:
    pem = certs.generate(dns_names=_names(certs), validity_days=365)
    cert = x509.load_pem_x509_certificate(pem["tls.crt"])
    ca = x509.load_pem_x509_certificate(pem["ca.crt"])
    key = serialization.load_pem_private_key(pem["tls.key"], password=None)
    cert.verify_directly_issued_by(ca)
    assert key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == cert.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == {
        SERVICE,
        f"{SERVICE}.{NAMESPACE}",
        f"{SERVICE}.{NAMESPACE}.svc",
        f"{SERVICE}.{NAMESPACE}.svc.cluster.local",
    }
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
    assert 365 <= days <= 366


def test_tls_handshake_trusting_only_the_ca(certs: ModuleType, tmp_path: Path) -> None:
    pem = certs.generate(dns_names=_names(certs), validity_days=30)
    for name, content in pem.items():
        (tmp_path / name).write_bytes(content)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            conn, _ = listener.accept()
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(tls.recv(5))
        except (OSError, ssl.SSLError) as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        client_ctx.wrap_socket(raw, server_hostname=f"{SERVICE}.{NAMESPACE}.svc") as tls,
    ):
        tls.sendall(b"hello")
        assert tls.recv(5) == b"hello"
    thread.join(10)
    listener.close()
    assert not errors

    # A name outside the certificate is refused.
    wrong = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve_once() -> None:
        conn, _ = listener.accept()
        try:
            server_ctx.wrap_socket(conn, server_side=True).close()
        except (OSError, ssl.SSLError):
            conn.close()

    thread = threading.Thread(target=serve_once, daemon=True)
    thread.start()
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        wrong.wrap_socket(raw, server_hostname="other.tephra-system.svc")
    thread.join(10)
    listener.close()


def test_still_good_rules(certs: ModuleType) -> None:
    names = _names(certs)
    fresh = certs.generate(dns_names=names, validity_days=365)
    assert certs.still_good(fresh, dns_names=names, renew_before_days=30) == (True, "valid")

    ok, why = certs.still_good(fresh, dns_names=[*names, "extra.svc"], renew_before_days=30)
    assert not ok and "extra.svc" in why

    soon = certs.generate(dns_names=names, validity_days=10)
    ok, why = certs.still_good(soon, dns_names=names, renew_before_days=30)
    assert not ok and "expires" in why

    ok, why = certs.still_good({**fresh, "ca.crt": b""}, dns_names=names, renew_before_days=30)
    assert not ok and "ca.crt" in why

    other = certs.generate(dns_names=names, validity_days=365)
    mixed = {**fresh, "ca.crt": other["ca.crt"]}
    ok, why = certs.still_good(mixed, dns_names=names, renew_before_days=30)
    assert not ok and "not issued" in why

    ok, why = certs.still_good(
        {**fresh, "tls.crt": b"garbage"}, dns_names=names, renew_before_days=1
    )
    assert not ok and "unreadable" in why


def test_generate_command_writes_files(certs: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc = certs.main(
        ["generate", "--namespace", NAMESPACE, "--service", SERVICE, "--out-dir", str(out)]
    )
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    data = {p.name: p.read_bytes() for p in out.iterdir()}
    assert certs.still_good(data, dns_names=_names(certs), renew_before_days=3000)[0]
