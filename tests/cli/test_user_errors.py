"""Every error a user can cause on the command line is one line on stderr, exit status 1 or 2.

Each command is run with bad input: a missing file, a directory, broken YAML, bytes that are not
UTF-8, an unreachable cluster, a job or queue that does not exist. None may end in a traceback
or a message spread over several lines (PyYAML's errors are, unless summarised). Commands that
serve (scheduler, controllers, sandbox) run as processes, the others through click in-process.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from batch.cli.main import main
from batch.sandbox.testing import SandboxHandle, run_sandbox

UNREACHABLE = """\
apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: u, user: {}}]
"""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad-input")
    (root / "bad.yaml").write_text("a: [1\n")
    (root / "bin.yaml").write_bytes(b"\xff\xfe\x00 not text")
    (root / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    (root / "unreachable.kubeconfig").write_text(UNREACHABLE)
    (root / "empty-dir").mkdir()
    return root


@pytest.fixture(scope="module")
def cluster() -> Iterator[SandboxHandle]:
    with run_sandbox() as sb:
        yield sb


def _assert_one_line_error(code: int, err: str, expect: str) -> None:
    assert "Traceback" not in err, err
    assert code in (1, 2), (code, err)
    continued = [line for line in err.splitlines() if line[:1].isspace()]
    assert not continued, err  # a message spread over several lines
    assert expect in err, err


OFFLINE = [
    (["gang", "missing.yaml"], "missing.yaml"),
    (["gang", "empty-dir"], "empty-dir"),
    (["gang", "bad.yaml"], "bad.yaml"),
    (["gang", "bin.yaml"], "bin.yaml"),
    (["validate", "missing.yaml"], "missing.yaml"),
    (["validate", "empty-dir"], "empty-dir"),
    (["validate", "bad.yaml"], "bad.yaml"),
    (["validate", "bin.yaml"], "bin.yaml"),
    (["validate", "--queues", "bad.yaml", "cm.yaml"], "bad.yaml"),
    (["job", "run", "--kubeconfig", "unreachable.kubeconfig", "-f", "missing.yaml"], "missing"),
    (["job", "run", "--kubeconfig", "unreachable.kubeconfig", "-f", "empty-dir"], "empty-dir"),
    (["job", "run", "--kubeconfig", "unreachable.kubeconfig", "-f", "bad.yaml"], "bad.yaml"),
    (["job", "run", "--kubeconfig", "unreachable.kubeconfig", "-f", "bin.yaml"], "bin.yaml"),
    (["job", "run", "--kubeconfig", "unreachable.kubeconfig", "-f", "cm.yaml"], "cm.yaml"),
    (["job", "list", "--kubeconfig", "unreachable.kubeconfig"], "127.0.0.1:9"),
    (["job", "list", "--kubeconfig", "bad.yaml"], "bad.yaml"),
    (["job", "list", "--kubeconfig", "bin.yaml"], "bin.yaml"),
    (["job", "list", "--kubeconfig", "missing.yaml"], "missing.yaml"),
    (["queue", "list", "--kubeconfig", "bad.yaml"], "bad.yaml"),
    (["pod", "list", "--kubeconfig", "unreachable.kubeconfig"], "127.0.0.1:9"),
    (["pod", "list", "--kubeconfig", "bad.yaml"], "bad.yaml"),
    (["version", "--kubeconfig", "missing.yaml"], "missing.yaml"),
    (["sim", "--trace", "philly", "--out", "out", "--cluster", "bad.yaml"], "bad.yaml"),
    (["sim", "--trace", "philly", "--out", "out", "--cluster", "bin.yaml"], "bin.yaml"),
    (["sim", "--trace", "philly", "--out", "out", "--scheduler-conf", "bin.yaml"], "bin.yaml"),
    (["sim", "--format", "ledger", "--db", "bogus://x", "--out", "out"], "bogus"),
    (["sim", "--trace", "missing.csv", "--out", "out"], "missing.csv"),
    (["whatif", "--db", "bogus://x", "--set", "queue=q", "--cluster", "cm.yaml"], "cm.yaml"),
    (["whatif", "--db", "bogus://x", "--set", "queue=q", "--cluster", "bin.yaml"], "bin.yaml"),
    (["whatif", "--db", "bogus://x", "--set", "queue=q", "--cluster", "bad.yaml"], "bad.yaml"),
    (["report", "wait-times", "--db", "bogus://x"], "bogus"),
    (["db", "upgrade", "--db", "bogus://x"], "bogus"),
    (["crds", "--out", "bad.yaml"], "bad.yaml"),
]


@pytest.mark.parametrize(("args", "expect"), OFFLINE, ids=[" ".join(a) for a, _ in OFFLINE])
def test_offline_and_client_commands(
    inputs: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], expect: str
) -> None:
    monkeypatch.chdir(inputs)
    result = CliRunner().invoke(main, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    _assert_one_line_error(result.exit_code, result.stderr, expect)


UNKNOWN = [
    (["job", "view", "-N", "nope"], "nope"),
    (["job", "why", "nope"], "nope"),
    (["job", "suspend", "-N", "nope"], "nope"),
    (["job", "resume", "-N", "nope"], "nope"),
    (["job", "delete", "-N", "nope"], "nope"),
    (["queue", "get", "-n", "nope"], "nope"),
    (["queue", "delete", "-n", "nope"], "nope"),
    (["queue", "operate", "-n", "nope", "-a", "close"], "nope"),
    (["queue", "create", "-n", "q-weird", "-S", "Weird"], "Weird"),
    (["job", "run", "-N", "j", "-R", "cpu"], "cpu"),
]


@pytest.mark.parametrize(("args", "expect"), UNKNOWN, ids=[" ".join(a) for a, _ in UNKNOWN])
def test_commands_about_objects_that_do_not_exist(
    cluster: SandboxHandle, args: list[str], expect: str
) -> None:
    group, command, *rest = args
    kubeconfig = ["--kubeconfig", str(cluster.kubeconfig_path)]
    result = CliRunner().invoke(main, [group, command, *kubeconfig, *rest])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    _assert_one_line_error(result.exit_code, result.stderr, expect)


SERVING = [
    (["scheduler", "--kubeconfig", "bad.yaml"], "bad.yaml"),
    (["scheduler", "--kubeconfig", "bin.yaml"], "bin.yaml"),
    (
        ["scheduler", "--kubeconfig", "unreachable.kubeconfig", "--scheduler-conf", "bad.yaml"],
        "bad.yaml",
    ),
    (
        ["scheduler", "--kubeconfig", "unreachable.kubeconfig", "--scheduler-conf", "bin.yaml"],
        "bin.yaml",
    ),
    (["controller", "--kubeconfig", "bad.yaml"], "bad.yaml"),
    (["controller", "--kubeconfig", "bin.yaml"], "bin.yaml"),
    (["controller", "--kubeconfig", "cm.yaml"], "cm.yaml"),
    (["sandbox", "up", "--kubeconfig", "out.kubeconfig", "--nodes", "bad.yaml"], "bad.yaml"),
    (["sandbox", "up", "--kubeconfig", "out.kubeconfig", "--nodes", "bin.yaml"], "bin.yaml"),
    (
        ["sandbox", "up", "--kubeconfig", "out.kubeconfig", "--scheduler-conf", "bad.yaml"],
        "bad.yaml",
    ),
    (["sandbox", "up", "--kubeconfig", "out.kubeconfig", "--db", "bogus://x"], "bogus"),
]


@pytest.mark.parametrize(("args", "expect"), SERVING, ids=[" ".join(a) for a, _ in SERVING])
def test_serving_commands_refuse_bad_input_before_serving(
    inputs: Path, args: list[str], expect: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "batch.cli.main", *args],
        check=False,
        cwd=inputs,
        capture_output=True,
        text=True,
        timeout=60,
    )
    _assert_one_line_error(proc.returncode, proc.stderr, expect)
