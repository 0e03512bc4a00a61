"""Schema migrations, driven programmatically through Alembic.

The Alembic scripts live in the repository's ``migrations/`` folder (env.py + versions/); this
module builds the Alembic configuration in code, so neither the CLI nor the tests need an
``alembic.ini``. ``TEPHRA_MIGRATIONS_DIR`` overrides the location (e.g. for an installed wheel
shipping the folder elsewhere).
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from batch.ledger.db import make_engine

ENV_MIGRATIONS = "TEPHRA_MIGRATIONS_DIR"


def migrations_dir() -> Path:
    override = os.environ.get(ENV_MIGRATIONS)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(connection: Connection | None = None, *, url: str | None = None) -> Config:
    folder = migrations_dir()
    if not (folder / "env.py").is_file():
        raise FileNotFoundError(
            f"ledger migrations not found at {folder} (set {ENV_MIGRATIONS} to the folder)"
        )
    cfg = Config()
    cfg.set_main_option("script_location", str(folder))
    cfg.set_main_option("version_locations", str(folder / "versions"))
    cfg.set_main_option("path_separator", "os")
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


_LOCK_KEY = 0x7E9A1ED6  # pg_advisory_xact_lock key for "tephra ledger migrations"
_THREAD_LOCK = threading.Lock()


@contextmanager
def _connected(target: str | Engine | None, *, exclusive: bool = False) -> Iterator[Connection]:
    """A transaction on the ledger; with ``exclusive``, one migrator at a time.

    The controllers and the scheduler service both run ``upgrade`` when they start, often at
    the same moment: PostgreSQL serialises them with a transaction-scoped advisory lock, SQLite
    with a lock file beside the database (plus a thread lock for the same process).
    """
    engine = target if isinstance(target, Engine) else make_engine(target)
    lock_file = None
    try:
        if exclusive:
            _THREAD_LOCK.acquire()
            path = engine.url.database if engine.dialect.name == "sqlite" else None
            if path and path != ":memory:" and not path.startswith("file:"):
                lock_file = open(f"{path}.migrate.lock", "a")  # noqa: SIM115 - held below
                fcntl.flock(lock_file, fcntl.LOCK_EX)
        with engine.begin() as conn:
            if exclusive and conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
            yield conn
    finally:
        if lock_file is not None:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
            lock_file.close()
        if exclusive:
            _THREAD_LOCK.release()
        if not isinstance(target, Engine):
            engine.dispose()


def upgrade(target: str | Engine | None = None, revision: str = "head") -> None:
    with _connected(target, exclusive=True) as conn:
        command.upgrade(alembic_config(conn), revision)


def downgrade(target: str | Engine | None = None, revision: str = "-1") -> None:
    with _connected(target, exclusive=True) as conn:
        command.downgrade(alembic_config(conn), revision)


def current_revision(target: str | Engine | None = None) -> str | None:
    with _connected(target) as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def revisions() -> list[str]:
    """All revision ids from base to head."""
    script = ScriptDirectory.from_config(alembic_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]
