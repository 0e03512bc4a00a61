"""Kubeconfig files for the sandbox, written atomically so a waiting caller never reads half."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

CONTEXT = "tephra-sandbox"
#: The sandbox's one user, whom every request is from (it checks no credentials), and its groups.
ADMIN_USER = "tephra-sandbox"
ADMIN_GROUPS = ("system:masters", "system:authenticated")


def kubeconfig_text(url: str, *, namespace: str = "default") -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": CONTEXT, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT, "user": {"token": "tephra-sandbox"}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write_kubeconfig(path: Path, url: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(kubeconfig_text(url))
    os.replace(tmp, path)
    return path
