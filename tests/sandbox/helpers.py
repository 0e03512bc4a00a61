"""Raw HTTP helpers for the contract suite (status codes and bodies exactly as served)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class Server:
    """An API server of the contract suite: the sandbox or the real kube-apiserver (the oracle)."""

    name: str
    url: str
    kubeconfig_path: Path
    context: ssl.SSLContext | None = None

    def api_client(self) -> Any:
        """A `kubernetes.client.ApiClient` configured from this server's kubeconfig."""
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig_path), client_configuration=cfg
        )
        return client.ApiClient(configuration=cfg)


def _target(base: Server | str, path: str) -> tuple[str, ssl.SSLContext | None]:
    if isinstance(base, Server):
        return base.url + path, base.context
    return base + path, None


def http(
    base: Server | str,
    method: str,
    path: str,
    body: Any = None,
    *,
    ctype: str = "application/json",
    accept: str = "application/json",
    raw: bytes | None = None,
) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    url, context = _target(base, path)
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Accept", accept)
    if data is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as err:
        with err:
            text = err.read()
        try:
            return err.code, json.loads(text)
        except ValueError:
            return err.code, text.decode()


def watch_lines(base: Server | str, path: str, *, timeout: float = 5.0) -> Iterator[dict[str, Any]]:
    """Yield watch events of a watch request until the stream ends or timeout passes."""
    url, context = _target(base, path)
    req = urllib.request.Request(url)
    with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
        for line in resp:
            if line.strip():
                yield json.loads(line)


def pod(
    name: str,
    *,
    cpu: str = "100m",
    annotations: dict[str, str] | None = None,
    restart: str = "Never",
    labels: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    spec: dict[str, Any] = {
        "restartPolicy": restart,
        "containers": [
            {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": cpu}}}
        ],
    }
    spec.update(extra or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def bind(base: Server | str, ns: str, name: str, node: str) -> tuple[int, Any]:
    return http(
        base,
        "POST",
        f"/api/v1/namespaces/{ns}/pods/{name}/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )


def real_param(*marks: pytest.MarkDecorator) -> Any:
    """The `server` parameter of the real kube-apiserver: the `real` tier's marker and xdist group
    (its one control plane per worker)."""
    return pytest.param("real", marks=[pytest.mark.real, pytest.mark.xdist_group("real"), *marks])


# Runs a contract test on the sandbox only; a comment above each use gives the reason.
SANDBOX_ONLY = pytest.mark.parametrize("server", ["sandbox"], indirect=True)


def diverges(reason: str) -> pytest.MarkDecorator:
    """The test's real parameter fails for a divergence listed in docs/sandbox.md (strict: a fix
    in the sandbox or the test shows up as XPASS)."""
    xfail = pytest.mark.xfail(strict=True, reason=reason)
    return pytest.mark.parametrize("server", ["sandbox", real_param(xfail)], indirect=True)
