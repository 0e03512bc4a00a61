"""Where the ledger lives and how to connect to it.

The default is a SQLite file in the user's data directory so ``tephra`` works on a laptop with no
setup; production points ``--db`` or ``TEPHRA_DB_URL`` at PostgreSQL
(``postgresql+psycopg://user@host/db``). Plain ``postgresql://`` and ``postgres://`` URLs are
mapped to the psycopg 3 driver, which is the one the project ships.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from batch.api.errors import UserError

ENV_URL = "TEPHRA_DB_URL"
#: An execution option: on PostgreSQL (an engine from ``make_engine``), the statement's rows come
#: back in the binary format, which psycopg turns into floats and integers faster than text (0.1
#: s of the usage report's ~100,000 rows over a month). The values are the same.
BINARY_RESULTS = "tephra_binary_results"


class LedgerConfigError(UserError):
    """A user-supplied database setting is unusable (message names the setting)."""


def data_dir() -> Path:
    """``$XDG_DATA_HOME/tephra`` (default ``~/.local/share/tephra``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "tephra"


def state_dir() -> Path:
    """``$XDG_STATE_HOME/tephra`` (default ``~/.local/state/tephra``), for spill files."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "tephra"


def default_url() -> str:
    return f"sqlite:///{data_dir() / 'ledger.db'}"


def resolve_url(url: str | None = None) -> str:
    """The URL to use: explicit argument, then ``TEPHRA_DB_URL``, then the SQLite default."""
    chosen = url or os.environ.get(ENV_URL) or default_url()
    return normalize_url(chosen)


def normalize_url(url: str) -> str:
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise LedgerConfigError(f"--db/{ENV_URL}: {url!r} is not a database URL ({exc})") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise LedgerConfigError(
            f"--db/{ENV_URL}: backend {backend!r} is not supported (use sqlite or postgresql)"
        )
    return parsed.render_as_string(hide_password=False)


def display_url(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def _sqlite_path(url: URL) -> Path | None:
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def missing_sqlite_file(url: str) -> Path | None:
    """The file of a SQLite ``url`` when it does not exist (connecting would create it empty),
    else None (another backend, an in-memory database, or an existing file)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    path = _sqlite_path(parsed)
    return path if path is not None and not path.exists() else None


def make_engine(url: str | None = None, *, create_dirs: bool = True, **kwargs: Any) -> Engine:
    """An engine for the ledger, with sane defaults per backend.

    SQLite gets WAL journaling and a busy timeout (the sandbox writes while the CLI reads);
    PostgreSQL gets a short connect timeout so an outage is noticed quickly.
    """
    resolved = resolve_url(url)
    parsed = make_url(resolved)
    connect_args: dict[str, Any] = dict(kwargs.pop("connect_args", {}))
    if parsed.get_backend_name() == "sqlite":
        path = _sqlite_path(parsed)
        if path is not None and create_dirs:
            # A directory that cannot be made now is the first connection's error (an outage
            # a recorder waits out), not the engine's: it may appear later (a volume mounted).
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
        connect_args.setdefault("timeout", 30)
        engine = create_engine(resolved, connect_args=connect_args, **kwargs)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    connect_args.setdefault("connect_timeout", 5)
    kwargs.setdefault("pool_pre_ping", True)
    engine = create_engine(resolved, connect_args=connect_args, **kwargs)
    event.listen(engine, "before_cursor_execute", _binary_results)
    return engine


def _binary_results(
    _conn: Any, cursor: Any, _statement: str, _params: Any, context: Any, _many: bool
) -> None:
    """``BINARY_RESULTS``: ask psycopg for binary rows (``Cursor.format``) for this statement.
    The format's enum is taken from the cursor's own (text) format: this module imports no
    driver (reports import it, and they stay off the driver)."""
    if context is not None and context.execution_options.get(BINARY_RESULTS):
        cursor.format = type(cursor.format).BINARY
