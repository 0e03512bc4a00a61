"""`tephra whatif`: replay the ledger's recorded submissions with proposed queue changes.

Thin shell over `batch.sim.whatif`: reads the workload from the ledger (`--db`, `--since`), the
cluster from `--cluster`, runs Tephra's scheduler once with today's queue configuration and once
with the `--set` changes, and prints who gains and who loses, with what the replay assumed and
left out (per assumption and reason, with counts: under the table, or `assumptions` in JSON and
YAML). It says on stderr how many recorded jobs it replays and which `--set` queues are new
(not in the ledger: added, with no recorded jobs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from batch.api.yamlio import read_text_file
from batch.cli.job import table
from batch.cli.output import RECORD_FORMATS, dump, output_option

if TYPE_CHECKING:
    from batch.sim.cluster import QueueSpec
    from batch.sim.whatif import QueueChange

__all__ = ["whatif"]


@click.command("whatif")
@click.option("--db", required=True, help="Ledger database URL (as for tephra db / report).")
@click.option("--since", default="7d", show_default=True, help="Replay submissions of this window.")
@click.option(
    "--set",
    "changes",
    multiple=True,
    required=True,
    help="A queue change, e.g. queue=q1,weight=3 or queue=q2,capability.nvidia.com/gpu=16 "
    "(repeatable).",
)
@click.option(
    "--cluster",
    "cluster_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="Cluster spec YAML or Node manifests (e.g. the file given to tephra sandbox up --nodes).",
)
@click.option(
    "--scheduler-conf",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="volcano-scheduler.conf (default: the one Tephra ships).",
)
@click.option("--period", type=float, default=1.0, show_default=True)
@output_option(RECORD_FORMATS)
@click.option("--json", "as_json", is_flag=True, hidden=True)  # before -o json; kept for scripts
def whatif(
    db: str,
    since: str,
    changes: tuple[str, ...],
    cluster_file: Path,
    scheduler_conf: Path | None,
    period: float,
    output: str,
    as_json: bool,
) -> None:
    """Compare today's queue configuration with a proposed one on recorded submissions."""
    from batch.sim.cluster import load_cluster_file
    from batch.sim.errors import SimInputError
    from batch.sim.traces.ledger import load_ledger
    from batch.sim.whatif import compare_queue_configs, format_whatif, new_queues, parse_change

    try:
        parsed = [parse_change(c) for c in changes]
        cluster = load_cluster_file(cluster_file)
        workload = load_ledger(db, since=since, cluster=cluster)
        if not workload.jobs:
            raise SimInputError(
                f"--db: no job to replay submitted in the last {since} "
                f"({'; '.join(workload.assumptions) or 'none recorded'})"
            )
        conf = read_text_file(scheduler_conf) if scheduler_conf is not None else None
        for note in workload.notes:
            click.echo(note, err=True)
        for name in new_queues(workload.cluster.queues, parsed):
            click.echo(f"--set queue={name}: not in the ledger, added as a new queue", err=True)
        click.echo(
            f"running the scheduler twice on {cluster.node_count} nodes "
            f"({cluster.gpu_milli_total / 1000:g} GPUs)",
            err=True,
        )
        result = compare_queue_configs(workload, parsed, conf=conf, period=period)
    except SimInputError as exc:
        raise click.ClickException(str(exc)) from None
    fmt = "json" if as_json else output
    if fmt in ("json", "yaml"):
        click.echo(dump({"queues": result.rows, "assumptions": result.assumptions}, fmt))
        return
    click.echo(format_whatif(result))
    if fmt == "wide":
        click.echo("")
        click.echo(_limits_table(workload.cluster.queues, parsed))


def _limits_table(queues: Sequence[QueueSpec], changes: Sequence[QueueChange]) -> str:
    """`-o wide`: each queue's capability, guarantee and reclaimable, now -> proposed."""
    from batch.sim.whatif import apply_changes

    now = {q.name: q for q in queues}
    rows = []
    for new in apply_changes(queues, changes):
        old = now.get(new.name)
        rows.append(
            [new.name]
            + [
                f"{_amounts(getattr(old, f)) if old else 'new'}->{_amounts(getattr(new, f))}"
                for f in ("capability", "guarantee")
            ]
            + [f"{str(old.reclaimable).lower() if old else 'new'}->{str(new.reclaimable).lower()}"]
        )
    return table(["queue", "capability", "guarantee", "reclaimable"], rows)


def _amounts(amounts: Mapping[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((amounts or {}).items())) or "-"
