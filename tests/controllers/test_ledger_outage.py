"""The controllers start and reconcile with the ledger database down, say so on /healthz and
/metrics, and write what they recorded once the database is there (issue 30.2)."""

from __future__ import annotations

import datetime as dt
import os
import secrets
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("batch.sandbox.testing")

import sqlalchemy as sa
from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.ledger import JobObserved, Recorder, migrate
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .minisched import MiniScheduler
from .test_integration import B, vcjob

REPO = Path(__file__).resolve().parents[2]
PG_ADMIN_URL = os.environ.get(
    "TEPHRA_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return str(r.read().decode())


def _run_job(api: object, name: str) -> str:
    """Create a two-pod job and wait until the controllers complete it; returns its uid."""
    co = client.CustomObjectsApi(api)
    created = co.create_namespaced_custom_object(
        *B, "default", "jobs", vcjob(name, replicas=2, run=0.3)
    )

    def phase() -> str:
        j = co.get_namespaced_custom_object(*B, "default", "jobs", name)
        return str(((j.get("status") or {}).get("state") or {}).get("phase", ""))

    wait_for(lambda: phase() == "Completed", timeout=90, what=f"job {name} Completed")
    return str(created["metadata"]["uid"])


def test_controller_process_runs_with_the_ledger_unreachable(tmp_path: Path) -> None:
    nodes = make_nodes(count=1, cpu="8")
    closed = _free_port()
    metrics = _free_port()
    log = tmp_path / "controller.log"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    with run_sandbox(nodes=nodes, max_grace_seconds=0.3) as sb, log.open("w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "batch.cli.main",
                "controller",
                "--kubeconfig",
                str(sb.kubeconfig_path),
                "--db",
                f"postgresql://postgres@127.0.0.1:{closed}/tephra",
                "--metrics-bind-address",
                f"127.0.0.1:{metrics}",
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        sched = MiniScheduler(sb.api_client(), nodes=["node-0"]).start()
        try:
            wait_for(
                lambda: "controllers ready" in log.read_text() or proc.poll() is not None,
                timeout=90,
                what="controllers ready",
            )
            assert proc.poll() is None, log.read_text()
            _run_job(sb.api_client(), "unledgered")
            base = f"http://127.0.0.1:{metrics}"
            assert 'tephra_ledger_up{component="controllers"} 0.0' in _get(f"{base}/metrics")
            health = _get(f"{base}/healthz")
            assert health.startswith("ok\n") and "ledger down" in health, health
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            sched.stop()
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    text = log.read_text()
    assert "Traceback" not in text, text
    assert f"127.0.0.1:{closed}" in text  # the one line saying the ledger is unreachable


def _ledger_with_an_open_job(admin: sa.Engine, name: str, tmp_path: Path) -> None:
    """Database `name`, migrated, holding a job Running whose object is gone (deleted while
    no controller recorded it)."""
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = admin.url.set(database=name).render_as_string(False)
    migrate.upgrade(url)
    at = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    ghost = JobObserved(
        uid="ghost-uid",
        namespace="default",
        name="ghost",
        submitted_at=at,
        phase="Running",
        phase_at=at,
    )
    with Recorder(url, spill_path=tmp_path / "seed.jsonl", background=False) as rec:
        rec.record([ghost])
        assert rec.flush()


@pytest.mark.postgres
def test_records_arrive_when_the_database_appears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database is absent at start (then renamed into place, as a restored backup would
    be): the job completed meanwhile arrives, each transition once, and the start's reconcile,
    which could not run, closes the job that was deleted while no controller ran."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    name = f"tephra_test_{os.getpid()}_{secrets.token_hex(4)}_ctl"
    url = sa.engine.make_url(PG_ADMIN_URL).set(database=name).render_as_string(False)
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    _ledger_with_an_open_job(admin, f"{name}_hidden", tmp_path)
    comp = ControllerComponent(db_url=url)
    nodes = make_nodes(count=1, cpu="8")
    try:
        with run_sandbox(
            nodes=nodes, components=[comp], max_grace_seconds=0.3, ready_timeout=120
        ) as sb:
            sched = MiniScheduler(sb.api_client(), nodes=["node-0"]).start()
            try:
                uid = _run_job(sb.api_client(), "late-ledger")
            finally:
                sched.stop()
            assert comp.manager is not None and comp.recorder is not None
            up = {"component": "controllers"}
            registry = comp.manager.metrics.registry
            assert registry.get_sample_value("tephra_ledger_up", up) == 0.0
            assert not comp.recorder.health().up
            with admin.connect() as conn:
                conn.execute(sa.text(f'ALTER DATABASE "{name}_hidden" RENAME TO "{name}"'))
            wait_for(lambda: comp.recorder.flush(5), timeout=60, what="the ledger caught up")
            assert registry.get_sample_value("tephra_ledger_up", up) == 1.0
            engine = sa.create_engine(url)
            try:
                wait_for(
                    lambda: _final_phase(engine, "ghost-uid") == "Deleted",
                    timeout=90,
                    what="the job lost while no controller ran closed",
                )
                assert _final_phase(engine, uid) == "Completed"
                with engine.connect() as conn:
                    seen = conn.execute(
                        sa.text(
                            "select to_phase, count(*) from job_transitions"
                            " where job_uid = :u and source = 'job' group by to_phase"
                        ),
                        {"u": uid},
                    ).all()
            finally:
                engine.dispose()
        counts = dict(seen)
        assert counts.get("Completed") == 1 and counts.get("Running") == 1, counts
    finally:
        with admin.connect() as conn:
            for db in (name, f"{name}_hidden"):
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()


def _final_phase(engine: sa.Engine, uid: str) -> str | None:
    with engine.connect() as conn:
        row = conn.execute(
            sa.text("select final_phase from jobs where uid = :u"), {"u": uid}
        ).one_or_none()
    return None if row is None else row[0]
