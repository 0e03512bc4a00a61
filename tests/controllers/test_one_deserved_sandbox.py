"""One deserved figure on every surface (issue 29, item 1), on the sandbox over HTTP.

A queue showed 3.2 GPUs deserved on the dashboard, 22 in the scheduler's metric and about 23.6
on the history page. The real controllers and scheduler service run two queues with more work
than the cluster holds; the deserved share the scheduler publishes on each Queue
(`tephra.io/fair-share`) must be the one its `/metrics` endpoint exports
(`volcano_queue_deserved_*`), and the one the dashboard's `/api/queues` and `tephra queue get`
(table and `-o json`) print.
"""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("batch.sandbox.testing")
pytest.importorskip("batch.kube.service")

from click.testing import CliRunner
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from batch.api.fairshare import FAIR_SHARE_ANNOTATION, read_fair_share
from batch.api.resources import describe_amount
from batch.cli.main import main
from batch.controllers.runner import ControllerComponent
from batch.dashboard.history import History
from batch.dashboard.server import Dashboard, DashboardThread
from batch.kube.config import load_access
from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.controllers.test_fair_admission_sandbox import _job, _queue
from tests.waiting import wait_for

pytestmark = pytest.mark.xdist_group("controllers-scheduler")

B = ("batch.volcano.sh", "v1alpha1")
Q = ("scheduling.volcano.sh", "v1beta1")
GPU = "nvidia.com/gpu"
QUEUES = {"fs-a": 3, "fs-b": 1}
JOBS = 6  # one-GPU jobs per queue on 4 GPUs: both queues keep work pending


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Env:
    sb: SandboxHandle
    metrics_url: str
    dashboard_url: str

    def queue(self, name: str) -> dict[str, Any]:
        co = client.CustomObjectsApi(self.sb.api_client())
        return dict(co.get_cluster_custom_object(*Q, "queues", name))

    def metric(self) -> dict[str, dict[str, float]]:
        """Queue -> resource -> `volcano_queue_deserved_*` as the endpoint serves it."""
        with urllib.request.urlopen(self.metrics_url, timeout=10) as resp:
            text = resp.read().decode()
        out: dict[str, dict[str, float]] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                q = s.labels.get("queue_name", "")
                if s.name == "volcano_queue_deserved_milli_cpu":
                    out.setdefault(q, {})["cpu"] = s.value
                elif s.name == "volcano_queue_deserved_scalar_resources":
                    out.setdefault(q, {})[s.labels["resource"]] = s.value
        return out

    def dashboard(self, name: str) -> dict[str, Any]:
        with urllib.request.urlopen(self.dashboard_url + "/api/queues", timeout=30) as resp:
            rows = json.loads(resp.read())["queues"]
        return next((dict(q) for q in rows if q["name"] == name), {})

    def tephra(self, *args: str) -> str:
        result = CliRunner().invoke(main, [*args, "--kubeconfig", str(self.sb.kubeconfig_path)])
        assert result.exit_code == 0, result.output
        return str(result.stdout)  # vcctl's `queue get -n NAME` warns on stderr (deprecated)


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    port = _free_port()
    components = [
        ControllerComponent(),
        SchedulerComponent(SchedulerOptions(schedule_period=0.2, metrics_port=port)),
    ]
    nodes = make_nodes(count=2, gpus=2, cpu="8", memory="32Gi")
    with run_sandbox(nodes=nodes, components=components, ready_timeout=120) as sb:
        sb.apply(*(_queue(name, weight) for name, weight in QUEUES.items()))
        co = client.CustomObjectsApi(sb.api_client())
        for name in QUEUES:
            for i in range(JOBS):
                body = _job(f"{name}-{i}", name)
                template = body["spec"]["tasks"][0]["template"]
                template["metadata"]["annotations"].pop("sandbox.tephra.io/run-seconds")
                co.create_namespaced_custom_object(*B, "default", "jobs", body)
        dash = Dashboard(load_access(sb.kubeconfig_path), History(None))
        server = DashboardThread(dash).start()
        try:
            yield Env(sb, f"http://127.0.0.1:{port}/metrics", server.url)
        finally:
            server.stop()


def _published(env: Env, name: str) -> dict[str, int]:
    share = read_fair_share(env.queue(name))
    return dict(share.deserved) if share is not None else {}


def _agree_with_the_metric(env: Env, name: str) -> dict[str, int] | None:
    """The published deserved share once it names GPUs and equals the metric (the queue's
    first jobs may meet a session before their pods exist)."""
    published = _published(env, name)
    if not published.get(GPU):
        return None
    exported = env.metric().get(name, {})
    shown = {r: float(v) for r, v in published.items() if r in ("cpu", GPU)}
    return published if shown == {r: exported.get(r) for r in shown} else None


@pytest.mark.parametrize("name", sorted(QUEUES))
def test_every_surface_shows_the_schedulers_deserved_share(env: Env, name: str) -> None:
    deserved = wait_for(
        lambda: _agree_with_the_metric(env, name),
        what=f"queue {name}'s annotation equal to volcano_queue_deserved",
        timeout=90,
        explain=lambda: (env.queue(name)["metadata"], env.metric().get(name)),
    )
    assert set(deserved) >= {"cpu", GPU}
    # the dashboard's JSON API: the same figure, from the scheduler
    row = wait_for(
        lambda: (r := env.dashboard(name)).get("deserved_source") == "scheduler" and r,
        what=f"the dashboard's row of {name} from the scheduler",
        explain=lambda: env.dashboard(name),
    )
    for res in ("cpu", GPU):
        assert row["deserved"][res]["amount"] == deserved[res], (res, row["deserved"])
        assert row["deserved"][res]["text"] == describe_amount(res, deserved[res])
    assert row["deserved_session"] and row["deserved_at"]
    # tephra queue get: the Queue object (-o json) and the table's Deserved column
    obj = json.loads(env.tephra("queue", "get", "-n", name, "-o", "json"))
    # the figure, not the whole annotation: the scheduler rewrites its session and time
    # between the two reads
    via_cli = json.loads(obj["metadata"]["annotations"][FAIR_SHARE_ANNOTATION])
    direct = json.loads(env.queue(name)["metadata"]["annotations"][FAIR_SHARE_ANNOTATION])
    assert via_cli["deserved"] == direct["deserved"]
    header, line = env.tephra("queue", "get", "-n", name).splitlines()[:2]
    column = dict(zip(header.split(), line.split(), strict=True))["Deserved"]
    listed = dict(kv.split("=") for kv in column.split(","))
    published = json.loads(obj["metadata"]["annotations"][FAIR_SHARE_ANNOTATION])["deserved"]
    assert listed == {r: published[r] for r in ("cpu", GPU)}


def test_the_heavier_queue_deserves_more_and_figures_are_not_rewritten(env: Env) -> None:
    a = wait_for(lambda: _agree_with_the_metric(env, "fs-a"), what="fs-a figures", timeout=90)
    b = wait_for(lambda: _agree_with_the_metric(env, "fs-b"), what="fs-b figures", timeout=90)
    assert a[GPU] > b[GPU]
    # new sessions on unchanged figures (a new Namespace is a change to the scheduler's cache,
    # not to any queue's share) leave the Queue as it was
    made = iter(range(1000))
    wait_for(
        lambda: _unchanged_over_sessions(env, f"fs-ns-{next(made)}"),
        what="fs-a not rewritten by sessions that change none of its figures",
        timeout=90,
        explain=lambda: env.queue("fs-a")["metadata"],
    )


def _unchanged_over_sessions(env: Env, prefix: str) -> bool:
    """Whether fs-a stays as it was over three sessions, each on a new Namespace."""
    before = env.queue("fs-a")["metadata"]["resourceVersion"]
    core = client.CoreV1Api(env.sb.api_client())
    for i in range(3):
        sessions = _sessions(env)
        core.create_namespace({"metadata": {"name": f"{prefix}-{i}"}})
        wait_for(lambda s=sessions: _sessions(env) > s, what="a session on the new namespace")
    return bool(env.queue("fs-a")["metadata"]["resourceVersion"] == before)


def _sessions(env: Env) -> float:
    """Sessions that decided anew (the scheduler's end-to-end latency observations)."""
    with urllib.request.urlopen(env.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "volcano_e2e_scheduling_latency_milliseconds_count":
                return float(s.value)
    return 0.0
