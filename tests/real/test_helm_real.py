"""`helm install` of the chart against a real kube-apiserver (OpenAPI validation on, as for users).

No kubelet runs here, so no pod starts: the install runs with `--no-hooks` (the certificate hook
Jobs would never complete) and the hook manifests are checked by the apiserver with a server-side
dry run instead. The release is uninstalled at the end: its webhook configurations point at a
Service without endpoints and would refuse every later VCJob (failurePolicy Fail).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from batch.sandbox.control_plane import ControlPlane
from tests.charts.helmtools import CHART_DIR
from tests.real.conftest import Api, conditions, helm, helm_env

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

RELEASE = "helm-real"
NAMESPACE = "helm-real"


@pytest.fixture(scope="module")
def release(
    real: ControlPlane, helm_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    env = helm_env(real, tmp_path_factory.mktemp("helm-real"))
    install = ["install", RELEASE, str(CHART_DIR), "--namespace", NAMESPACE, "--create-namespace"]
    out = helm(helm_bin, env, *install, "--no-hooks", "--timeout", "120s")
    try:
        yield {"stdout": out, "env": env}
    finally:
        helm(helm_bin, env, "uninstall", RELEASE, "--namespace", NAMESPACE, "--no-hooks")


def test_install_is_deployed(helm_bin: Path, release: dict[str, Any]) -> None:
    assert "STATUS: deployed" in release["stdout"], release["stdout"]
    listed = helm(helm_bin, release["env"], "list", "--namespace", NAMESPACE, "-o", "yaml")
    assert [(r["name"], r["status"]) for r in yaml.safe_load(listed)] == [(RELEASE, "deployed")]


def chart_crd_names() -> list[str]:
    return sorted(
        yaml.safe_load(p.read_text())["metadata"]["name"]
        for p in (CHART_DIR / "crds").glob("*.yaml")
    )


def test_the_charts_crds_are_established(api: Api, release: dict[str, Any]) -> None:
    names = chart_crd_names()
    assert len(names) == 6
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = {n: conditions(api, n).get("Established", {}).get("status") for n in names}
        if all(v == "True" for v in state.values()):
            return
        time.sleep(0.5)
    pytest.fail(f"chart CRDs not Established: {state}")


def manifest_objects(helm_bin: Path, release: dict[str, Any]) -> list[dict[str, Any]]:
    text = helm(helm_bin, release["env"], "get", "manifest", RELEASE, "--namespace", NAMESPACE)
    return [d for d in yaml.safe_load_all(text) if d]


def test_every_object_of_the_release_exists(
    api: Api, helm_bin: Path, release: dict[str, Any], tmp_path: Path
) -> None:
    objects = manifest_objects(helm_bin, release)
    kinds = {d["kind"] for d in objects}
    assert {"Deployment", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} <= kinds
    assert {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} <= kinds
    assert "NetworkPolicy" in kinds
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    done = api.kubectl("get", "-f", str(path), "-o", "name")
    assert len(done.stdout.split()) == len(objects), done.stdout


def test_the_hook_manifests_pass_the_servers_validation(
    api: Api, helm_bin: Path, release: dict[str, Any], tmp_path: Path
) -> None:
    rendered = helm(
        helm_bin, release["env"], "template", RELEASE, str(CHART_DIR), "--namespace", NAMESPACE
    )
    hooks = [
        d
        for d in yaml.safe_load_all(rendered)
        if d and "helm.sh/hook" in (d["metadata"].get("annotations") or {})
    ]
    assert {d["kind"] for d in hooks} >= {"Job", "ServiceAccount", "Role", "ClusterRole"}
    path = tmp_path / "hooks.yaml"
    path.write_text(yaml.safe_dump_all(hooks))
    cmd = ["apply", "--dry-run=server", "--validate=strict", "-n", NAMESPACE, "-f", str(path)]
    done = api.kubectl(*cmd, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(server dry run)") == len(hooks), done.stdout


def test_deployments_are_accepted_with_their_service_accounts(
    api: Api, release: dict[str, Any]
) -> None:
    for comp in ("scheduler", "controller", "webhook"):
        code, deploy = api.request(
            "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{RELEASE}-tephra-{comp}"
        )
        assert code == 200, deploy
        sa = deploy["spec"]["template"]["spec"]["serviceAccountName"]
        code, answer = api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{sa}")
        assert code == 200, answer
