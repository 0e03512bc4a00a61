"""kopf credentials from an explicit kubeconfig file (kopf's own login reads $KUBECONFIG).

The controllers are started against a given kubeconfig (the sandbox's, or `--kubeconfig`), so the
login handler must not depend on process-wide environment variables.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import kopf
import yaml


def _named(doc: dict[str, Any], section: str, name: str) -> dict[str, Any]:
    for item in doc.get(section) or []:
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get(section[:-1]) or {}
            return value if isinstance(value, dict) else {}
    return {}


def _data(entry: dict[str, Any], key: str) -> bytes | None:
    raw = entry.get(f"{key}-data")
    return base64.b64decode(raw) if raw else None


def _path(entry: dict[str, Any], key: str, base: Path) -> str | None:
    value = entry.get(key)
    if not value:
        return None
    p = Path(str(value))
    return str(p if p.is_absolute() else base / p)


def connection_info(kubeconfig: Path | None) -> kopf.ConnectionInfo:
    """Build kopf's ConnectionInfo from a kubeconfig (current context)."""
    path = Path(kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config").expanduser()
    doc = yaml.safe_load(path.read_text()) or {}
    context = _named(doc, "contexts", str(doc.get("current-context") or ""))
    cluster = _named(doc, "clusters", str(context.get("cluster") or ""))
    user = _named(doc, "users", str(context.get("user") or ""))
    base = path.parent
    return kopf.ConnectionInfo(
        server=str(cluster.get("server")).rstrip("/"),
        ca_path=_path(cluster, "certificate-authority", base),
        ca_data=_data(cluster, "certificate-authority"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")) or None,
        token=user.get("token"),
        username=user.get("username"),
        password=user.get("password"),
        certificate_path=_path(user, "client-certificate", base),
        certificate_data=_data(user, "client-certificate"),
        private_key_path=_path(user, "client-key", base),
        private_key_data=_data(user, "client-key"),
        default_namespace=context.get("namespace"),
    )
