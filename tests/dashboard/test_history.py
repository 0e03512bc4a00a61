"""The history page's model from a ledger on SQLite and on PostgreSQL (the ledger tests' data).

The ledger fixtures (`ledger_url`, `engine`, parametrized over both backends) are the ledger
tests', imported in this package's conftest.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from batch.dashboard.history import History
from batch.dashboard.pages import history_page
from batch.ledger.recorder import Recorder
from tests.ledger.fixture_history import history
from tests.ledger.helpers import t


def test_history_shows_waits_gpu_hours_and_preemptions(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    with Recorder(ledger_url, spill_path=tmp_path / "spill.jsonl", background=False) as rec:
        rec.record(history())
        assert rec.flush()
    # the fixture's jobs ran on 10 and 11 November 2026; 60 days back from today reach them
    model = History(engine, days=60).read()
    assert model["ledger"] is True
    waits = {r["queue"]: r for r in model["wait_times"]}
    assert (waits["q1"]["jobs"], waits["q1"]["p50_wait_s"]) == (2, 18900.0)
    assert (waits["q2"]["jobs"], waits["q2"]["still_waiting"]) == (2, 1)
    gpu_hours = {(r["day"], r["queue"]): r["gpu_hours"] for r in model["usage"]}
    assert gpu_hours[("2026-11-10", "q1")] == 6.0
    page = history_page(model)
    assert page.count('<svg class="chart"') == 3
    fair = {r["queue"]: r for r in model["fairness"]}
    assert (fair["q1"]["avg_allocated_units"], fair["q1"]["avg_deserved_units"]) == (3.0, 4.0)
    assert "q2 allocated: 5 GPUs" in page
    assert "q1 p50: 5.25 hours" in page  # a bar's tooltip: 18,900 s, in the axis's unit
    actions = {
        (r["action"], r["victim_queue"], r["beneficiary_queue"]) for r in model["preemptions"]
    }
    assert ("reclaim", "q1", "q2") in actions
    assert "<td>reclaim</td><td>q1</td><td>q2</td>" in page


def test_history_counts_the_jobs_still_waiting(
    ledger_url: str, engine: Engine, tmp_path: Path
) -> None:
    """D has waited 18 h in q2 at the page's now: q2 shows the longest waits, as lower bounds,
    and its fairness row says one job is still waiting."""
    with Recorder(ledger_url, spill_path=tmp_path / "spill.jsonl", background=False) as rec:
        rec.record(history())
        assert rec.flush()
    model = History(engine, days=7, clock=lambda: t(12)).read()
    waits = {r["queue"]: r for r in model["wait_times"]}
    assert (waits["q2"]["still_waiting"], waits["q2"]["max_wait_s"]) == (1, 64800.0)
    assert waits["q2"]["at_least"] and not waits["q1"]["at_least"]
    fair = {r["queue"]: r for r in model["fairness"]}
    assert (fair["q2"]["still_waiting"], fair["q2"]["longest_wait_s"]) == (1, 64800.0)
    page = history_page(model)
    row = page[page.index("<td>q2</td>") :].split("</tr>")[0]
    assert "<td>1</td>" in row and "&gt;= 18h" in row, row  # still waiting; max wait so far
    q1 = page[page.index("<td>q1</td>") :].split("</tr>")[0]
    assert "&gt;=" not in q1 and "10h" in q1, q1
    assert "still waiting" in page and "lower bound" in page
