"""Self-signed serving certificate for Tephra's admission webhook (run by the chart's hook Jobs).

The API server calls the webhook over HTTPS and must trust its certificate. Without cert-manager,
the chart runs this script in the Tephra image (which carries `cryptography` and `kubernetes`):

* ``ensure-secret`` (pre-install/pre-upgrade): keep the TLS Secret when its certificate covers the
  webhook Service's DNS names and does not expire soon; otherwise generate a CA and a serving
  certificate signed by it and write them as a ``kubernetes.io/tls`` Secret (tls.crt, tls.key,
  ca.crt). Running it again changes nothing, so upgrades do not rotate certificates needlessly.
* ``patch-ca`` (post-install/post-upgrade): copy the Secret's ca.crt into ``caBundle`` of every
  webhook of the Mutating- and ValidatingWebhookConfiguration.
* ``generate``: write the three PEM files to a directory (for manual installs and tests).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import ipaddress
import logging
import sys
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger("webhook-certs")


def service_dns_names(service: str, namespace: str) -> list[str]:
    """Every name the API server may use to reach the Service."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def generate(*, dns_names: list[str], validity_days: int) -> dict[str, bytes]:
    """A fresh CA and a serving certificate for ``dns_names`` signed by it (PEM bytes)."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    until = now + dt.timedelta(days=validity_days)

    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{dns_names[0]}-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    key = _key()
    sans: list[x509.GeneralName] = []
    for name in dns_names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[-1])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return {
        "tls.crt": cert.public_bytes(serialization.Encoding.PEM),
        "tls.key": _pem_key(key),
        "ca.crt": ca_cert.public_bytes(serialization.Encoding.PEM),
    }


def still_good(
    data: dict[str, bytes], *, dns_names: list[str], renew_before_days: int
) -> tuple[bool, str]:
    """Whether existing PEM material can be kept, and why not."""
    missing = [k for k in ("tls.crt", "tls.key", "ca.crt") if not data.get(k)]
    if missing:
        return False, f"missing keys {missing}"
    try:
        cert = x509.load_pem_x509_certificate(data["tls.crt"])
        ca = x509.load_pem_x509_certificate(data["ca.crt"])
        serialization.load_pem_private_key(data["tls.key"], password=None)
    except ValueError as exc:
        return False, f"unreadable PEM: {exc}"
    deadline = dt.datetime.now(dt.UTC) + dt.timedelta(days=renew_before_days)
    if cert.not_valid_after_utc <= deadline or ca.not_valid_after_utc <= deadline:
        return False, f"expires within {renew_before_days} days"
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False, "no subjectAltName"
    have = set(san.get_values_for_type(x509.DNSName))
    lacking = [n for n in dns_names if n not in have]
    if lacking:
        return False, f"does not cover {lacking}"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as exc:
        return False, f"not issued by ca.crt: {exc or 'bad signature'}"
    return True, "valid"


def _api(kubeconfig: str | None) -> Any:
    import importlib

    client: Any = importlib.import_module("kubernetes.client")
    config: Any = importlib.import_module("kubernetes.config")
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig)
    else:
        config.load_incluster_config()
    return client


def ensure_secret(args: argparse.Namespace) -> int:
    client = _api(args.kubeconfig)
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api()
    dns_names = service_dns_names(args.service, args.namespace)
    existing: Any = None
    try:
        existing = core.read_namespaced_secret(args.secret, args.namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
    if existing is not None:
        data = {k: base64.b64decode(v) for k, v in (existing.data or {}).items()}
        ok, why = still_good(data, dns_names=dns_names, renew_before_days=args.renew_before_days)
        if ok:
            log.info("secret %s/%s is valid; keeping it", args.namespace, args.secret)
            return 0
        log.info("secret %s/%s must be regenerated: %s", args.namespace, args.secret, why)
    pem = generate(dns_names=dns_names, validity_days=args.validity_days)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": args.secret,
            "namespace": args.namespace,
            "labels": {
                "app.kubernetes.io/part-of": "tephra",
                "app.kubernetes.io/component": "webhook",
            },
        },
        "data": {k: base64.b64encode(v).decode() for k, v in pem.items()},
    }
    if existing is None:
        core.create_namespaced_secret(args.namespace, body)
        log.info("created secret %s/%s", args.namespace, args.secret)
    else:
        body["metadata"]["resourceVersion"] = existing.metadata.resource_version
        core.replace_namespaced_secret(args.secret, args.namespace, body)
        log.info("replaced secret %s/%s", args.namespace, args.secret)
    return 0


def patch_ca(args: argparse.Namespace) -> int:
    client = _api(args.kubeconfig)
    core = client.CoreV1Api()
    adm = client.AdmissionregistrationV1Api()
    secret = core.read_namespaced_secret(args.secret, args.namespace)
    ca_b64 = (secret.data or {}).get("ca.crt")
    if not ca_b64:
        log.error("secret %s/%s has no ca.crt", args.namespace, args.secret)
        return 1
    targets = [
        (
            args.mutating,
            adm.read_mutating_webhook_configuration,
            adm.patch_mutating_webhook_configuration,
        ),
        (
            args.validating,
            adm.read_validating_webhook_configuration,
            adm.patch_validating_webhook_configuration,
        ),
    ]
    for name, read, patch in targets:
        if not name:
            continue
        current = read(name)
        ops = [
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": ca_b64}
            for i in range(len(current.webhooks or []))
        ]
        if ops:
            patch(name, ops)
        log.info("set caBundle on %d webhooks of %s", len(ops), name)
    return 0


def generate_files(args: argparse.Namespace) -> int:
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pem = generate(
        dns_names=service_dns_names(args.service, args.namespace),
        validity_days=args.validity_days,
    )
    for name, content in pem.items():
        (out / name).write_bytes(content)
    log.info("wrote tls.crt, tls.key and ca.crt to %s", out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default=None, help="default: in-cluster configuration")
    sub = parser.add_subparsers(dest="mode", required=True)
    for mode in ("ensure-secret", "patch-ca", "generate"):
        p = sub.add_parser(mode)
        p.add_argument("--namespace", required=True)
        p.add_argument("--service", required=mode != "patch-ca")
        if mode == "generate":
            p.add_argument("--out-dir", required=True)
        else:
            p.add_argument("--secret", required=True)
        if mode != "patch-ca":
            p.add_argument("--validity-days", type=int, default=3650)
        if mode == "ensure-secret":
            p.add_argument("--renew-before-days", type=int, default=30)
        if mode == "patch-ca":
            p.add_argument("--mutating", default="")
            p.add_argument("--validating", default="")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    handler = {"ensure-secret": ensure_secret, "patch-ca": patch_ca, "generate": generate_files}
    return handler[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
