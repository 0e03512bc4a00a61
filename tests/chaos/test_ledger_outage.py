"""Chaos: the ledger's database down when the controller starts and again mid-burst.

The controller starts and runs jobs with PostgreSQL unreachable (issue 30.2: it used to exit
with a traceback), the database comes back, a second burst of jobs runs and the connection is
cut while it does. Once the database is back for good the ledger holds every job, each job
transition once (none lost, none doubled) and each pod once. Reuses the ledger tests' TCP
forwarder, which cuts the connections on the same port.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from kubernetes import client
from sqlalchemy.engine import make_url

from batch.controllers.runner import ControllerComponent
from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.ledger import migrate
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.ledger.conftest import _create_pg_database, _drop_pg_database
from tests.ledger.test_recorder import _Proxy
from tests.waiting import wait_for

from .conftest import B, vcjob
from .invariants import Watchdog

pytestmark = [pytest.mark.xdist_group("chaos"), pytest.mark.postgres]

BURST = 4
REPLICAS = 2


@pytest.fixture
def ledger() -> Iterator[str]:
    url = _create_pg_database("_chaos")
    try:
        migrate.upgrade(url)
        yield url
    finally:
        _drop_pg_database(url)


def _burst(co: Any, prefix: str) -> list[str]:
    names = [f"{prefix}{i}" for i in range(BURST)]
    for n in names:
        co.create_namespaced_custom_object(*B, "default", "jobs", vcjob(n, replicas=REPLICAS))
    return names


def _completed(co: Any, names: list[str]) -> bool:
    items = co.list_namespaced_custom_object(*B, "default", "jobs")["items"]
    done = {
        j["metadata"]["name"]
        for j in items
        if ((j.get("status") or {}).get("state") or {}).get("phase") == "Completed"
    }
    return set(names) <= done


def _ledger_counts(url: str) -> tuple[int, int, int, int]:
    """(jobs Completed, transitions recorded twice, pods, pods recorded finished)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            jobs = conn.execute(
                sa.text("select count(*) from jobs where final_phase = 'Completed'")
            ).scalar_one()
            doubled = conn.execute(
                sa.text(
                    "select count(*) from (select job_uid, source, to_phase from job_transitions"
                    " group by job_uid, source, to_phase having count(*) > 1) d"
                )
            ).scalar_one()
            pods, finished = conn.execute(
                sa.text("select count(*), count(finished_at) from pod_attempts")
            ).one()
    finally:
        engine.dispose()
    return int(jobs), int(doubled), int(pods), int(finished)


@pytest.mark.slow
def test_ledger_down_at_start_and_mid_burst(
    ledger: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the recorder's spill file
    target = make_url(ledger)
    proxy = _Proxy((str(target.host), int(target.port or 5432)))
    via_proxy = target.set(port=proxy.port).render_as_string(hide_password=False)
    comp = ControllerComponent(db_url=via_proxy)
    scheduler = SchedulerComponent(SchedulerOptions(schedule_period=0.2))
    with run_sandbox(
        nodes=make_nodes(count=2, cpu="8"),
        components=[comp, scheduler],
        max_grace_seconds=0.2,
        ready_timeout=120,
    ) as sb:
        dog = Watchdog(sb)
        co = client.CustomObjectsApi(sb.api_client())
        first = _burst(co, "early")  # the database is down: started without it
        wait_for(lambda: _completed(co, first), "the first burst Completed", timeout=60)
        assert comp.recorder is not None and not comp.recorder.health().up
        proxy.start()
        second = _burst(co, "late")
        wait_for(lambda: dog.counts.binds > REPLICAS * BURST, "the second burst binding")
        proxy.stop()  # cut mid-burst
        wait_for(lambda: _completed(co, second), "the second burst Completed", timeout=60)
        proxy.start()
        try:
            wait_for(lambda: comp.recorder.flush(5), "the ledger caught up", timeout=60)
            jobs, doubled, pods, finished = wait_for(
                lambda: c if (c := _ledger_counts(ledger))[0] == 2 * BURST else None,
                "every job Completed in the ledger",
                timeout=60,
                explain=lambda: _ledger_counts(ledger),
            )
        finally:
            proxy.stop()
        counts = dog.snapshot()
    print(
        f"ledger outage: {2 * BURST} jobs; ledger jobs={jobs} doubled_transitions={doubled} "
        f"pods={pods} finished={finished}; {counts.report()}"
    )
    assert doubled == 0
    assert pods == finished == 2 * BURST * REPLICAS
    assert counts.double_binds == counts.over_commits == counts.partial_gangs == 0
