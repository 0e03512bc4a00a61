"""Options of the commands that run Tephra's components beside a cluster of their own
(`sandbox up`, `cluster up`): one declaration, so both read and explain them alike; and the
dashboard both serve beside it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from batch.api.errors import one_line

F = TypeVar("F", bound=Callable[..., Any])


def component_options(conf_help: str) -> Callable[[F], F]:
    """``--scheduler-conf`` (explained by ``conf_help``), ``--schedule-period``, ``--db`` and
    ``--no-ledger``."""

    def wrap(fn: F) -> F:
        for option in reversed(
            (
                click.option(
                    "--scheduler-conf",
                    type=click.Path(exists=True, dir_okay=False, path_type=Path),
                    help=conf_help,
                ),
                click.option(
                    "--schedule-period",
                    type=float,
                    default=1.0,
                    show_default=True,
                    help="Seconds between scheduling sessions.",
                ),
                click.option(
                    "--db",
                    "db_url",
                    help="Ledger database URL of Tephra's components (default: $TEPHRA_DB_URL, "
                    "else a SQLite file in the user's data directory; see `tephra db url`).",
                ),
                click.option("--no-ledger", is_flag=True, help="Record no job history."),
            )
        ):
            fn = option(fn)
        return fn

    return wrap


def dashboard_options(fn: F) -> F:
    """``--no-dashboard`` and ``--dashboard-port``."""
    fn = click.option(
        "--dashboard-port",
        type=click.IntRange(0, 65535),
        default=0,
        show_default=True,
        help="Port of the web dashboard on 127.0.0.1 (0: a free port).",
    )(fn)
    return click.option("--no-dashboard", is_flag=True, help="Do not serve the web dashboard.")(fn)


@contextlib.contextmanager
def dashboard_beside(
    kubeconfig: Path, db_url: str | None, port: int | None
) -> Iterator[str | None]:
    """The web dashboard beside the cluster of `kubeconfig` on 127.0.0.1 (with the ledger's
    history at `db_url`, when the components record one); nothing when `port` is None
    (`--no-dashboard`). One that cannot start (its port taken) is said and done without: the
    cluster serves on. Yields its URL (None: none)."""
    if port is None:
        yield None
        return
    from batch.cli.dashboard import serve_beside

    with contextlib.ExitStack() as stack:
        try:
            url: str | None = stack.enter_context(serve_beside(kubeconfig, db_url, port))
        except (RuntimeError, OSError) as exc:
            click.echo(f"dashboard: not started: {one_line(exc)}", err=True)
            url = None
        yield url
