"""Everyday commands import no heavy library (issue 31, item 1): the import graph, not the clock.

`tephra job list` cost about a second of CPU, nearly all of it importing the official
kubernetes client's generated API modules and models; SQLAlchemy, numpy, kopf, aiohttp and
pydantic would cost more again. Each command below runs in a fresh interpreter against a
sandbox and reports the modules it ended with; none of the heavy ones may be among them. The
CPU figures themselves are printed by benchmarks/cli_startup.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from batch.cli.main import main
from batch.sandbox.testing import SandboxHandle, run_sandbox

#: what an everyday command must not import (prefixes of module names)
HEAVY = (
    "kubernetes",
    "sqlalchemy",
    "numpy",
    "kopf",
    "aiohttp",
    "pydantic",
    "batch.scheduler",
    "batch.ledger",
)

COMMANDS = [
    ["version", "--client"],
    ["version"],
    ["job", "list"],
    ["job", "list", "--all-namespaces", "-o", "wide"],
    ["job", "view", "-N", "bench"],
    ["job", "why", "bench"],
    ["job", "suspend", "-N", "bench"],
    ["queue", "list"],
    ["queue", "get", "-n", "default", "-o", "json"],
    ["pod", "list", "--all-namespaces"],
    ["job", "view", "bench", "-o", "yaml"],
    ["job", "list", "-A", "-o", "name"],
    ["queue", "get", "default"],
    ["queue", "list", "-w", "--request-timeout", "1"],
    ["--help"],
]

_PROBE = """\
import atexit, json, sys
def _report():
    with open(sys.argv[1], "w") as out:
        json.dump(sorted(sys.modules), out)
atexit.register(_report)
from batch.cli.main import main
main(sys.argv[2:], prog_name="tephra")
"""

_JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: bench}
spec:
  minAvailable: 1
  tasks:
  - {name: w, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    job = tmp_path_factory.mktemp("startup") / "job.yaml"
    job.write_text(_JOB)
    with run_sandbox() as sb:
        args = ["job", "run", "-f", str(job), "--kubeconfig", str(sb.kubeconfig_path)]
        created = CliRunner().invoke(main, args)
        assert created.exit_code == 0, created.output
        yield sb


def modules_after(argv: list[str], kubeconfig: Path, out: Path) -> tuple[list[str], str]:
    """The modules `tephra ARGV` had imported when it exited, and what it printed."""
    args = [*argv] if argv == ["--help"] else [*argv, "--kubeconfig", str(kubeconfig)]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(out.read_text())
    return loaded, done.stdout


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_everyday_commands_import_no_heavy_module(
    cluster: SandboxHandle, tmp_path: Path, argv: list[str]
) -> None:
    loaded, printed = modules_after(argv, cluster.kubeconfig_path, tmp_path / "modules.json")
    assert printed.strip()  # the command did its work
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
    assert heavy == [], f"tephra {' '.join(argv)} imported {heavy[:8]}"


#: help needs no cluster and no ledger: nothing heavy, not even SQLAlchemy for `report`
HELP_PAGES = [
    ["report", "--help"],
    ["report", "wait-times", "--help"],
    ["report", "usage", "--help"],
    ["db", "--help"],
]


@pytest.mark.parametrize("argv", HELP_PAGES, ids=" ".join)
def test_help_pages_import_no_heavy_module(tmp_path: Path, argv: list[str]) -> None:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout
    loaded: list[str] = json.loads(out.read_text())
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
    assert heavy == [], f"tephra {' '.join(argv)} imported {heavy[:8]}"


#: a ledger report needs SQLAlchemy's Core, and nothing else heavy: not its ORM (the ledger's
#: models, which the recorder writes through), no recorder, no PostgreSQL dialect or driver for
#: a SQLite ledger, no Kubernetes client
REPORT_HEAVY = ("kubernetes", "kopf", "aiohttp", "numpy", "pydantic", "psycopg", "alembic")
REPORT_HEAVY_MODULES = (
    "sqlalchemy.orm",
    "sqlalchemy.dialects.postgresql",
    "batch.ledger.models",
    "batch.ledger.rollups",
    "batch.ledger.recorder",
)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('ledger') / 'ledger.db'}"
    upgraded = CliRunner().invoke(main, ["db", "upgrade", "--db", url])
    assert upgraded.exit_code == 0, upgraded.output
    return url


@pytest.mark.parametrize(
    "argv",
    [
        ["wait-times"],
        ["usage"],
        ["preemptions"],
        ["outcomes"],
        ["fairness"],
        ["usage", "-o", "csv"],
    ],
    ids=" ".join,
)
def test_a_report_imports_only_what_its_queries_need(
    ledger: str, tmp_path: Path, argv: list[str]
) -> None:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), "report", *argv, "--db", ledger],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    loaded = json.loads(out.read_text())
    heavy = sorted(
        m
        for m in loaded
        if m.split(".")[0] in REPORT_HEAVY
        or any(m == h or m.startswith(h + ".") for h in REPORT_HEAVY_MODULES)
    )
    assert heavy == [], heavy[:8]
