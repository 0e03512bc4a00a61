"""`--db`: the controllers hand job, PodGroup, pod and queue changes to the ledger recorder."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("batch.sandbox.testing")

import sqlalchemy as sa
from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .minisched import MiniScheduler
from .test_integration import B, vcjob


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
