"""Options of the commands that run Tephra's components beside a cluster of their own
(`sandbox up`, `cluster up`): one declaration, so both read and explain them alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

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
