"""The chart's optional dashboard: off by default; when on, list/watch-only RBAC, a Service, a
token always (the Secret named in values, else one the chart makes), the Service's names as the
Hosts it answers, and a NetworkPolicy."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from batch.dashboard.state import KINDS
from tests.charts.helmtools import (
    NAMESPACE,
    HelmError,
    component,
    fetch_helm,
    find,
    name_of,
    one,
    render,
)

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
    assert {v for r in rules for v in r["verbs"]} == {"list", "watch"}, rules  # what reflectors do
    granted = {(g, res) for r in rules for g in r["apiGroups"] for res in r["resources"]}
    for res in KINDS.values():  # every kind the dashboard watches, and list+watch on it
        group = res.api_version.rpartition("/")[0] if "/" in res.api_version else ""
        assert (group, res.plural) in granted, res
    deploy = one(component(docs, "Deployment", "dashboard"), "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"][:3] == ["dashboard", "--host=0.0.0.0", "--port=8090"]
    assert "--token-file=/etc/tephra-dashboard/token" in container["args"]
    assert not find(docs, "Secret", f"{name}-token")  # the operator's Secret is used
    env = {e["name"]: e for e in container["env"]}
    assert env["TEPHRA_DB_URL"]["valueFrom"]["secretKeyRef"]["key"] == "url"
    token = next(v for v in pod["volumes"] if v["name"] == "token")
    assert token["secret"] == {"secretName": "dash-token", "items": [{"key": "t", "path": "token"}]}
    service = one(docs, "Service", name)
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["ports"][0]["port"] == 8090


def test_the_schema_refuses_unknown_dashboard_values(helm: Path, tmp_path: Path) -> None:
    with pytest.raises(HelmError, match="allowWrites"):
        render(helm, tmp_path, {"dashboard": {"enabled": True, "allowWrites": True}})


def test_the_dashboard_always_has_a_token_and_answers_its_service_names(
    helm: Path, tmp_path: Path
) -> None:
    values = {"dashboard": {"enabled": True, "allowedHosts": ["dash.example.com"]}}
    docs = render(helm, tmp_path, values)
    name = name_of("dashboard")
    secret = one(docs, "Secret", f"{name}-token")
    assert len(base64.b64decode(secret["data"]["token"])) == 48
    again = one(render(helm, tmp_path, values), "Secret", f"{name}-token")
    assert again["data"]["token"] != secret["data"]["token"]  # random, never a fixed default
    pod = one(component(docs, "Deployment", "dashboard"), "Deployment")["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert "--token-file=/etc/tephra-dashboard/token" in args
    token = next(v for v in pod["volumes"] if v["name"] == "token")
    assert token["secret"]["secretName"] == f"{name}-token"
    assert token["secret"]["items"] == [{"key": "token", "path": "token"}]
    hosts = [a.split("=", 1)[1] for a in args if a.startswith("--allowed-host=")]
    svc = f"{name}.{NAMESPACE}"
    assert hosts == [name, svc, f"{svc}.svc", f"{svc}.svc.cluster.local", "dash.example.com"]


def test_the_dashboard_gets_a_network_policy(helm: Path, tmp_path: Path) -> None:
    values: dict[str, object] = {"dashboard": {"enabled": True}}
    policy = one(render(helm, tmp_path, values), "NetworkPolicy", name_of("dashboard"))
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": 8090, "protocol": "TCP"}]
    assert rule["from"] == [{"podSelector": {}}]  # the release's namespace only
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == (
        "dashboard"
    )
    ingress = [{"namespaceSelector": {"matchLabels": {"name": "ingress"}}}]
    values["networkPolicy"] = {"dashboardFrom": ingress}
    policy = one(render(helm, tmp_path, values), "NetworkPolicy", name_of("dashboard"))
    assert policy["spec"]["ingress"][0]["from"] == ingress
    values["networkPolicy"] = {"components": {"dashboard": False}}
    assert not find(render(helm, tmp_path, values), "NetworkPolicy", name_of("dashboard"))


def test_the_install_notes_say_how_to_log_in(helm: Path, tmp_path: Path) -> None:
    from tests.charts.test_least_privilege import install_notes

    name = name_of("dashboard")
    assert "port-forward" not in install_notes(helm, tmp_path, {})
    notes = install_notes(helm, tmp_path, {"dashboard": {"enabled": True}})
    assert f"port-forward svc/{name} 8090" in notes
    assert f"get secret {name}-token -o jsonpath='{{.data.token}}'" in notes
    mine = {"dashboard": {"enabled": True, "tokenSecret": {"name": "mine", "key": "k"}}}
    assert "get secret mine -o jsonpath='{.data.k}'" in install_notes(helm, tmp_path, mine)
