"""Migrations: every revision upgrades and downgrades cleanly, and the models match the schema."""

from __future__ import annotations

import re
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

from batch.ledger import migrate
from batch.ledger.db import make_engine
from batch.ledger.models import TABLES, Base

VIEWS = {
    "report_wait_times",
    "report_pod_usage",
    "report_usage_daily",
    "report_preemptions",
    "report_outcomes",
    "report_queue_share",
}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "ledger.md"


def _objects(url: str) -> tuple[set[str], set[str]]:
    engine = make_engine(url)
    try:
        insp = inspect(engine)
        return set(insp.get_table_names()) - {"alembic_version"}, set(insp.get_view_names())
    finally:
        engine.dispose()


def test_round_trip_every_revision(empty_url: str) -> None:
    revisions = migrate.revisions()
    assert revisions[0] == "0001" and len(revisions) >= 2
    assert migrate.current_revision(empty_url) is None
    for rev in revisions:
        migrate.upgrade(empty_url, rev)
        assert migrate.current_revision(empty_url) == rev
        migrate.downgrade(empty_url, "-1")
        migrate.upgrade(empty_url, rev)
    tables, views = _objects(empty_url)
    assert tables == {t.name for t in TABLES}
    assert views == VIEWS
    migrate.downgrade(empty_url, "base")
    assert migrate.current_revision(empty_url) is None
    assert _objects(empty_url) == (set(), set())
    migrate.upgrade(empty_url)
    assert migrate.current_revision(empty_url) == migrate.head_revision()


def test_autogenerate_shows_no_drift(engine: Engine) -> None:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(ctx, Base.metadata) == []


def test_constraint_names_follow_the_convention(engine: Engine) -> None:
    insp = inspect(engine)
    for table in TABLES:
        for idx in insp.get_indexes(table.name):
            assert idx["name"] is not None
            assert idx["name"].startswith((f"ix_{table.name}_", f"uq_{table.name}_"))
        for uq in insp.get_unique_constraints(table.name):
            assert uq["name"] is not None and uq["name"].startswith(f"uq_{table.name}_")


def _documented_columns() -> dict[str, list[str]]:
    """``### report_x`` headings in docs/ledger.md followed by a table of ``| `col` | ...``."""
    docs: dict[str, list[str]] = {}
    current = None
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^###\s+`?(report_\w+)`?", line)
        if heading:
            current = heading.group(1)
            docs[current] = []
            continue
        if line.startswith("#"):
            current = None
        cell = re.match(r"^\|\s*`(\w+)`\s*\|", line)
        if current and cell:
            docs[current].append(cell.group(1))
    return docs


def test_views_are_documented_column_by_column(engine: Engine) -> None:
    documented = _documented_columns()
    assert set(documented) == VIEWS
    with engine.connect() as conn:
        for view in sorted(VIEWS):
            actual = list(conn.execute(text(f"SELECT * FROM {view} LIMIT 0")).keys())
            assert documented[view] == actual, view


def test_wait_time_index_covers_the_report(engine: Engine) -> None:
    """Autogenerate does not compare INCLUDE columns, so check the index itself."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            definition = conn.execute(
                text(
                    "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_jobs_queue_submitted_at'"
                )
            ).scalar_one()
            assert "INCLUDE (first_started_at, namespace)" in definition
        else:
            names = {i["name"] for i in inspect(engine).get_indexes("jobs")}
            assert "ix_jobs_queue_submitted_at" in names


def test_concurrent_upgrades_are_serialised(empty_url: str) -> None:
    """The controllers and the scheduler both upgrade at start-up, often at the same moment."""
    import threading

    errors: list[BaseException] = []

    def run() -> None:
        try:
            migrate.upgrade(empty_url)
        except BaseException as exc:  # pragma: no cover - the failure being tested for
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert migrate.current_revision(empty_url) == migrate.head_revision()
    assert _objects(empty_url) == ({t.name for t in TABLES}, VIEWS)
