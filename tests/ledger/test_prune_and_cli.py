"""Retention (`tephra db prune`) and the `tephra db` / `tephra report` commands."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine

from batch.cli.main import main
from batch.ledger import migrate
from batch.ledger.prune import prune
from batch.ledger.recorder import Recorder
from batch.ledger.timeutil import TimeSpecError, parse_duration, parse_when

from .fixture_history import history
from .helpers import rows, snapshot, t


@pytest.fixture
def loaded(ledger_url: str, engine: Engine, tmp_path: Path) -> Engine:
    with Recorder(ledger_url, spill_path=tmp_path / "spill.jsonl", background=False) as rec:
        rec.record(history())
        assert rec.flush()
    return engine


def test_prune_keeps_running_jobs_and_the_config_in_force(loaded: Engine) -> None:
    before = snapshot(loaded)
    with loaded.begin() as conn:
        counted = prune(conn, before=t(11), dry_run=True)
    assert snapshot(loaded) == before  # dry run changes nothing
    with loaded.begin() as conn:
        deleted = prune(conn, before=t(11))
    assert deleted == counted
    # A (finished on the 10th) goes with its transitions and pods (a0, and a-old known from
    # the preemption that evicted it); B, C, D stay.
    assert (deleted.jobs, deleted.transitions, deleted.pod_attempts) == (1, 3, 2)
    assert deleted.scheduling_events == 1 and deleted.queue_usage_samples == 4
    assert deleted.queue_configs == 1  # q1's weight-2 config was superseded on the 10th
    assert sorted(r["uid"] for r in rows(loaded, "jobs")) == ["B", "C", "D"]
    configs = sorted((r["queue"], r["weight"]) for r in rows(loaded, "queue_configs"))
    assert configs == [("q1", 3), ("q2", 1)]


def test_durations_and_times() -> None:
    assert parse_duration("90d").days == 90
    assert parse_duration("36h").total_seconds() == 36 * 3600
    # the scheduler's Go grammar with days and weeks: one spelling of durations everywhere
    assert parse_duration("1d12h") == parse_duration("36h") == parse_duration("2160m")
    assert parse_duration("2w").days == 14
    assert parse_when("2026-11-10") == t(10)
    assert parse_when("2026-11-10T12:00:00Z") == t(10, 12)
    assert parse_when("1d", now=t(11)) == t(10)
    with pytest.raises(TimeSpecError, match="not a duration"):
        parse_duration("ninety days")
    with pytest.raises(TimeSpecError, match="not a time"):
        parse_when("yesterday-ish")


def test_db_commands(empty_url: str) -> None:
    head = migrate.head_revision()
    runner = CliRunner()
    res = runner.invoke(main, ["db", "current", "--db", empty_url])
    assert res.exit_code == 0 and "revision empty" in res.output
    res = runner.invoke(main, ["db", "upgrade", "--db", empty_url])
    assert res.exit_code == 0, res.output
    assert f"empty -> {head}" in res.output
    res = runner.invoke(main, ["db", "current", "--db", empty_url])
    assert f"revision {head}" in res.output and "up to date" in res.output
    res = runner.invoke(main, ["db", "downgrade", "0001", "--db", empty_url])
    assert res.exit_code == 0 and f"{head} -> 0001" in res.output
    res = runner.invoke(main, ["db", "downgrade", "base", "--db", empty_url])
    assert res.exit_code == 0 and "0001 -> empty" in res.output
    res = runner.invoke(main, ["db", "upgrade", "--db", empty_url])
    assert res.exit_code == 0
    res = runner.invoke(
        main, ["db", "prune", "--older-than", "30d", "--dry-run", "--db", empty_url]
    )
    assert res.exit_code == 0 and "would delete" in res.output


def test_report_commands(loaded: Engine, ledger_url: str) -> None:
    runner = CliRunner()
    common = ["--since", "2026-11-09", "--until", "2026-11-12", "--db", ledger_url]
    res = runner.invoke(main, ["report", "wait-times", *common])
    assert res.exit_code == 0, res.output
    assert "QUEUE" in res.output and "18900" in res.output
    lines = {line.split()[0]: line for line in res.output.splitlines() if line.startswith("q")}
    assert ">=" not in lines["q1"] and ">=" in lines["q2"]  # D still waits: a lower bound
    assert "STILL_WAITING" in res.output and "lower bound" in res.output
    res = runner.invoke(main, ["report", "usage", "--by", "queue", "--format", "csv", *common])
    assert res.exit_code == 0, res.output
    table = list(csv.DictReader(io.StringIO(res.output)))
    assert [(r["queue"], float(r["gpu_hours"])) for r in table] == [("q1", 8.0), ("q2", 2.0)]
    res = runner.invoke(main, ["report", "fairness", "--format", "json", "--queue", "q2", *common])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)[0]["avg_share_of_deserved"] == 1.25
    for name in ("preemptions", "outcomes"):
        res = runner.invoke(main, ["report", name, "--format", "json", *common])
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)


def test_user_errors_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(main, ["report", "usage", "--since", "soon", "--db", "sqlite://"])
    assert res.exit_code == 2 and "not a time" in res.output
    res = runner.invoke(main, ["report", "usage", "--db", "mysql://x@y/z"])
    assert res.exit_code == 1 and "not supported" in res.output
    assert "Traceback" not in res.output
    empty = tmp_path / "nothing.db"
    empty.touch()  # a file with no schema (a missing one is `no ledger at`, below)
    res = runner.invoke(main, ["report", "outcomes", "--db", f"sqlite:///{empty}"])
    assert res.exit_code == 1 and "tephra db upgrade" in res.output
    res = runner.invoke(main, ["db", "prune", "--older-than", "forever", "--db", "sqlite://"])
    assert res.exit_code == 2 and "not a duration" in res.output


def test_default_url_is_per_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from batch.ledger.db import resolve_url

    monkeypatch.delenv("TEPHRA_DB_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert resolve_url() == f"sqlite:///{tmp_path}/tephra/ledger.db"
    monkeypatch.setenv("TEPHRA_DB_URL", "postgresql://u@h/db")
    assert resolve_url() == "postgresql+psycopg://u@h/db"
    assert resolve_url("sqlite:///x.db") == "sqlite:///x.db"


def test_report_on_a_missing_sqlite_file_creates_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 30.10: a mistyped path, or no --db before any ledger exists, is one line naming
    the path (and the default ledger, which the sandbox writes, when that one exists); no empty
    database is left behind to advise `db upgrade` about."""
    monkeypatch.delenv("TEPHRA_DB_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    default = tmp_path / "data" / "tephra" / "ledger.db"
    runner = CliRunner()
    res = runner.invoke(main, ["report", "wait-times"])
    assert res.exit_code == 1
    assert res.output.splitlines() == [res.output.strip()]
    assert f"no ledger at {default}" in res.output and "tephra sandbox up" in res.output
    assert not (tmp_path / "data").exists()
    typo = tmp_path / "ledgr" / "ledger.db"
    res = runner.invoke(main, ["report", "usage", "--db", f"sqlite:///{typo}"])
    assert res.exit_code == 1 and f"no ledger at {typo}" in res.output
    assert "db upgrade" not in res.output and "Traceback" not in res.output
    assert not typo.parent.exists()
    migrate.upgrade(f"sqlite:///{default}")  # the sandbox has recorded: point at its ledger
    res = runner.invoke(main, ["report", "outcomes", "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    assert res.exit_code == 1 and f"no ledger at {tmp_path / 'x.db'}" in res.output
    assert str(default) in res.output and res.output.splitlines() == [res.output.strip()]
    assert not (tmp_path / "x.db").exists()
