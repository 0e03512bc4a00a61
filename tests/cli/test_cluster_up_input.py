"""`tephra cluster up` refuses bad input in one line before anything starts (no control plane
binaries are needed to see it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from batch.cli.main import main


def _up(tmp_path: Path, *args: str) -> tuple[int, str]:
    base = ["cluster", "up", f"--kubeconfig={tmp_path / 'k'}", f"--bin-dir={tmp_path}"]
    res = CliRunner().invoke(main, [*base, *args])
    assert not (tmp_path / "k").exists()
    return res.exit_code, res.output


def test_nodes_is_a_file_or_a_count(tmp_path: Path) -> None:
    code, out = _up(tmp_path, "--nodes", str(tmp_path / "missing.yaml"))
    assert code == 2
    assert "neither a file of Node objects nor a count of Nodes" in out


def test_a_nodes_file_holds_nodes_only(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    nodes.write_text(yaml.safe_dump_all([{"kind": "Node", "metadata": {"name": "n"}}, pod]))
    code, out = _up(tmp_path, "--nodes", str(nodes))
    assert code == 2
    assert "document 2 is a Pod, not a Node" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "--port: 70000 is not a port"),
        (["--schedule-period", "0"], "--schedule-period: 0.0 must be a finite number"),
        (["--components", "volcano", "--db", "sqlite://"], "Volcano's components keep no ledger"),
    ],
)
def test_bad_options(tmp_path: Path, args: list[str], message: str) -> None:
    code, out = _up(tmp_path, *args)
    assert code == 2, out
    assert message in out


def test_volcano_not_built_says_make_oracles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEPHRA_VOLCANO_BIN", raising=False)
    monkeypatch.setenv("TEPHRA_CACHE_DIR", str(tmp_path / "empty-cache"))
    code, out = _up(tmp_path, "--components", "volcano", "--no-ledger")
    assert code == 1, out
    assert "Volcano is not built: run `make oracles`" in out
    code, out = _up(tmp_path, "--components", "volcano", f"--volcano-bin-dir={tmp_path}")
    assert code == 1, out
    assert "is not a built Volcano (no vc-controller-manager, vc-scheduler, crds/)" in out
    assert "make oracles" in out


def test_cluster_up_takes_the_sandbox_dashboard_and_component_flags() -> None:
    """One interface: the flags of the shared declarations read the same in both commands (the
    scheduler conf's help names each command's default)."""
    from batch.cli.cluster import up as cluster_up
    from batch.cli.sandbox import up as sandbox_up

    def flags(command: Any) -> dict[str, tuple[Any, ...]]:
        return {
            opt: (p.help, p.default, p.is_flag)
            for p in command.params
            if isinstance(p, click.Option)
            for opt in p.opts
        }

    shared = {
        "--no-dashboard",
        "--dashboard-port",
        "--scheduler-conf",
        "--schedule-period",
        "--db",
        "--no-ledger",
    }
    ours, sandbox = flags(cluster_up), flags(sandbox_up)
    for name in shared - {"--scheduler-conf"}:
        assert ours[name] == sandbox[name], name
    assert "--scheduler-conf" in ours and "--scheduler-conf" in sandbox
