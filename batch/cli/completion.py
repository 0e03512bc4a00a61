"""`tephra completion bash|zsh|fish`: the shell completion script (click's completion).

Load it once per shell, e.g. `source <(tephra completion bash)` in `~/.bashrc`,
`tephra completion zsh > "${fpath[1]}/_tephra"`, or
`tephra completion fish > ~/.config/fish/completions/tephra.fish`. The script asks the
`tephra` command itself (`_TEPHRA_COMPLETE=<shell>_complete`) for subcommands, options and
choices (e.g. the values of `-o`), so it never goes stale.
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

_SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", type=click.Choice(_SHELLS))
def completion(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish."""
    from batch.cli.main import main

    cls = get_completion_class(shell)
    if cls is None:  # pragma: no cover - click ships all three
        raise click.UsageError(f"no completion for {shell}")
    script = cls(main, {}, "tephra", "_TEPHRA_COMPLETE").source()
    click.echo(script, nl=False)
