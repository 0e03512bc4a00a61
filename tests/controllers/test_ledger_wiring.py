"""`--db`: the controllers hand job, PodGroup, pod and queue changes to the ledger recorder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("batch.sandbox.testing")

import sqlalchemy as sa
import yaml
from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .minisched import MiniScheduler
from .test_integration import B, vcjob

S = ("scheduling.volcano.sh", "v1beta1")


def test_job_history_recorded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    nodes = make_nodes(count=1, cpu="8")
    comp = ControllerComponent(db_url=url)
    with run_sandbox(
        nodes=nodes, components=[comp], max_grace_seconds=0.3, ready_timeout=120
    ) as sb:
        sched = MiniScheduler(sb.api_client(), nodes=["node-0"]).start()
        co = client.CustomObjectsApi(sb.api_client())
        try:
            created = co.create_namespaced_custom_object(
                *B, "default", "jobs", vcjob("ledgered", replicas=2, run=0.3)
            )

            def phase() -> str:
                j = co.get_namespaced_custom_object(*B, "default", "jobs", "ledgered")
                return ((j.get("status") or {}).get("state") or {}).get("phase", "")

            wait_for(lambda: phase() == "Completed", timeout=90, what="job Completed")
        finally:
            sched.stop()
        assert comp.recorder is not None
        assert comp.recorder.flush(10)
    engine = sa.create_engine(url)
    uid = created["metadata"]["uid"]
    with engine.connect() as conn:
        row = conn.execute(
            sa.text("select name, queue, final_phase from jobs where uid = :u"), {"u": uid}
        ).one()
        assert tuple(row) == ("ledgered", "default", "Completed")
        phases = [
            r[0]
            for r in conn.execute(
                sa.text(
                    "select to_phase from job_transitions"
                    " where job_uid = :u and source = 'job' order by at, id"
                ),
                {"u": uid},
            )
        ]
        assert phases[0] == "Pending" and phases[-1] == "Completed" and "Running" in phases
        pods = conn.execute(sa.text("select count(*) from pod_attempts")).scalar_one()
        assert pods >= 2


def _pytorchjob(name: str) -> dict[str, Any]:
    template = {"spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"schedulingPolicy": {"queue": "default"}},
            "pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": template}},
        },
    }


def _conditions(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": at} for t, at in pairs
            ]
        }
    }


def _operator_podgroup(job: dict[str, Any], phase: str) -> dict[str, Any]:
    m = job["metadata"]
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": m["name"]}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": m["name"],
            "ownerReferences": [{**owner, "uid": m["uid"], "controller": True}],
        },
        "spec": {"minMember": 2, "queue": "default"},
        "status": {"phase": phase},
    }


def test_framework_job_history_follows_the_workload(tmp_path: Path) -> None:
    """The ledger follows a PyTorchJob itself (issue 34, finding 5): its own conditions give
    when it ran and ended (not its PodGroup's latest condition, not a restart's), and one
    deleted while waiting ends Deleted instead of waiting for ever."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    comp = ControllerComponent(db_url=url)
    with run_sandbox(
        nodes=make_nodes(count=1, cpu="8"), components=[comp], max_grace_seconds=0.3
    ) as sb:
        api = sb.api_client()
        crd = Path(__file__).parents[1] / "integrations" / "fixtures" / "crds" / "pytorchjobs.yaml"
        client.ApiextensionsV1Api(api).create_custom_resource_definition(
            yaml.safe_load(crd.read_text())
        )
        co = client.CustomObjectsApi(api)
        kf = ("kubeflow.org", "v1", "default", "pytorchjobs")
        wait_for(lambda: _served(co, kf), timeout=30, what="PyTorchJob served")
        done = co.create_namespaced_custom_object(*kf, _pytorchjob("ran"))
        waiting = co.create_namespaced_custom_object(*kf, _pytorchjob("waited"))
        co.create_namespaced_custom_object(
            *S, "default", "podgroups", _operator_podgroup(done, "Running")
        )
        co.patch_namespaced_custom_object_status(
            *kf,
            "ran",
            _conditions(
                ("Created", "2026-03-01T10:00:00Z"),
                ("Running", "2026-03-01T10:00:05Z"),
                ("Succeeded", "2026-03-01T10:00:25Z"),
            ),
        )
        # the PodGroup's phase changes later: it must not move the job's start or end
        co.patch_namespaced_custom_object(
            *S, "default", "podgroups", "ran", {"status": {"phase": "Completed"}}
        )
        engine = sa.create_engine(url)
        uids = {"ran": done["metadata"]["uid"], "waited": waiting["metadata"]["uid"]}

        def final(uid: str) -> Any:
            assert comp.recorder is not None
            comp.recorder.flush(10)
            with engine.connect() as conn:
                return conn.execute(
                    sa.text(
                        "select kind, final_phase, first_started_at, finished_at from jobs"
                        " where uid = :u"
                    ),
                    {"u": uid},
                ).one_or_none()

        wait_for(lambda: final(uids["waited"]), timeout=60, what="the waiting job recorded")
        co.delete_namespaced_custom_object(*kf, "waited")

        wait_for(
            lambda: all(final(u) and final(u)[1] for u in uids.values()),
            timeout=60,
            explain=lambda: [final(u) for u in uids.values()],
        )
        kind, phase, started, finished = final(uids["ran"])
        assert (kind, phase) == ("PyTorchJob", "Completed")
        assert str(started).startswith("2026-03-01 10:00:05")
        assert str(finished).startswith("2026-03-01 10:00:25")
        assert final(uids["waited"])[:2] == ("PyTorchJob", "Deleted")


def _served(co: Any, kf: tuple[str, ...]) -> bool:
    try:
        co.list_namespaced_custom_object(*kf)
    except client.ApiException:
        return False
    return True
