"""What the scheduler service records (batch.kube.ledger_hook) joins what the controllers record.

Real scheduling sessions on in-memory clusters go through ``SchedulerLedger`` into the ledger on
both backends: evictions must name the jobs by the uids the controllers' PodGroup events use (so
the preemption report can name victim and beneficiary), and usage samples cover leaf queues only
(a parent's allocation repeats its children's) with the fair-share plugin's deserved share.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from sqlalchemy import Engine, text

from batch.kube.ledger_hook import SchedulerLedger
from batch.ledger import Recorder, events_from_podgroup, reports
from batch.ledger.reports import Filters
from tests.scheduler.evict_util import EVICT_CONF, pending, running
from tests.scheduler.util import NOW, cluster, gang, run

AT = dt.datetime.fromtimestamp(NOW, dt.UTC)


def test_usage_samples_cover_leaf_queues_with_their_deserved_share(
    ledger_url: str, engine: Engine
) -> None:
    c = cluster(4, cpu="8", queues=("a", "b"))
    gang(c, "ja", 3, queue="a", cpu="2")
    gang(c, "jb", 1, queue="b", cpu="2")
    d = run(c)
    assert len(d.binds) == 4
    ledger = SchedulerLedger(ledger_url, sample_seconds=3600)
    try:
        ledger.observe_session(c, d, NOW)
        assert ledger._sampler.sample_now(AT) > 0
    finally:
        ledger.close()
    with engine.connect() as conn:
        samples = conn.execute(
            text(
                "SELECT queue, allocated, deserved FROM queue_usage_samples "
                "WHERE resource = 'cpu' ORDER BY queue"
            )
        ).all()
    deserved = {q: m.amounts(m.deserved)["cpu"] for q, m in d.queue_metrics.items()}
    assert [tuple(s) for s in samples] == [
        ("a", 6000, deserved["a"]),
        ("b", 2000, deserved["b"]),
    ]  # no "root", whose allocation is a's plus b's
    with engine.begin() as conn:
        fair = reports.fairness(conn, Filters(), resource="cpu")
    share = {row[0]: row for row in fair.rows}
    column = fair.columns.index("avg_share_of_allocated")
    assert set(share) == {"a", "b"}
    assert share["a"][column] == 0.75 and share["b"][column] == 0.25


def test_evictions_name_jobs_as_the_controllers_do(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    c = cluster(2, cpu="4", queues=("a", "b"))
    running(c, "b-elastic", ["n0", "n1"], per_node=4, queue="b")
    pending(c, "a-job", 2, cpu="2", queue="a")
    d = run(c, EVICT_CONF.replace("preempt, reclaim", "reclaim"))
    assert d.evictions and all(e.reason == "reclaim" for e in d.evictions)
    # the controllers record the same PodGroups (what kopf sees)
    with Recorder(ledger_url, background=False, spill_path=tmp_path / "s.jsonl") as rec:
        for job in c.jobs.values():
            assert job.podgroup is not None
            rec.record(events_from_podgroup(None, job.podgroup))
        assert rec.flush()
    ledger = SchedulerLedger(ledger_url, sample_seconds=3600)
    try:
        ledger.observe_session(c, d, NOW)
    finally:
        ledger.close()
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT DISTINCT victim_job, victim_queue, beneficiary_namespace, "
                "beneficiary_job, beneficiary_queue FROM report_preemptions"
            )
        ).all()
    assert [tuple(r) for r in rows] == [("b-elastic", "b", "default", "a-job", "a")]


def test_usage_samples_carry_the_schedulers_deserved_share_only(
    ledger_url: str, engine: Engine
) -> None:
    """Issue 29.1: the history averages the scheduler's figure, never a figure of its own: a
    queue the fair-share plugin computed nothing for (here "idle", without jobs, whose spec
    asks for a deserved share) is sampled without one, not with its spec.deserved."""
    from batch.model import fixtures as f

    c = cluster(2, cpu="8", queues=("a",))
    c.apply("Queue", "ADDED", f.queue("idle", deserved={"cpu": "4"}))
    gang(c, "ja", 2, queue="a", cpu="2")
    d = run(c)
    assert "idle" not in d.queue_metrics
    ledger = SchedulerLedger(ledger_url, sample_seconds=3600)
    try:
        ledger.observe_session(c, d, NOW)
        assert ledger._sampler.sample_now(AT) > 0
    finally:
        ledger.close()
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT queue, deserved FROM queue_usage_samples WHERE resource = 'cpu'")
        ).all()
    deserved = {str(q): v for q, v in rows}
    assert deserved["a"] == d.queue_metrics["a"].amounts(d.queue_metrics["a"].deserved)["cpu"]
    assert deserved.get("idle") is None, rows
