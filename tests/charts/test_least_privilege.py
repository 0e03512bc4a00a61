"""Least privilege in the chart (issue 19 item 6): what each binding grants, and where.

No rule bound cluster-wide may write Secrets, whatever the values; the job plugins' rights
(ssh: Secrets; svc: Services, ConfigMaps, NetworkPolicies) are bound in `controller.jobNamespaces`
only and each has a switch; every component gets a NetworkPolicy admitting ingress only to the
port it serves; the webhooks' failurePolicy and timeoutSeconds come from values. Who may open
and close queues (issue 30.1): only the webhook may ask the apiserver about another user's rights
(SubjectAccessReview), and queue Commands are sent to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.charts.helmtools import (
    CHART_DIR,
    NAMESPACE,
    RELEASE,
    Doc,
    HelmError,
    find,
    helm_env,
    name_of,
    one,
    render,
    rule_allows,
    run_helm,
    values_args,
)
from tests.charts.test_chart import COMBOS

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
#: Values that change what RBAC is rendered, on top of the chart test's combinations.
RBAC_COMBOS: dict[str, dict[str, Any]] = {
    **COMBOS,
    "many-job-namespaces": {"controller": {"jobNamespaces": ["ml", "hpc", "default"]}},
    "no-job-namespaces": {"controller": {"jobNamespaces": []}},
    "plugins-off": {"controller": {"plugins": {"ssh": False, "svc": False}}},
    "all-off": {
        "controller": {"frameworks": {"kubeflow": False, "ray": False, "spark": False}},
        "webhook": {"enabled": False},
    },
}


@pytest.fixture(scope="module")
def renders(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Doc]]:
    tmp = tmp_path_factory.mktemp("least-privilege")
    return {name: render(helm, tmp, values) for name, values in RBAC_COMBOS.items()}


def _covers(values: Iterable[str], wanted: str) -> bool:
    return wanted in values or "*" in values


def secret_writes(rules: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rules writing Secrets, with or without resourceNames (a name still spans namespaces)."""
    return [
        r
        for r in rules
        if _covers(r.get("apiGroups", []), "")
        and _covers(r.get("resources", []), "secrets")
        and any(_covers(r.get("verbs", []), v) for v in WRITE_VERBS)
    ]


def cluster_wide_rules(docs: list[Doc]) -> dict[str, list[Mapping[str, Any]]]:
    """Rules of every ClusterRole a ClusterRoleBinding grants (role name -> rules)."""
    out = {}
    for binding in find(docs, "ClusterRoleBinding"):
        ref = binding["roleRef"]
        assert ref["kind"] == "ClusterRole", binding["metadata"]["name"]
        out[ref["name"]] = list(one(docs, "ClusterRole", ref["name"])["rules"])
    return out


def test_no_rule_grants_cluster_wide_secret_write(renders: dict[str, list[Doc]]) -> None:
    for combo, docs in renders.items():
        for role, rules in cluster_wide_rules(docs).items():
            assert not secret_writes(rules), (combo, role, secret_writes(rules))


def test_the_secret_write_check_sees_a_cluster_wide_grant() -> None:
    """The check above must catch each shape of a cluster-wide Secret write."""
    for rule in (
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["x"], "verbs": ["patch"]},
    ):
        assert secret_writes([rule]), rule
    assert not secret_writes([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])


def namespaced_grants(docs: list[Doc], subject: str) -> dict[str, list[Mapping[str, Any]]]:
    """Rules granted to ServiceAccount `subject` by RoleBindings, by namespace."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for binding in find(docs, "RoleBinding"):
        if all(s["name"] != subject for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        rules = one(docs, ref["kind"], ref["name"])["rules"]
        out.setdefault(binding["metadata"]["namespace"], []).extend(rules)
    return out


def _controller_rules(docs: list[Doc]) -> list[Mapping[str, Any]]:
    return list(one(docs, "ClusterRole", name_of("controller"))["rules"])


def test_plugin_rights_are_bound_in_the_job_namespaces_only(
    renders: dict[str, list[Doc]],
) -> None:
    docs = renders["many-job-namespaces"]
    grants = namespaced_grants(docs, name_of("controller"))
    for ns in ("ml", "hpc", "default"):
        rules = grants[ns]
        assert rule_allows(rules, "", "secrets", "create"), ns
        assert rule_allows(rules, "", "services", "create"), ns
        assert rule_allows(rules, "", "configmaps", "patch"), ns
        assert rule_allows(rules, "networking.k8s.io", "networkpolicies", "create"), ns
        for verb in ("get", "list", "update", "delete"):
            assert not rule_allows(rules, "", "secrets", verb), (ns, verb)
            assert not rule_allows(rules, "networking.k8s.io", "networkpolicies", verb), verb
    assert set(grants) == {"ml", "hpc", "default", NAMESPACE}
    assert set(namespaced_grants(renders["default"], name_of("controller"))) == {
        "default",
        NAMESPACE,
    }
    cluster = _controller_rules(docs)
    for group, res in (("", "secrets"), ("networking.k8s.io", "networkpolicies")):
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
            assert not rule_allows(cluster, group, res, verb), (res, verb)
    for res in ("services", "configmaps"):
        assert not rule_allows(cluster, "", res, "create"), res


def test_each_plugin_has_a_switch(helm: Path, tmp_path: Path) -> None:
    for plugin, (group, res) in (
        ("ssh", ("", "secrets")),
        ("svc", ("networking.k8s.io", "networkpolicies")),
    ):
        docs = render(helm, tmp_path, {"controller": {"plugins": {plugin: False}}})
        grants = namespaced_grants(docs, name_of("controller"))["default"]
        assert not rule_allows(grants, group, res, "create"), plugin
        assert not find(docs, "ClusterRole", f"{name_of('controller')}-plugin-{plugin}")
        other = "svc" if plugin == "ssh" else "ssh"
        one(docs, "RoleBinding", f"{name_of('controller')}-plugin-{other}")


def _policies(docs: list[Doc]) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in find(docs, "NetworkPolicy")}


def test_components_get_ingress_only_network_policies(renders: dict[str, list[Doc]]) -> None:
    policies = _policies(renders["default"])
    assert set(policies) == {name_of(c) for c in ("scheduler", "controller", "webhook")}
    ports = {"scheduler": 8080, "controller": 8081, "webhook": 8443}
    for comp, port in ports.items():
        spec = policies[name_of(comp)]["spec"]
        assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == comp
        assert spec["policyTypes"] == ["Ingress"]
        (rule,) = spec["ingress"]
        assert rule["ports"] == [{"port": port, "protocol": "TCP"}], comp
        if comp == "webhook":
            assert "from" not in rule  # the apiserver: configurable, see the next test
        else:
            (peer,) = rule["from"]
            assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    assert len(_policies(renders["all-off"])) == 2


def test_network_policy_peers_and_switch_from_values(helm: Path, tmp_path: Path) -> None:
    apiserver = [{"ipBlock": {"cidr": "10.0.0.10/32"}}]
    prometheus = [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    values = {"networkPolicy": {"webhookFrom": apiserver, "metricsFrom": prometheus}}
    policies = _policies(render(helm, tmp_path, values))
    assert policies[name_of("webhook")]["spec"]["ingress"][0]["from"] == apiserver
    assert policies[name_of("scheduler")]["spec"]["ingress"][0]["from"] == prometheus
    assert not _policies(render(helm, tmp_path, {"networkPolicy": {"enabled": False}}))
    off = {"networkPolicy": {"components": {"webhook": False, "scheduler": False}}}
    assert set(_policies(render(helm, tmp_path, off))) == {name_of("controller")}
    with pytest.raises(HelmError, match="networkPolicy"):
        render(helm, tmp_path, {"networkPolicy": {"webhookFrom": "apiserver"}})


def _tephra_kind_hooks(docs: list[Doc]) -> list[dict[str, Any]]:
    hooks = []
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        hooks += [h for h in one(docs, kind)["webhooks"] if ".pods." not in f".{h['name']}"]
    return hooks


def test_webhook_failure_policy_and_timeout_come_from_values(helm: Path, tmp_path: Path) -> None:
    default = _tephra_kind_hooks(render(helm, tmp_path))
    assert len(default) == 8  # with /cronjobs/validate (issue 30 item 9)
    # a short default (issue 30 item 6): with Fail a slow webhook holds every write that long
    assert {(h["failurePolicy"], h["timeoutSeconds"]) for h in default} == {("Fail", 5)}
    values = {"webhook": {"failurePolicy": "Ignore", "timeoutSeconds": 7}}
    docs = render(helm, tmp_path, values)
    assert {(h["failurePolicy"], h["timeoutSeconds"]) for h in _tephra_kind_hooks(docs)} == {
        ("Ignore", 7)
    }
    with pytest.raises(HelmError, match="timeoutSeconds"):
        render(helm, tmp_path, {"webhook": {"timeoutSeconds": 31}})


def _role_rules(docs: list[Doc], component: str) -> list[Mapping[str, Any]]:
    return list(one(docs, "ClusterRole", name_of(component))["rules"])


def test_only_the_webhook_may_review_access(renders: dict[str, list[Doc]]) -> None:
    """The webhook asks whether a queue Command's requester may update the queue: it needs
    `create` on subjectaccessreviews and nothing more; no other component may ask about others."""
    group, res = "authorization.k8s.io", "subjectaccessreviews"
    for combo, docs in renders.items():
        for role, rules in cluster_wide_rules(docs).items():
            may = rule_allows(rules, group, res, "create")
            assert may == (role == name_of("webhook")), (combo, role)
            for verb in ("get", "list", "watch", "update", "patch", "delete"):
                assert not rule_allows(rules, group, res, verb), (combo, role, verb)
    webhook = _role_rules(renders["default"], "webhook")
    for res in ("localsubjectaccessreviews", "selfsubjectaccessreviews", "tokenreviews"):
        assert not rule_allows(webhook, group, res, "create"), res
    assert not any(
        v in r.get("verbs", []) for r in webhook for v in ("impersonate", "escalate", "bind")
    )


def test_queue_commands_go_through_the_webhook(renders: dict[str, list[Doc]]) -> None:
    docs = renders["default"]
    hooks = {h["name"]: h for h in one(docs, "ValidatingWebhookConfiguration")["webhooks"]}
    hook = hooks["validate.commands.bus.tephra.io"]
    assert hook["clientConfig"]["service"]["path"] == "/commands/validate"
    (rule,) = hook["rules"]
    assert rule["apiGroups"] == ["bus.volcano.sh"] and rule["resources"] == ["commands"]
    assert rule["operations"] == ["CREATE", "UPDATE"]  # an UPDATE may retarget a Command
    assert hook["failurePolicy"] == "Fail"
    mutating = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert not any("commands" in r["resources"] for h in mutating for r in h["rules"])


def _controller_args(docs: list[Doc]) -> list[str]:
    deploy = one(docs, "Deployment", name_of("controller"))
    args: list[str] = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_queue_command_namespace_from_values(helm: Path, tmp_path: Path) -> None:
    assert not [a for a in _controller_args(render(helm, tmp_path)) if "queue-command" in a]
    docs = render(helm, tmp_path, {"controller": {"queueCommandNamespace": "queue-admins"}})
    assert "--queue-command-namespace=queue-admins" in _controller_args(docs)
    with pytest.raises(HelmError, match="queueCommandNamespace"):
        render(helm, tmp_path, {"controller": {"queueCommandNamespace": "Not A Namespace"}})


def install_notes(helm: Path, tmp: Path, values: dict[str, Any]) -> str:
    """The NOTES `helm install` prints (a client-side dry run: no cluster needed)."""
    args = ["install", RELEASE, str(CHART_DIR), "-n", NAMESPACE, "--dry-run=client"]
    proc = run_helm(helm, [*args, *values_args(values, tmp)], env=helm_env(tmp))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("NOTES:", 1)[1]


def test_notes_warn_when_queue_commands_go_unchecked(helm: Path, tmp_path: Path) -> None:
    warning = "WARNING: queue open/close Commands are not checked"
    assert warning not in install_notes(helm, tmp_path, {})
    for webhook in ({"enabled": False}, {"failurePolicy": "Ignore"}):
        notes = install_notes(helm, tmp_path, {"webhook": webhook})
        assert warning in notes and "controller.queueCommandNamespace" in notes, webhook
    values = {"webhook": {"enabled": False}, "controller": {"queueCommandNamespace": "qa"}}
    notes = install_notes(helm, tmp_path, values)
    assert warning not in notes and "from namespace qa only" in notes, notes
