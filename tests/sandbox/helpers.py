"""Raw HTTP helpers for the contract suite (status codes and bodies exactly as served)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any


def http(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    ctype: str = "application/json",
    accept: str = "application/json",
    raw: bytes | None = None,
) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Accept", accept)
    if data is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as err:
        with err:
            text = err.read()
        try:
            return err.code, json.loads(text)
        except ValueError:
            return err.code, text.decode()


def watch_lines(base: str, path: str, *, timeout: float = 5.0) -> Iterator[dict[str, Any]]:
    """Yield watch events of a watch request until the stream ends or timeout passes."""
    req = urllib.request.Request(base + path)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
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


def bind(base: str, ns: str, name: str, node: str) -> tuple[int, Any]:
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
