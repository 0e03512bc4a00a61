"""Schema migrations, driven programmatically through Alembic.

The Alembic scripts live in the repository's ``migrations/`` folder (env.py + versions/); this
module builds the Alembic configuration in code, so neither the CLI nor the tests need an
``alembic.ini``. ``TEPHRA_MIGRATIONS_DIR`` overrides the location (e.g. for an installed wheel
shipping the folder elsewhere).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine

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


@contextmanager
def _connected(target: str | Engine | None) -> Iterator[Connection]:
    engine = target if isinstance(target, Engine) else make_engine(target)
    try:
        with engine.begin() as conn:
            yield conn
    finally:
        if not isinstance(target, Engine):
            engine.dispose()


def upgrade(target: str | Engine | None = None, revision: str = "head") -> None:
    with _connected(target) as conn:
        command.upgrade(alembic_config(conn), revision)


def downgrade(target: str | Engine | None = None, revision: str = "-1") -> None:
    with _connected(target) as conn:
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
