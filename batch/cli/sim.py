"""`tephra sim`: replay a GPU-cluster trace through the real scheduler and compare baselines.

Thin shell over `batch.sim`: parses options, shows progress on stderr ("policy i of n", total
ETA), prints the summary table and writes `summary.json`, per-job CSVs and `report.html` into
`--out`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from batch.api.yamlio import read_text_file
from batch.sim.engine import ProgressFn
from batch.sim.progress import RunProgress

__all__ = ["sim"]


@click.command("sim")
@click.option(
    "--trace",
    "trace",
    default=None,
    help="philly | elasticflow | openb | ledger (with --db), or a path.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["philly", "elasticflow", "openb", "ledger"]),
    default=None,
    help="Trace format (guessed from the name when omitted).",
)
@click.option("--db", default=None, help="Ledger database URL (for --format ledger).")
@click.option(
    "--since", default="7d", show_default=True, help="Ledger window (with --format ledger)."
)
@click.option(
    "--scheduler-conf",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="volcano-scheduler.conf for the 'tephra' policy (default: Tephra's default).",
)
@click.option(
    "--compare",
    default="kube-default,fifo",
    show_default=True,
    help=(
        "Policies to run next to tephra, comma separated: kube-default, fifo, tiresias, sjf "
        "('none' for none)."
    ),
)
@click.option(
    "--cluster",
    "cluster_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Cluster spec YAML (node groups, queues) replacing the trace's.",
)
@click.option("--limit", type=int, default=None, help="Only the first N jobs by submit time.")
@click.option(
    "--capacity-scale",
    type=float,
    default=1.0,
    show_default=True,
    help="Multiply every node group's size.",
)
@click.option(
    "--time-compress",
    type=float,
    default=1.0,
    show_default=True,
    help="Divide submit times by this factor (raises the load).",
)
@click.option(
    "--period",
    type=float,
    default=1.0,
    show_default=True,
    help="Scheduling period in virtual seconds.",
)
@click.option(
    "--lifecycle",
    type=click.Choice(["auto", "volcano", "fast"]),
    default="auto",
    show_default=True,
    help="Job lifecycle: the real VCJob reconciler (volcano), its fast equivalent, or auto "
    "(volcano up to 20,000 jobs).",
)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--quiet", is_flag=True, help="No progress on stderr.")
def sim(
    trace: str | None,
    fmt: str | None,
    db: str | None,
    since: str,
    scheduler_conf: Path | None,
    compare: str,
    cluster_file: Path | None,
    limit: int | None,
    capacity_scale: float,
    time_compress: float,
    period: float,
    lifecycle: str,
    out_dir: Path,
    quiet: bool,
) -> None:
    """Replay a trace on a virtual clock through Tephra's scheduler and baselines."""
    from batch.sim.errors import SimInputError

    try:
        _run(
            trace=trace,
            fmt=fmt,
            db=db,
            since=since,
            scheduler_conf=scheduler_conf,
            compare=compare,
            cluster_file=cluster_file,
            limit=limit,
            capacity_scale=capacity_scale,
            time_compress=time_compress,
            period=period,
            lifecycle=lifecycle,
            out_dir=out_dir,
            quiet=quiet,
        )
    except SimInputError as exc:
        raise click.ClickException(str(exc)) from None


def _run(
    *,
    trace: str | None,
    fmt: str | None,
    db: str | None,
    since: str,
    scheduler_conf: Path | None,
    compare: str,
    cluster_file: Path | None,
    limit: int | None,
    capacity_scale: float,
    time_compress: float,
    period: float,
    lifecycle: str,
    out_dir: Path,
    quiet: bool,
) -> None:
    from dataclasses import replace

    from batch.sim.cluster import load_cluster_file
    from batch.sim.errors import SimInputError
    from batch.sim.policies import choose_lifecycle, policies_for
    from batch.sim.report import format_table, write_outputs
    from batch.sim.runner import run_policies
    from batch.sim.traces import load_trace

    if period <= 0:
        raise SimInputError(f"--period: must be > 0, got {period}")
    names = [] if compare.strip() in ("", "none") else compare.split(",")
    policies_for(conf=None, compare=names)  # validate --compare before reading the trace
    cluster = load_cluster_file(cluster_file) if cluster_file is not None else None
    if trace == "ledger" and fmt is None:
        fmt = "ledger"
    if fmt == "ledger" or (db is not None and fmt is None):
        from batch.sim.traces.ledger import load_ledger

        if db is None:
            raise SimInputError("--format ledger: needs --db URL")
        workload = load_ledger(db, since=since, cluster=cluster).limited(limit)
    else:
        if trace is None:
            raise SimInputError("--trace: give a trace name or path (or --format ledger --db URL)")
        workload = load_trace(trace, fmt=fmt, limit=limit)
        if cluster is not None:
            if not cluster.queues:
                cluster = cluster.with_queues(workload.cluster.queues)
            workload = replace(
                workload, cluster=cluster, notes=(*workload.notes, f"cluster from {cluster_file}")
            )
    workload = workload.transformed(capacity_scale=capacity_scale, time_compress=time_compress)
    lifecycle = choose_lifecycle(lifecycle, len(workload.jobs))
    conf = read_text_file(scheduler_conf) if scheduler_conf is not None else None
    policies = policies_for(conf=conf, compare=names, period=period, lifecycle=lifecycle)
    click.echo(
        f"trace {workload.name}: {len(workload.jobs)} jobs, {workload.cluster.node_count} nodes, "
        f"{workload.cluster.gpu_milli_total / 1000:g} GPUs, "
        f"capacity scale {workload.capacity_scale:g}, "
        f"time compression {workload.time_compress:g}, period {period:g}s, "
        f"lifecycle {lifecycle}",
        err=True,
    )
    for note in (*workload.notes, *workload.assumptions):
        click.echo(f"  {note}", err=True)

    reporter = RunProgress(sys.stderr, [p.name for p in policies], len(workload.jobs))

    def progress(name: str) -> ProgressFn | None:
        return None if quiet else reporter.for_policy(name)

    runs = run_policies(workload, policies, progress=progress)
    if not quiet:
        reporter.close()
    paths = write_outputs(out_dir, workload, runs)
    click.echo(format_table({name: run.summary for name, run in runs.items()}))
    click.echo(f"wrote {paths['summary']}, {paths['report']} and per-job CSVs in {out_dir}")
