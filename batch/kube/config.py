"""Where the Kubernetes API is and how to authenticate: kubeconfig files and in-cluster config.

Why this exists: the scheduler talks to the API server with its own asyncio HTTP client (the
official client is synchronous and too slow for a thousand binds a second), so it needs the
connection facts a kubeconfig or a service account gives, as one small value object.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from batch.api.errors import UserError
from batch.api.yamlio import FileInputError, read_text_file, yaml_error_summary

__all__ = ["ClusterAccess", "KubeConfigError", "load_access"]

_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeConfigError(UserError):
    """The kubeconfig is missing, unreadable or incomplete."""


@dataclass(frozen=True)
class ClusterAccess:
    """Everything needed to open HTTP connections to one API server."""

    server: str
    ssl_context: ssl.SSLContext | None = None
    headers: dict[str, str] = field(default_factory=dict)
    namespace: str = "default"


def _material(entry: dict[str, Any], key: str, base_dir: Path) -> str | None:
    """Return a file path for `<key>` or `<key>-data` (written to a private temp file)."""
    data = entry.get(f"{key}-data")
    if data:
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - must outlive this function
            prefix="tephra-kube-", delete=False
        )
        with handle:
            handle.write(base64.b64decode(data))
        return handle.name
    path = entry.get(key)
    if path:
        p = Path(path)
        return str(p if p.is_absolute() else base_dir / p)
    return None


def _ssl_context(
    *, ca_file: str | None, cert_file: str | None, key_file: str | None, insecure: bool
) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca_file)
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def _from_kubeconfig(path: Path, context_name: str | None) -> ClusterAccess:
    try:
        doc = yaml.safe_load(read_text_file(path))
    except FileInputError as exc:
        raise KubeConfigError(f"cannot read kubeconfig {path}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        summary = yaml_error_summary(exc)
        raise KubeConfigError(f"kubeconfig {path} is not valid YAML: {summary}") from None
    if not isinstance(doc, dict):
        raise KubeConfigError(f"kubeconfig {path} is not a mapping")

    def named(section: str, name: str) -> dict[str, Any]:
        for item in doc.get(section) or []:
            if isinstance(item, dict) and item.get("name") == name:
                value = item.get(section[:-1]) or {}
                if isinstance(value, dict):
                    return value
        raise KubeConfigError(f"kubeconfig {path}: no {section[:-1]} named {name!r}")

    ctx_name = context_name or doc.get("current-context")
    if not ctx_name:
        raise KubeConfigError(f"kubeconfig {path}: no current-context")
    context = named("contexts", ctx_name)
    cluster = named("clusters", str(context.get("cluster", "")))
    user = named("users", str(context.get("user", ""))) if context.get("user") else {}
    server = cluster.get("server")
    if not server:
        raise KubeConfigError(f"kubeconfig {path}: cluster has no server")
    headers: dict[str, str] = {}
    if user.get("token"):
        headers["Authorization"] = f"Bearer {user['token']}"
    elif user.get("username") is not None and user.get("password") is not None:
        basic = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
        headers["Authorization"] = f"Basic {basic}"
    context_ssl: ssl.SSLContext | None = None
    if str(server).startswith("https"):
        base = path.parent
        context_ssl = _ssl_context(
            ca_file=_material(cluster, "certificate-authority", base),
            cert_file=_material(user, "client-certificate", base),
            key_file=_material(user, "client-key", base),
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
        )
    return ClusterAccess(
        server=str(server).rstrip("/"),
        ssl_context=context_ssl,
        headers=headers,
        namespace=str(context.get("namespace") or "default"),
    )


def _in_cluster() -> ClusterAccess:
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise KubeConfigError("no --kubeconfig given and not running inside a cluster")
    token = (_SA_DIR / "token").read_text().strip()
    namespace_file = _SA_DIR / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.exists() else "default"
    ctx = _ssl_context(
        ca_file=str(_SA_DIR / "ca.crt"), cert_file=None, key_file=None, insecure=False
    )
    if ":" in host:
        host = f"[{host}]"
    return ClusterAccess(
        server=f"https://{host}:{port}",
        ssl_context=ctx,
        headers={"Authorization": f"Bearer {token}"},
        namespace=namespace,
    )


def load_access(
    kubeconfig: str | Path | None = None, *, context: str | None = None
) -> ClusterAccess:
    """Load access from a kubeconfig path, `$KUBECONFIG`, or the in-cluster service account."""
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        return _from_kubeconfig(Path(path).expanduser(), context)
    default = Path("~/.kube/config").expanduser()
    if not os.environ.get("KUBERNETES_SERVICE_HOST") and default.exists():
        return _from_kubeconfig(default, context)
    return _in_cluster()
