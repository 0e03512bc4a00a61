"""The chart's optional dashboard: off by default; when on, read-only RBAC, a Service, a token."""

from __future__ import annotations

from pathlib import Path

import pytest

from batch.dashboard.state import KINDS
from tests.charts.helmtools import HelmError, component, fetch_helm, name_of, one, render

WRITES = ("create", "update", "patch", "delete", "deletecollection", "impersonate", "escalate")


@pytest.fixture(scope="module")
def helm() -> Path:
    return fetch_helm()


def test_the_dashboard_is_off_by_default(helm: Path, tmp_path: Path) -> None:
    docs = render(helm, tmp_path)
    assert not [d for d in docs if "dashboard" in str(d["metadata"].get("name"))]


def test_the_dashboard_reads_and_never_writes(helm: Path, tmp_path: Path) -> None:
    values = {
        "dashboard": {"enabled": True, "tokenSecret": {"name": "dash-token", "key": "t"}},
        "ledger": {"url": "postgresql+psycopg://tephra@db/tephra"},
    }
    docs = render(helm, tmp_path, values)
    name = name_of("dashboard")
    rules = one(docs, "ClusterRole", name)["rules"]
    assert not [r for r in rules if set(r["verbs"]) & set(WRITES)], rules
    granted = {(g, res) for r in rules for g in r["apiGroups"] for res in r["resources"]}
    for res in KINDS.values():  # every kind the dashboard watches, and list+watch on it
        group = res.api_version.rpartition("/")[0] if "/" in res.api_version else ""
        assert (group, res.plural) in granted, res
    deploy = one(component(docs, "Deployment", "dashboard"), "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"][:3] == ["dashboard", "--host=0.0.0.0", "--port=8090"]
    assert "--token-file=/etc/tephra-dashboard/token" in container["args"]
    env = {e["name"]: e for e in container["env"]}
    assert env["TEPHRA_DB_URL"]["valueFrom"]["secretKeyRef"]["key"] == "url"
    token = next(v for v in pod["volumes"] if v["name"] == "token")
    assert token["secret"] == {"secretName": "dash-token", "items": [{"key": "t", "path": "token"}]}
    service = one(docs, "Service", name)
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["ports"][0]["port"] == 8090


def test_the_schema_refuses_unknown_dashboard_values(helm: Path, tmp_path: Path) -> None:
    with pytest.raises(HelmError, match="allowWrites"):
        render(helm, tmp_path, {"dashboard": {"enabled": True, "allowWrites": True}})
