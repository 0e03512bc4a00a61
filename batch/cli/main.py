"""Entry point of the `tephra` command.

Subcommands live in their own modules under `batch.cli` and are loaded lazily, so that
`tephra validate` does not pay for importing the scheduler, kopf or SQLAlchemy. To add a
subcommand, add one line to `_SUBCOMMANDS`: name -> "module:attribute" of a click command.
"""

from __future__ import annotations

import importlib
from typing import Any

import click
import yaml

import batch
from batch.api.errors import UserError, one_line

_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    # name: ("module:attribute", "short help")
    "db": ("batch.cli.db:db", "Migrate, inspect and prune the job ledger database."),
    "report": ("batch.cli.report:report", "Reports from the job ledger (waits, usage, fairness)."),
    "validate": ("batch.cli.validate:validate", "Default and validate Volcano YAML offline."),
    "crds": ("batch.cli.crds:crds", "Write the CRDs generated from batch.api."),
    "sandbox": ("batch.cli.sandbox:sandbox", "Run the embedded cluster (API server + nodes)."),
    "cluster": ("batch.cli.cluster:cluster", "Run a real control plane built from Go modules."),
    "scheduler": ("batch.cli.scheduler:scheduler", "Run the scheduler service."),
    "demo": ("batch.cli.demo:demo", "Play Tephra's story on the embedded sandbox."),
    "dashboard": ("batch.cli.dashboard:dashboard", "Serve the read-only web dashboard."),
    "controller": ("batch.cli.controller:controller", "Run the job/queue/PodGroup controllers."),
    "job": ("batch.cli.job:job", "Run and manage Volcano jobs (vcctl job)."),
    "queue": ("batch.cli.queue:queue", "Create and manage queues (vcctl queue)."),
    "webhook": ("batch.cli.webhook:webhook", "Serve the admission webhooks over HTTPS."),
    "sim": ("batch.cli.sim:sim", "Replay a GPU-cluster trace through the scheduler (simulator)."),
    "whatif": ("batch.cli.whatif:whatif", "Replay the ledger with proposed queue weights."),
    "gang": ("batch.cli.gang:gang", "Show the PodGroup Tephra derives for framework workloads."),
    "pod": ("batch.cli.pod:pod", "List the pods of Volcano jobs (vcctl pod)."),
    "version": ("batch.cli.version:version", "Print the client's and the API server's versions."),
    "completion": ("batch.cli.completion:completion", "Print the bash, zsh or fish completion."),
}


#: what a user's input or environment causes (a bad file, an unreachable server), wherever a
#: command lets it through: one line, exit status 1. Anything else is a bug and keeps its traceback.
_USER_ERRORS = (UserError, OSError, UnicodeError, yaml.YAMLError)


class _LazyGroup(click.Group):
    """A click group that imports each subcommand's module only when it is invoked."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _USER_ERRORS as exc:
            raise click.ClickException(one_line(exc)) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *_SUBCOMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _SUBCOMMANDS:
            target, _help = _SUBCOMMANDS[cmd_name]
            module_name, _, attr = target.partition(":")
            command: Any = getattr(importlib.import_module(module_name), attr)
            if not isinstance(command, click.Command):  # pragma: no cover - programming error
                raise TypeError(f"{target} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_t, help_text) in sorted(_SUBCOMMANDS.items())]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=_LazyGroup)
@click.version_option(batch.__version__, prog_name="tephra")
def main() -> None:
    """Tephra: gang scheduling, fair queues and a job ledger for AI workloads on Kubernetes."""


if __name__ == "__main__":  # pragma: no cover
    main()
