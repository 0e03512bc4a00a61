"""batch.sandbox.real_components without a control plane: how Volcano's processes are started."""

from __future__ import annotations

import shlex
from pathlib import Path

from batch.sandbox.real_components import VOLCANO_READY, volcano_components


def _fake(path: Path, script: str) -> None:
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


def _conf_arg(log: Path) -> Path:
    argv = shlex.split(log.read_text().splitlines()[0])
    return Path(argv[argv.index("--scheduler-conf") + 1])


def test_a_conf_beside_the_logs_gets_a_directory_of_its_own(tmp_path: Path) -> None:
    """vc-scheduler reloads its conf on any write in the conf's directory: beside its log, each
    line it logs would make it reload and log again."""
    bins, logs = tmp_path / "bin", tmp_path / "logs"
    bins.mkdir()
    _fake(bins / "vc-controller-manager", "sleep 30")
    _fake(bins / "vc-scheduler", f'echo "$@"; echo "{VOLCANO_READY}"; sleep 30')
    logs.mkdir()
    conf = logs / "scheduler.conf"
    conf.write_text('actions: "allocate"\n')
    with volcano_components(bins, tmp_path / "kubeconfig", logs, conf, timeout=10):
        used = _conf_arg(logs / "vc-scheduler.log")
    assert used.parent != logs
    assert used.read_text() == conf.read_text()


def test_a_conf_elsewhere_is_used_where_it_is(tmp_path: Path) -> None:
    bins, logs = tmp_path / "bin", tmp_path / "logs"
    bins.mkdir()
    _fake(bins / "vc-controller-manager", "sleep 30")
    _fake(bins / "vc-scheduler", f'echo "$@"; echo "{VOLCANO_READY}"; sleep 30')
    conf = tmp_path / "scheduler.conf"
    conf.write_text('actions: "allocate"\n')
    with volcano_components(bins, tmp_path / "kubeconfig", logs, conf, timeout=10):
        assert _conf_arg(logs / "vc-scheduler.log") == conf
