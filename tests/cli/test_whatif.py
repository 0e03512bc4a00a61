"""`tephra whatif` as the README shows it: the example runs as written, says what it leaves out
of the replay and why, and a queue named in `--set` that the ledger does not know is added."""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from batch.cli.main import main
from batch.ledger.models import Job
from tests.ledger.helpers import ledger_job, ledger_pod, queue_configs, write_ledger

README = Path(__file__).resolve().parents[2] / "README.md"
NODES = "".join(
    f"---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{i}}}\n"
    "status: {allocatable: {cpu: '32', memory: 256Gi, nvidia.com/gpu: '4', pods: '110'}}\n"
    for i in range(2)
)


def readme_whatif() -> list[str]:
    """The `tephra whatif` command of README.md's sh block, continuation lines joined."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    for block in blocks:
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            if line.startswith("tephra whatif "):
                return shlex.split(line)[1:]
    raise AssertionError("README.md has no sh block with a tephra whatif command")


def _job(uid: str, queue: str, submitted: dt.datetime, *, started: bool = True) -> Job:
    """A two-worker job of namespace ml that waited 20 s and ran 5 min (or never started)."""
    start = submitted + dt.timedelta(seconds=20) if started else None
    finished = start + dt.timedelta(seconds=300) if start else None
    return ledger_job(
        uid, queue, submitted, workers=2, started=start, finished=finished, namespace="ml"
    )


def fill_ledger(url: str) -> None:
    now = dt.datetime.now(dt.UTC)
    rows: list[object] = []
    for i in range(4):
        run = _job(
            f"run-{i}", "research" if i % 2 else "default", now - dt.timedelta(hours=3, minutes=-i)
        )
        rows += [run, ledger_pod(run, f"pod-{i}")]
    rows.append(_job("waiting", "research", now - dt.timedelta(hours=1), started=False))
    shapeless = _job("shapeless", "default", now - dt.timedelta(hours=2))
    shapeless.replicas = {}
    rows.append(shapeless)
    rows.append(_job("old", "research", now - dt.timedelta(days=30)))
    rows += queue_configs({"default": 1, "research": 1}, now - dt.timedelta(days=1))
    write_ledger(url, rows)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the README's files: the ledger of --db and the nodes of --cluster."""
    args = readme_whatif()
    db = args[args.index("--db") + 1]
    assert db.startswith("sqlite:///") and not db.startswith("sqlite:////"), (
        f"the README's --db {db} should be a relative SQLite path the test can create"
    )
    monkeypatch.chdir(tmp_path)
    (tmp_path / args[args.index("--cluster") + 1]).write_text(NODES)
    fill_ledger(db)
    return tmp_path


def test_the_readme_example_runs_as_written(workdir: Path) -> None:
    args = readme_whatif()
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "1->3" in rows["research"]
    assert "prod" in rows, result.stdout  # the queue of --set, new: it has no recorded jobs
    assert "new" in rows["prod"]
    out, err = result.stdout, result.stderr
    # what the replay assumed and left out is part of the answer, on stdout
    assert "1 never-started job replayed with run time = queue median (5m)" in out, out
    assert "left out 1 without pods or replicas (gang shape unknown)" in out, out
    assert "left out 1 submitted before the last 7d" in out, out
    assert "replaying 5 of 7 recorded jobs" in err, err
    assert "--set queue=prod: not in the ledger, added as a new queue" in err, err


def test_json_lists_the_new_queue(workdir: Path) -> None:
    result = CliRunner().invoke(main, [*readme_whatif(), "-o", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["queue"]: r for r in json.loads(result.stdout)["queues"]}
    assert rows["prod"]["new"] is True and rows["prod"]["jobs"] == 0
    assert rows["prod"]["weight_now"] is None and rows["prod"]["weight_proposed"] == 1
    assert rows["research"]["new"] is False and rows["research"]["jobs"] == 3  # one waiting


def test_output_flag_yaml_wide_and_the_old_json_flag(workdir: Path) -> None:
    import yaml

    as_yaml = CliRunner().invoke(main, [*readme_whatif(), "-o", "yaml"])
    assert as_yaml.exit_code == 0, as_yaml.output
    assert {r["queue"] for r in yaml.safe_load(as_yaml.stdout)["queues"]} == {
        "default",
        "research",
        "prod",
    }
    wide = CliRunner().invoke(main, [*readme_whatif(), "-o", "wide"])
    assert wide.exit_code == 0, wide.output
    limits = {line.split()[0]: line.split() for line in wide.stdout.splitlines() if line.strip()}
    assert limits["queue"] == ["queue", "capability", "guarantee", "reclaimable"]
    assert limits["prod"][1:] == ["new->nvidia.com/gpu=64", "new->-", "new->true"]
    assert limits["research"][1:] == ["-->-", "-->-", "true->true"]
    legacy = CliRunner().invoke(main, [*readme_whatif(), "--json"])
    assert legacy.exit_code == 0 and json.loads(legacy.stdout) == json.loads(
        CliRunner().invoke(main, [*readme_whatif(), "-o", "json"]).stdout
    )


def test_report_takes_the_same_output_flag(workdir: Path) -> None:
    import csv
    import io

    import yaml

    now = dt.datetime.now(dt.UTC).isoformat()  # the same "now" for each: waits are the same
    db = ["--db", "sqlite:///ledger.db", "--since", "7d", "--now", now]
    as_json = CliRunner().invoke(main, ["report", "wait-times", *db, "-o", "json"])
    assert as_json.exit_code == 0, as_json.output
    rows = {r["queue"]: r for r in json.loads(as_json.stdout)}
    assert rows["research"]["jobs"] == 3  # two run, one never started
    as_yaml = CliRunner().invoke(main, ["report", "wait-times", *db, "-o", "yaml"])
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)
    as_csv = CliRunner().invoke(main, ["report", "wait-times", *db, "--output", "csv"])
    assert [r["queue"] for r in csv.DictReader(io.StringIO(as_csv.stdout))] == list(rows)
    wide = CliRunner().invoke(main, ["report", "wait-times", *db, "-o", "wide"])
    assert wide.exit_code == 0 and "MEAN_WAIT_S" in wide.stdout
    legacy = CliRunner().invoke(main, ["report", "wait-times", *db, "--format", "json"])
    assert json.loads(legacy.stdout) == json.loads(as_json.stdout)
