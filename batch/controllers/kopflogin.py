"""kopf credentials from the kubeconfig the controllers were given, by kubectl's rules.

The controllers are started against a given kubeconfig (the sandbox's, or `--kubeconfig`), so the
login handler must not depend on kopf's own loader; `batch.kube.config` (the one loader of the
CLI and the services) resolves it: `$KUBECONFIG` lists merged, exec credential plugins. kopf
calls the handler again when the credential expires or is refused, and each call resolves
afresh, so an exec plugin runs again then.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import kopf

from batch.kube.config import client_certificate, resolve


def connection_info(kubeconfig: Path | None) -> kopf.ConnectionInfo:
    """Build kopf's ConnectionInfo from a kubeconfig (current context)."""
    target = resolve(kubeconfig)
    token, expiration = target.token, None
    if target.exec is not None:
        cred = target.exec.current()
        token = cred.token
        if cred.expires_at is not None:
            expiration = datetime.fromtimestamp(cred.expires_at, UTC)
    cert, key = client_certificate(target)
    return kopf.ConnectionInfo(
        server=target.server,
        ca_path=target.ca_file,
        ca_data=target.ca_data,
        insecure=target.insecure or None,
        token=token,
        username=target.username,
        password=target.password,
        certificate_path=cert if isinstance(cert, str) else None,
        certificate_data=cert if isinstance(cert, bytes) else None,
        private_key_path=key if isinstance(key, str) else None,
        private_key_data=key if isinstance(key, bytes) else None,
        default_namespace=target.namespace,
        expiration=expiration,
    )
