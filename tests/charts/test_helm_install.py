"""`helm install` of the chart into the sandbox, with Helm's release storage in PostgreSQL.

Helm keeps its releases in PostgreSQL (`HELM_DRIVER=sql`, a fresh database per test run,
dropped afterwards) and validates the manifests against the sandbox's OpenAPI documents, as on
a cluster. The certificate hook Jobs are skipped (`--no-hooks`): the sandbox runs no images.
Their script is run here instead, against the same API, exactly as the Jobs run it in a cluster
(with a kubeconfig instead of the in-cluster service account).
"""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.charts.helmtools import CHART_DIR, NAMESPACE, RELEASE, name_of, run_helm
from tests.scripts import load_script

pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("helm-install")]

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
SCRIPT = CHART_DIR / "files" / "webhook-certs.py"


@pytest.fixture(scope="module")
def helm_db() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    name = f"tephra_helm_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL at 127.0.0.1:5432 is needed for HELM_DRIVER=sql: {exc}")
    try:
        yield f"postgres://postgres@127.0.0.1:5432/{name}?sslmode=disable"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from batch.sandbox.testing import run_sandbox

    # No built-in CRDs: the chart's own CRDs must be the ones that get installed.
    with run_sandbox(install_crds=False) as sb:
        yield sb


@pytest.fixture(scope="module")
def env(sandbox: Any, helm_db: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("helm-home")
    out = dict(os.environ)
    out.update(
        KUBECONFIG=str(sandbox.kubeconfig_path),
        HELM_DRIVER="sql",
        HELM_DRIVER_SQL_CONNECTION_STRING=helm_db,
        HELM_CONFIG_HOME=str(tmp / "config"),
        HELM_CACHE_HOME=str(tmp / "cache"),
        HELM_DATA_HOME=str(tmp / "data"),
    )
    return out


def _helm(helm: Path, env: dict[str, str], *args: str) -> str:
    proc = run_helm(helm, list(args), env=env, timeout=180)
    assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def certs_script() -> ModuleType:
    return load_script(SCRIPT, "tephra_webhook_certs_install")


def _certs(
    script: ModuleType, env: dict[str, str], caplog: pytest.LogCaptureFixture, *args: str
) -> tuple[int, str]:
    """Run the hook script's main() in-process (importing kubernetes once, not per run)."""
    from kubernetes import client

    saved = client.Configuration.get_default_copy()
    caplog.clear()
    try:
        with caplog.at_level(logging.INFO, logger="webhook-certs"):
            rc = script.main(["--kubeconfig", env["KUBECONFIG"], *args])
    finally:
        client.Configuration.set_default(saved)
    return rc, caplog.text


def _install(helm: Path, env: dict[str, str], api: Any, release: str, namespace: str) -> str:

    return _helm(
        helm,
        env,
        "install",
        release,
        str(CHART_DIR),
        "--namespace",
        namespace,
        "--create-namespace",
        "--no-hooks",
        "--timeout",
        "120s",
    )


@pytest.fixture(scope="module")
def installed(helm: Path, sandbox: Any, env: dict[str, str]) -> dict[str, Any]:
    api = sandbox.api_client()
    return {"api": api, "stdout": _install(helm, env, api, RELEASE, NAMESPACE)}


def test_release_is_recorded_in_postgres(
    helm: Path, env: dict[str, str], installed: dict[str, Any], helm_db: str
) -> None:
    assert "STATUS: deployed" in installed["stdout"]
    releases = yaml.safe_load(_helm(helm, env, "list", "--namespace", NAMESPACE, "-o", "yaml"))
    assert [(r["name"], r["status"], r["chart"]) for r in releases] == [
        (RELEASE, "deployed", "tephra-0.1.0")
    ]
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(helm_db.replace("postgres://", "postgresql://")) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM releases_v1 WHERE name = %s AND namespace = %s",
            (RELEASE, NAMESPACE),
        ).fetchone()
    assert count == 1


def test_expected_objects_exist(installed: dict[str, Any]) -> None:
    from kubernetes import client

    api = installed["api"]
    ext = client.ApiextensionsV1Api(api)
    crds = {c.metadata.name for c in ext.list_custom_resource_definition().items}
    assert crds >= {
        "jobs.batch.volcano.sh",
        "cronjobs.batch.volcano.sh",
        "commands.bus.volcano.sh",
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
        "hypernodes.topology.volcano.sh",
    }
    apps = client.AppsV1Api(api)
    core = client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    policy = client.PolicyV1Api(api)
    adm = client.AdmissionregistrationV1Api(api)
    for comp in ("scheduler", "controller", "webhook"):
        deploy = apps.read_namespaced_deployment(name_of(comp), NAMESPACE)
        assert deploy.spec.replicas == 2
        sa = core.read_namespaced_service_account(name_of(comp), NAMESPACE)
        assert deploy.spec.template.spec.service_account_name == sa.metadata.name
        role = rbac.read_cluster_role(name_of(comp))
        assert role.rules
        binding = rbac.read_cluster_role_binding(name_of(comp))
        assert binding.subjects[0].name == sa.metadata.name
    for comp in ("scheduler", "controller"):
        rbac.read_namespaced_role(f"{name_of(comp)}-leader-election", NAMESPACE)
        rbac.read_namespaced_role_binding(f"{name_of(comp)}-leader-election", NAMESPACE)
        core.read_namespaced_service(f"{name_of(comp)}-metrics", NAMESPACE)
    for comp in ("scheduler", "webhook"):
        assert policy.read_namespaced_pod_disruption_budget(name_of(comp), NAMESPACE)
    conf = core.read_namespaced_config_map(f"{name_of('scheduler')}-config", NAMESPACE)
    assert yaml.safe_load(conf.data["volcano-scheduler.conf"])["actions"] == (
        "enqueue, allocate, preempt, reclaim, gangreclaim, backfill"
    )
    pvc = core.read_namespaced_persistent_volume_claim(name_of("ledger"), NAMESPACE)
    assert pvc.spec.resources.requests["storage"] == "5Gi"
    svc = core.read_namespaced_service(name_of("webhook"), NAMESPACE)
    assert svc.spec.ports[0].port == 443
    mutating = adm.read_mutating_webhook_configuration(name_of("webhook"))
    validating = adm.read_validating_webhook_configuration(name_of("webhook"))
    assert len(mutating.webhooks) == 4
    assert len(validating.webhooks) == 6  # jobs, queues, podgroups, commands, cronjobs, pods


def test_certificate_hook_script_against_the_api(
    env: dict[str, str],
    installed: dict[str, Any],
    certs_script: ModuleType,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from kubernetes import client

    api = installed["api"]
    core = client.CoreV1Api(api)
    adm = client.AdmissionregistrationV1Api(api)
    secret_name = f"{name_of('webhook')}-tls"
    from kubernetes.client.exceptions import ApiException

    try:
        core.delete_namespaced_secret(secret_name, NAMESPACE)
    except ApiException as exc:
        assert exc.status == 404
    ensure = [
        "ensure-secret",
        f"--namespace={NAMESPACE}",
        f"--service={name_of('webhook')}",
        f"--secret={secret_name}",
    ]
    rc, log = _certs(certs_script, env, caplog, *ensure)
    assert rc == 0, log
    assert "created secret" in log
    secret = core.read_namespaced_secret(secret_name, NAMESPACE)
    assert secret.type == "kubernetes.io/tls"
    assert set(secret.data) == {"tls.crt", "tls.key", "ca.crt"}

    # Idempotent: a second run (every upgrade) keeps the certificate.
    rc, log = _certs(certs_script, env, caplog, *ensure)
    assert rc == 0, log
    assert "keeping it" in log
    assert core.read_namespaced_secret(secret_name, NAMESPACE).data == secret.data

    rc, log = _certs(
        certs_script,
        env,
        caplog,
        "patch-ca",
        f"--namespace={NAMESPACE}",
        f"--secret={secret_name}",
        f"--mutating={name_of('webhook')}",
        f"--validating={name_of('webhook')}",
    )
    assert rc == 0, log
    assert log.count(f"set caBundle on 4 webhooks of {name_of('webhook')}") == 1  # mutating
    assert log.count(f"set caBundle on 6 webhooks of {name_of('webhook')}") == 1  # validating
    ca = secret.data["ca.crt"]
    for cfg in (
        adm.read_mutating_webhook_configuration(name_of("webhook")),
        adm.read_validating_webhook_configuration(name_of("webhook")),
    ):
        assert [w.client_config.ca_bundle for w in cfg.webhooks] == [ca] * len(cfg.webhooks)
    assert base64.b64decode(ca).startswith(b"-----BEGIN CERTIFICATE-----")

    # A service rename (another release name) is not covered: the script regenerates.
    rc, log = _certs(
        certs_script,
        env,
        caplog,
        "ensure-secret",
        f"--namespace={NAMESPACE}",
        "--service=renamed-webhook",
        f"--secret={secret_name}",
    )
    assert rc == 0, log
    assert "must be regenerated" in log and "replaced secret" in log
    assert core.read_namespaced_secret(secret_name, NAMESPACE).data["ca.crt"] != ca


def test_upgrade_to_a_postgres_ledger_and_uninstall(
    helm: Path,
    env: dict[str, str],
    sandbox: Any,
    certs_script: ModuleType,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A second release of its own, so that this test does not depend on the order of others."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    release, namespace = "tephra-b", "tephra-upgrade"
    api = sandbox.api_client()
    core = client.CoreV1Api(api)
    apps = client.AppsV1Api(api)
    adm = client.AdmissionregistrationV1Api(api)
    _install(helm, env, api, release, namespace)
    # What the pre-install hook does: the TLS Secret of this release's webhook Service.
    rc, log = _certs(
        certs_script,
        env,
        caplog,
        "ensure-secret",
        f"--namespace={namespace}",
        f"--service={release}-webhook",
        f"--secret={release}-webhook-tls",
    )
    assert rc == 0, log
    url = "postgresql+psycopg://tephra@pg.example:5432/tephra"
    _helm(
        helm,
        env,
        "upgrade",
        release,
        str(CHART_DIR),
        "--namespace",
        namespace,
        "--no-hooks",
        "--set",
        f"ledger.url={url}",
    )
    secret = core.read_namespaced_secret(f"{release}-ledger", namespace)
    assert base64.b64decode(secret.data["url"]).decode() == url
    deploy = apps.read_namespaced_deployment(f"{release}-controller", namespace)
    (env_var,) = [
        e for e in deploy.spec.template.spec.containers[0].env if e.name == "TEPHRA_DB_URL"
    ]
    assert env_var.value_from.secret_key_ref.name == f"{release}-ledger"
    history = yaml.safe_load(_helm(helm, env, "history", release, "-n", namespace, "-o", "yaml"))
    assert [h["revision"] for h in history] == [1, 2]

    # On upgrade the configurations carry the CA of the existing Secret (looked up), so
    # re-applying them never drops the trust the hook set up.
    ca = core.read_namespaced_secret(f"{release}-webhook-tls", namespace).data["ca.crt"]
    for cfg in (
        adm.read_mutating_webhook_configuration(f"{release}-webhook"),
        adm.read_validating_webhook_configuration(f"{release}-webhook"),
    ):
        assert [w.client_config.ca_bundle for w in cfg.webhooks] == [ca] * len(cfg.webhooks)

    _helm(helm, env, "uninstall", release, "--namespace", namespace)
    with pytest.raises(ApiException) as err:
        apps.read_namespaced_deployment(f"{release}-scheduler", namespace)
    assert err.value.status == 404
    with pytest.raises(ApiException):
        client.RbacAuthorizationV1Api(api).read_cluster_role(f"{release}-scheduler")
    with pytest.raises(ApiException):
        adm.read_mutating_webhook_configuration(f"{release}-webhook")
    # The SQLite volume is kept (helm.sh/resource-policy: keep), and so are the CRDs.
    core.read_namespaced_persistent_volume_claim(f"{release}-ledger", namespace)
    client.ApiextensionsV1Api(api).read_custom_resource_definition("queues.scheduling.volcano.sh")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_components_start_from_the_installed_configuration(
    env: dict[str, str], installed: dict[str, Any], tmp_path: Path
) -> None:
    """First run: the scheduler and the controller, started with the args of the installed
    Deployments and the installed scheduler ConfigMap, elect their leaders with Leases in the
    release namespace and the scheduler creates the `root` and `default` queues (through the
    chart's CRDs)."""
    import signal
    import time

    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = installed["api"]
    apps = client.AppsV1Api(api)
    core = client.CoreV1Api(api)
    coord = client.CoordinationV1Api(api)
    custom = client.CustomObjectsApi(api)
    conf = core.read_namespaced_config_map(f"{name_of('scheduler')}-config", NAMESPACE)
    (tmp_path / "volcano-scheduler.conf").write_text(conf.data["volcano-scheduler.conf"])

    def args_of(comp: str) -> list[str]:
        deploy = apps.read_namespaced_deployment(name_of(comp), NAMESPACE)
        out = []
        for arg in deploy.spec.template.spec.containers[0].args:
            local = arg.replace("/etc/tephra/", f"{tmp_path}/")
            if local.startswith(("--metrics-port=", "--healthz-port=")):
                local = f"{local.split('=')[0]}={_free_port()}"
            out.append(local)
        return [*out, f"--kubeconfig={env['KUBECONFIG']}"]

    child_env = {k: v for k, v in env.items() if not k.startswith("HELM_")}
    child_env["TEPHRA_DB_URL"] = f"sqlite:///{tmp_path}/ledger.db"
    procs = {
        comp: subprocess.Popen(
            [str(Path(sys.executable).with_name("tephra")), *args_of(comp)],
            env=child_env,
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"{comp}.log").open("w"),
        )
        for comp in ("scheduler", "controller")
    }
    try:
        deadline = time.monotonic() + 120
        leases: dict[str, str] = {}
        queues: set[str] = set()
        while time.monotonic() < deadline:
            for comp, proc in procs.items():
                assert proc.poll() is None, (
                    f"{comp} exited {proc.returncode}:\n{(tmp_path / f'{comp}.log').read_text()}"
                )
            leases = {
                lease.metadata.name: lease.spec.holder_identity or ""
                for lease in coord.list_namespaced_lease(NAMESPACE).items
            }
            try:
                queues = {
                    q["metadata"]["name"]
                    for q in custom.list_cluster_custom_object(
                        "scheduling.volcano.sh", "v1beta1", "queues"
                    )["items"]
                }
            except ApiException:
                queues = set()
            if len([h for h in leases.values() if h]) >= 2 and {"root", "default"} <= queues:
                break
            time.sleep(0.5)
        logs = {c: (tmp_path / f"{c}.log").read_text()[-2000:] for c in procs}
        assert len([h for h in leases.values() if h]) >= 2, (leases, logs)
        assert {"root", "default"} <= queues, (queues, logs)
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
