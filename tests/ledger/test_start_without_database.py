"""A recorder that migrates its own schema (the controllers', the scheduler's) starts and records
while the database is down or its schema cannot be brought to head, and catches up, each
record once, when the database is there (issue 30.2)."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from batch.ledger import migrate
from batch.ledger.db import make_engine
from batch.ledger.recorder import Recorder
from tests.waiting import wait_for

from .conftest import PG_ADMIN_URL, _admin, _create_pg_database, _drop_pg_database
from .helpers import count, snapshot
from .test_recorder import job_stream

Appear = Callable[[], None]


@pytest.fixture
def late_url(backend: str, tmp_path: Path) -> Iterator[tuple[str, Appear]]:
    """A ledger URL nothing answers at yet, and what makes it answer."""
    if backend == "sqlite":
        blocker = tmp_path / "later"  # a file where the database's directory should be

        def make_directory() -> None:
            blocker.unlink()
            blocker.mkdir()

        blocker.write_text("")
        yield f"sqlite:///{blocker / 'ledger.db'}", make_directory
        return
    name = f"tephra_test_{os.getpid()}_{secrets.token_hex(4)}_late"
    url = make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)

    def create_database() -> None:
        admin = _admin()
        try:
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            admin.dispose()

    try:
        yield url, create_database
    finally:
        _drop_pg_database(url)


def _reference(tmp_path: Path) -> dict[str, list[tuple[object, ...]]]:
    """The rows the test stream makes when written straight into a ledger."""
    url = f"sqlite:///{tmp_path / 'reference.db'}"
    migrate.upgrade(url)
    with Recorder(url, spill_path=tmp_path / "ref-spill.jsonl", background=False) as rec:
        rec.record(job_stream(2))
        assert rec.flush()
    engine = make_engine(url)
    try:
        return snapshot(engine)
    finally:
        engine.dispose()


def test_starts_before_its_database_exists_and_catches_up(
    late_url: tuple[str, Appear], tmp_path: Path
) -> None:
    url, appear = late_url
    rec = Recorder(
        url,
        migrate=True,
        spill_path=tmp_path / "spill.jsonl",
        retry_interval=0.05,
        max_retry_interval=0.2,
    )
    try:
        rec.record(job_stream(2))
        wait_for(lambda: rec.stats.failures >= 2, what="retries while the database is absent")
        health = rec.health()
        assert not health.up and health.since is not None and health.reason
        assert not rec.flush(timeout=10)
        appear()
        assert rec.flush(timeout=30)
        assert rec.health().up and rec.health().reason is None
    finally:
        rec.close()
    engine = make_engine(url)
    try:
        assert snapshot(engine) == _reference(tmp_path)  # every record, each once
        assert migrate.current_revision(engine) == migrate.head_revision()
    finally:
        engine.dispose()


@pytest.fixture
def restricted_url() -> Iterator[tuple[str, str]]:
    """An empty PostgreSQL database owned by the admin, and a URL for a role that may write
    rows but not create tables (as a production ledger role often is)."""
    admin_url = _create_pg_database("_r")
    role = f"tephra_writer_{secrets.token_hex(4)}"
    admin = _admin()
    with admin.connect() as conn:
        conn.execute(text(f'CREATE ROLE "{role}" LOGIN'))
    try:
        yield admin_url, make_url(admin_url).set(username=role).render_as_string(False)
    finally:
        _drop_pg_database(admin_url)
        with admin.connect() as conn:
            conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))
        admin.dispose()


@pytest.mark.postgres
def test_a_schema_it_cannot_migrate_is_one_log_line_and_nothing_is_lost(
    restricted_url: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    admin_url, url = restricted_url
    caplog.set_level(logging.INFO, logger="batch.ledger")
    rec = Recorder(
        url,
        migrate=True,
        spill_path=tmp_path / "spill.jsonl",
        retry_interval=0.05,
        max_retry_interval=0.1,
    )
    try:
        rec.record(job_stream(2))
        wait_for(lambda: rec.stats.failures >= 4, what="retries of the schema check")
        assert not rec.health().up
        complaints = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(complaints) == 1, [r.getMessage() for r in complaints]
        assert complaints[0].exc_info is None
        line = complaints[0].getMessage()
        assert "\n" not in line and "tephra db upgrade" in line and "permission denied" in line
        # the admin runs `tephra db upgrade` and grants the role its rows
        migrate.upgrade(admin_url)
        admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
        role = make_url(url).username
        with admin.connect() as conn:
            rights = "SELECT, INSERT, UPDATE, DELETE"
            conn.execute(text(f'GRANT {rights} ON ALL TABLES IN SCHEMA public TO "{role}"'))
            conn.execute(text(f'GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO "{role}"'))
        admin.dispose()
        assert rec.flush(timeout=30)
        assert rec.health().up
    finally:
        rec.close()
    engine = make_engine(admin_url)
    try:
        assert count(engine, "jobs") == 2 and count(engine, "pod_attempts") == 4
    finally:
        engine.dispose()
