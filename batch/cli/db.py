"""``tephra db``: create, inspect, migrate and prune the job ledger's database.

The database is ``--db URL``, else ``TEPHRA_DB_URL``, else the SQLite file in the user's data
directory (``$XDG_DATA_HOME/tephra/ledger.db``). PostgreSQL URLs may be written
``postgresql://...``; they are run through psycopg 3.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def db_option(func: F) -> F:
    return click.option(
        "--db",
        "db_url",
        metavar="URL",
        default=None,
        help="SQLAlchemy URL of the ledger (default: $TEPHRA_DB_URL or the per-user SQLite file).",
    )(func)


def fail_cleanly(exc: Exception, url: str | None) -> click.ClickException:
    """One line for the user instead of a traceback."""
    from sqlalchemy.exc import OperationalError, ProgrammingError, SQLAlchemyError

    from batch.ledger.db import LedgerConfigError, display_url, resolve_url

    if isinstance(exc, click.ClickException):
        return exc
    if isinstance(exc, LedgerConfigError):
        return click.ClickException(str(exc))
    try:
        where = display_url(resolve_url(url))
    except LedgerConfigError as bad:
        return click.ClickException(str(bad))
    first = str(getattr(exc, "orig", exc) or type(exc).__name__).strip().splitlines()
    detail = first[0] if first else type(exc).__name__
    if isinstance(exc, (OperationalError, ProgrammingError)) and (
        "no such table" in detail or "does not exist" in detail
    ):
        return click.ClickException(
            f"ledger {where} has no schema yet ({detail}); run `tephra db upgrade`"
        )
    if isinstance(exc, SQLAlchemyError):
        return click.ClickException(f"ledger {where}: {detail}")
    return click.ClickException(f"ledger {where}: {exc}")


def require_ledger(url: str | None) -> None:
    """Refuse to read a SQLite ledger that does not exist (connecting would leave an empty
    file behind and advise `db upgrade`): one line naming the path and the ledger the sandbox
    records to without --db."""
    from batch.ledger.db import display_url, missing_sqlite_file, resolve_url

    resolved = resolve_url(url)
    path = missing_sqlite_file(resolved)
    if path is None:
        return
    usual = resolve_url(None)  # what `tephra sandbox up` and every command use without --db
    if usual == resolved:
        hint = "where `tephra sandbox up` records unless given --db; give --db URL or set "
        hint += "TEPHRA_DB_URL for another ledger"
    elif missing_sqlite_file(usual) is None:
        hint = f"`tephra sandbox up` records to {display_url(usual)} unless given --db"
    else:
        hint = "check --db and TEPHRA_DB_URL"
    raise click.ClickException(f"no ledger at {path} ({hint})")


@click.group("db")
def db() -> None:
    """Manage the ledger database (schema migrations and retention)."""


@db.command("url")
@db_option
def url_cmd(db_url: str | None) -> None:
    """Print the database URL that would be used (password hidden)."""
    from batch.ledger.db import LedgerConfigError, display_url, resolve_url

    try:
        click.echo(display_url(resolve_url(db_url)))
    except LedgerConfigError as exc:
        raise click.ClickException(str(exc)) from None


@db.command("upgrade")
@click.option("--revision", default="head", show_default=True, help="Target revision.")
@db_option
def upgrade_cmd(revision: str, db_url: str | None) -> None:
    """Create or migrate the schema (and report views) up to REVISION."""
    from batch.ledger import migrate
    from batch.ledger.db import display_url, resolve_url

    try:
        url = resolve_url(db_url)
        before = migrate.current_revision(url)
        migrate.upgrade(url, revision)
        after = migrate.current_revision(url)
    except Exception as exc:
        raise fail_cleanly(exc, db_url) from None
    click.echo(f"{display_url(url)}: {before or 'empty'} -> {after or 'empty'}")


@db.command("downgrade")
@click.argument("revision")
@db_option
def downgrade_cmd(revision: str, db_url: str | None) -> None:
    """Migrate the schema down to REVISION (an id, -1 for one step, or base for nothing)."""
    from batch.ledger import migrate
    from batch.ledger.db import display_url, resolve_url

    try:
        url = resolve_url(db_url)
        before = migrate.current_revision(url)
        migrate.downgrade(url, revision)
        after = migrate.current_revision(url)
    except Exception as exc:
        raise fail_cleanly(exc, db_url) from None
    click.echo(f"{display_url(url)}: {before or 'empty'} -> {after or 'empty'}")


@db.command("current")
@db_option
def current_cmd(db_url: str | None) -> None:
    """Show the schema revision of the database and the newest one available."""
    from batch.ledger import migrate
    from batch.ledger.db import display_url, resolve_url

    try:
        url = resolve_url(db_url)
        current = migrate.current_revision(url)
        head = migrate.head_revision()
    except Exception as exc:
        raise fail_cleanly(exc, db_url) from None
    state = "up to date" if current == head else "run `tephra db upgrade`"
    click.echo(f"{display_url(url)}: revision {current or 'empty'} (head {head}; {state})")


@db.command("prune")
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="DURATION",
    help="Delete history that ended longer ago than this (e.g. 90d, 12w, 36h).",
)
@click.option("--dry-run", is_flag=True, help="Only count what would be deleted.")
@db_option
def prune_cmd(older_than: str, dry_run: bool, db_url: str | None) -> None:
    """Delete finished jobs, samples and events older than --older-than."""
    import datetime as dt

    from batch.ledger.db import make_engine
    from batch.ledger.prune import prune
    from batch.ledger.timeutil import TimeSpecError, parse_duration

    try:
        cutoff = dt.datetime.now(dt.UTC) - parse_duration(older_than)
    except TimeSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from None
    try:
        engine = make_engine(db_url)
        try:
            with engine.begin() as conn:
                result = prune(conn, before=cutoff, dry_run=dry_run)
        finally:
            engine.dispose()
    except Exception as exc:
        raise fail_cleanly(exc, db_url) from None
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"history before {cutoff.isoformat(timespec='seconds')}: {verb}")
    for name in (
        "jobs",
        "transitions",
        "pod_attempts",
        "scheduling_events",
        "queue_usage_samples",
        "queue_configs",
    ):
        click.echo(f"  {name:<20} {getattr(result, name)}")
