"""Fixtures for the ledger tests: every database test runs on SQLite and on real PostgreSQL.

PostgreSQL: each pytest process (each xdist worker) creates its own database
``tephra_test_<pid>_<random>`` on the server named by ``TEPHRA_TEST_PG_URL`` (default: the local
trust-auth server), migrates it once, truncates it before each test and drops it at the end.
Tests that need an *empty* database (migrations) get a further fresh one. If the server is
unreachable the PostgreSQL half fails loudly, unless ``TEPHRA_SKIP_POSTGRES=1`` is set.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from batch.ledger import migrate
from batch.ledger.db import make_engine
from batch.ledger.models import TABLES

PG_ADMIN_URL = os.environ.get(
    "TEPHRA_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def _admin() -> Engine:
    return create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")


def _create_pg_database(suffix: str = "") -> str:
    name = f"tephra_test_{os.getpid()}_{secrets.token_hex(4)}{suffix}"
    admin = _admin()
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        if os.environ.get("TEPHRA_SKIP_POSTGRES") == "1":
            pytest.skip(f"PostgreSQL unreachable at {PG_ADMIN_URL} (TEPHRA_SKIP_POSTGRES=1)")
        pytest.fail(
            f"PostgreSQL unreachable at {PG_ADMIN_URL}: {str(exc.orig).strip()}; start it or set "
            "TEPHRA_SKIP_POSTGRES=1",
            pytrace=False,
        )
    finally:
        admin.dispose()
    return make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


def _drop_pg_database(url: str) -> None:
    name = make_url(url).database
    admin = _admin()
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture(scope="session")
def pg_session_url() -> Iterator[str]:
    url = _create_pg_database()
    try:
        migrate.upgrade(url)
        yield url
    finally:
        _drop_pg_database(url)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ledger-template") / "ledger.db"
    migrate.upgrade(f"sqlite:///{path}")
    return path


def _truncate(url: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for table in TABLES:  # DELETE beats TRUNCATE on tables this small
                conn.execute(table.delete())
    finally:
        engine.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ledger_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty ledger on the parametrized backend."""
    if backend == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        target = tmp_path / "ledger.db"
        shutil.copyfile(template, target)
        return f"sqlite:///{target}"
    url: str = request.getfixturevalue("pg_session_url")
    _truncate(url)
    return url


@pytest.fixture
def engine(ledger_url: str) -> Iterator[Engine]:
    eng = make_engine(ledger_url)
    yield eng
    eng.dispose()


@pytest.fixture
def empty_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A database with no schema at all on the parametrized backend."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    url = _create_pg_database("_e")
    try:
        yield url
    finally:
        _drop_pg_database(url)
