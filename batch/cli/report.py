"""``tephra report``: wait times, usage, preemptions, outcomes and fairness from the ledger.

Each report aggregates one of the ledger's SQL views (``report_*``; see docs/ledger.md), so the
figures here can be reproduced with plain SQL. The window defaults to the last 7 days.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from batch.cli.db import db_option, fail_cleanly, require_ledger
from batch.cli.output import dump, output_option

#: `-o wide` is the table with every figure at full precision (the table rounds to 3 decimals)
_FORMATS = ("table", "wide", "csv", "json", "yaml")

F = TypeVar("F", bound=Callable[..., Any])


def _common(func: F) -> F:
    options = [
        click.option(
            "--since",
            default="7d",
            show_default=True,
            help="Start of the window: 7d (ago), 2026-12-01, 2026-12-01T10:00:00Z.",
        ),
        click.option("--until", default="now", show_default=True, help="End of the window."),
        click.option(
            "--now",
            "as_of",
            default="now",
            show_default=True,
            help="The time jobs still waiting have waited until (wait-times, fairness).",
        ),
        click.option("--queue", "queues", multiple=True, help="Only these queues (repeatable)."),
        click.option(
            "--namespace", "namespaces", multiple=True, help="Only these namespaces (repeatable)."
        ),
        output_option(_FORMATS),
        click.option(  # the spelling before -o/--output, kept for scripts
            "--format", "legacy_format", type=click.Choice(_FORMATS), default=None, hidden=True
        ),
        db_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _run(name: str, opts: dict[str, Any], **extra: Any) -> None:
    # imported here, not above: `tephra report --help` needs none of SQLAlchemy (0.3 s of CPU)
    from batch.ledger.db import make_engine
    from batch.ledger.reports import REPORTS, Filters, fairness, render, usage
    from batch.ledger.timeutil import TimeSpecError, parse_when

    try:
        since = parse_when(opts["since"])
    except TimeSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from None
    try:
        until = parse_when(opts["until"])
    except TimeSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--until") from None
    try:
        now = parse_when(opts["as_of"])
    except TimeSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--now") from None
    if until <= since:
        raise click.BadParameter("--until must be later than --since", param_hint="--until")
    filters = Filters(
        since=since,
        until=until,
        queues=tuple(opts["queues"]),
        namespaces=tuple(opts["namespaces"]),
        now=now,
    )
    db_url = opts["db_url"]
    try:
        require_ledger(db_url)
        engine = make_engine(db_url, create_dirs=False)
        try:
            with engine.connect() as conn:
                if name == "usage":
                    result = usage(conn, filters, by=extra["by"])
                elif name == "fairness":
                    result = fairness(conn, filters, resource=extra["resource"])
                else:
                    result = REPORTS[name](conn, filters)
        finally:
            engine.dispose()
    except Exception as exc:
        raise fail_cleanly(exc, db_url) from None
    window = f"{since.isoformat(timespec='seconds')} .. {until.isoformat(timespec='seconds')}"
    fmt = opts["legacy_format"] or opts["output"]
    title = f"{result.title}, {window}"
    if fmt == "yaml":
        click.echo(dump([dict(zip(result.columns, r, strict=True)) for r in result.rows], fmt))
    elif fmt == "wide":
        rows = [[repr(v) if isinstance(v, float) else v for v in r] for r in result.rows]
        click.echo(render(title, result.columns, rows, "table", at_least=result.at_least))
    else:
        click.echo(render(title, result.columns, result.rows, fmt, at_least=result.at_least))


@click.group("report")
def report() -> None:
    """Reports from the job ledger (wait times, GPU-hours, preemptions, outcomes, fairness)."""


@report.command("wait-times")
@_common
def wait_times_cmd(**opts: Any) -> None:
    """Queueing delay from submission to Running, per queue (mean and percentiles).

    Jobs still waiting count with their wait so far; a queue's figures are then lower bounds
    (shown as >=N)."""
    _run("wait-times", opts)


@report.command("usage")
@click.option(
    "--by",
    multiple=True,
    type=click.Choice(["day", "queue", "namespace", "submitter"]),
    default=("day", "queue", "namespace", "submitter"),
    show_default=True,
    help="Grouping columns (repeatable).",
)
@_common
def usage_cmd(by: tuple[str, ...], **opts: Any) -> None:
    """GPU-hours and CPU-core-hours per UTC day, queue, namespace and submitter."""
    _run("usage", opts, by=by)


@report.command("preemptions")
@_common
def preemptions_cmd(**opts: Any) -> None:
    """Evictions by preempt/reclaim, from which queue to which."""
    _run("preemptions", opts)


@report.command("outcomes")
@_common
def outcomes_cmd(**opts: Any) -> None:
    """Finished jobs per queue by final phase (a deleted job is not a failure), with retries
    and mean run time."""
    _run("outcomes", opts)


@report.command("fairness")
@click.option(
    "--resource", default="nvidia.com/gpu", show_default=True, help="Resource to compare."
)
@_common
def fairness_cmd(resource: str, **opts: Any) -> None:
    """Average allocation vs deserved share per queue, how often it starved, and the jobs
    still waiting now."""
    _run("fairness", opts, resource=resource)
