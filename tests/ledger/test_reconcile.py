"""Issue 20.1: a job or pod deleted while no controller recorded it stayed open in the ledger for
ever (WAITING in wait-times). A starting controller's reconcile gives it a final transition."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from sqlalchemy import Engine

from batch.ledger import events as ev
from batch.ledger.recorder import Recorder
from batch.ledger.reports import Filters, wait_times

from .helpers import rows

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def _history() -> list[ev.LedgerEvent]:
    out: list[ev.LedgerEvent] = []
    for name in ("alive", "gone", "done"):
        out.append(
            ev.JobObserved(uid=f"j-{name}", namespace="ns", name=name, queue="q", submitted_at=T0)
        )
        out.append(
            ev.PodAttempt(pod_uid=f"p-{name}", namespace="ns", name=name, job_uid=f"j-{name}")
        )
    out.append(
        ev.JobPhaseChanged(
            job_uid="j-done", namespace="ns", name="done", to_phase="Completed", at=T0
        )
    )
    out.append(ev.PodAttempt(pod_uid="p-done", namespace="ns", name="done", outcome="Succeeded"))
    out.append(ev.PodAttempt(pod_uid="p-gone", namespace="ns", name="gone", started_at=T0))
    return out


def test_what_the_api_no_longer_has_gets_a_final_transition(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    with Recorder(ledger_url, spill_path=tmp_path / "spill.jsonl", background=False) as rec:
        rec.record(_history())
        assert rec.flush()
        with engine.connect() as conn:
            before = wait_times(conn, Filters()).rows
        assert [r[:4] for r in before] == [("q", 3, 0, 2)]  # alive and gone are waiting
        lost = rec.lost_candidates(live_jobs={"j-alive"}, live_pods={"p-alive"})
        assert sorted(e.identity[1] for e in lost) == [
            "j-gone",
            "p-gone",
        ]
        rec.record(lost)
        assert rec.flush()
        assert rec.lost_candidates(live_jobs={"j-alive"}, live_pods={"p-alive"}) == []
    jobs = {r["uid"]: r for r in rows(engine, "jobs")}
    assert jobs["j-gone"]["final_phase"] == "Deleted" and jobs["j-alive"]["final_phase"] is None
    transitions = [t for t in rows(engine, "job_transitions") if t["job_uid"] == "j-gone"]
    assert [(t["to_phase"], t["reason"]) for t in transitions] == [("Deleted", "Lost")]
    pods = {r["pod_uid"]: r for r in rows(engine, "pod_attempts")}
    assert pods["p-gone"]["outcome"] == "Deleted" and pods["p-gone"]["finished_at"] is not None
    assert pods["p-alive"]["outcome"] is None
    with engine.connect() as conn:
        after = wait_times(conn, Filters()).rows
    assert [r[:4] for r in after] == [("q", 3, 0, 1)]  # only the live job is still waiting
