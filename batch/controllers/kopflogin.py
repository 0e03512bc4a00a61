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

from batch.kube.config import resolve


def connection_info(kubeconfig: Path | None) -> kopf.ConnectionInfo:
    """Build kopf's ConnectionInfo from a kubeconfig (current context)."""
    target = resolve(kubeconfig)
    token, expiration = target.token, None
    cert_data = key_data = None
    if target.exec is not None:
        cred = target.exec.current()
        token = cred.token
        cert_data, key_data = cred.cert_data, cred.key_data
        if cred.expires_at is not None:
            expiration = datetime.fromtimestamp(cred.expires_at, UTC)
    return kopf.ConnectionInfo(
        server=target.server,
        ca_path=target.ca_file,
        insecure=target.insecure or None,
        token=token,
        username=target.username,
        password=target.password,
        certificate_path=None if cert_data else target.cert_file,
        certificate_data=cert_data,
        private_key_path=None if key_data else target.key_file,
        private_key_data=key_data,
        default_namespace=target.namespace,
        expiration=expiration,
    )
