"""Contract: `tephra sandbox up` writes the kubeconfig when ready and stops cleanly on signals;
`tephra sandbox nodes` prints usable Node manifests."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml
from click.testing import CliRunner

from batch.cli.main import main

from .helpers import http

TEPHRA = [sys.executable, "-m", "batch.cli.main"]


def test_nodes_command() -> None:
    result = CliRunner().invoke(
        main, ["sandbox", "nodes", "--gpus", "8", "--count", "4", "--topology", "racks=2"]
    )
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.output))
    assert [d["metadata"]["name"] for d in docs] == ["node-0", "node-1", "node-2", "node-3"]
    assert all(d["status"]["capacity"]["nvidia.com/gpu"] == "8" for d in docs)
    racks = [d["metadata"]["labels"]["topology.tephra.io/rack"] for d in docs]
    assert racks == ["rack-0", "rack-1", "rack-0", "rack-1"]
    assert docs[2]["metadata"]["labels"]["kubernetes.io/hostname"] == "node-2"
    bad = CliRunner().invoke(main, ["sandbox", "nodes", "--topology", "racks=x"])
    assert bad.exit_code != 0 and "racks must be an integer" in bad.output
    assert "Traceback" not in bad.output


def _up(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        CliRunner().invoke(main, ["sandbox", "nodes", "--gpus", "8", "--count", "2"]).output
    )
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [*TEPHRA, "sandbox", "up", "--kubeconfig", str(kubeconfig), "--nodes", str(nodes), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30  # liveness only: a start-up that hangs
    while not kubeconfig.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "kubeconfig never appeared"
        time.sleep(0.05)
    return proc, kubeconfig


def test_up_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc, kubeconfig = _up(tmp_path)
    try:
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        code, body = http(server, "GET", "/api/v1/nodes")
        assert code == 200 and len(body["items"]) == 2
        code, queues = http(server, "GET", "/apis/scheduling.volcano.sh/v1beta1/queues")
        assert {q["metadata"]["name"] for q in queues["items"]} >= {"root", "default"}
        # how fast it starts is a figure, not a test: benchmarks/sandbox_startup.py
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "sandbox ready at" in err
    assert not kubeconfig.exists()


def test_up_stops_on_sigint(tmp_path: Path) -> None:
    proc, _kubeconfig = _up(tmp_path, "--port", "0")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=20)
    assert proc.returncode == 0


def _refused(tmp_path: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.run(
        [*TEPHRA, "sandbox", "up", "--kubeconfig", str(tmp_path / "kc"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert not (tmp_path / "kc").exists()
    return proc.returncode, proc.stderr


def test_up_refuses_bad_options_before_anything_starts(tmp_path: Path) -> None:
    """Issue 19.4: an unknown scheduler action printed a traceback after the controllers had
    started; `--port -5` failed in bind() after the emulator had. One line, exit 2, at once."""
    conf = tmp_path / "bad.conf"
    conf.write_text('actions: "enqueue, bogus"\ntiers: []\n')
    cases = [
        (["--scheduler-conf", str(conf)], "unknown action 'bogus'"),
        (["--port", "-5"], "--port"),
        (["--schedule-period", "nan"], "--schedule-period"),
        (["--heartbeat-seconds", "0"], "--heartbeat-seconds"),
        (["--fail-rate", "1.5"], "--fail-rate"),
        (["--host", "0.0.0.0"], "--insecure-listen-anywhere"),
        (["--db", "bogus://x"], "bogus"),
    ]
    for args, needle in cases:
        code, err = _refused(tmp_path, *args)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2, (args, err)
        assert len(lines) == 1 and needle in lines[0], (args, err)
        assert "Traceback" not in err, (args, err)


def test_up_anywhere_needs_the_flag_and_warns(tmp_path: Path) -> None:
    proc, kubeconfig = _up(
        tmp_path, "--host", "0.0.0.0", "--insecure-listen-anywhere", "--no-components"
    )
    try:
        url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert http(url, "GET", "/api/v1/namespaces")[0] == 200  # its own address is answered
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert "warning: listening on 0.0.0.0 without authentication" in err


def test_up_reports_a_port_in_use_and_writes_no_kubeconfig(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        code, err = _refused(tmp_path, "--port", port, "--no-components")
    assert code == 1, err
    [line] = err.splitlines()  # one line: nothing the half-started sandbox left behind
    assert line.startswith("Error: sandbox: ") and "address already in use" in line, err


def _dashboard_line(proc: subprocess.Popen[str]) -> str:
    """The URL `sandbox up` prints for its dashboard (stderr, after the sandbox's and metrics')."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("dashboard: "):
            return line.removeprefix("dashboard: ").strip()
    raise AssertionError(f"no dashboard line in {seen}; exit {proc.wait()}")


def test_up_serves_the_dashboard_and_prints_its_url(tmp_path: Path) -> None:
    import json
    import urllib.request

    proc, _kubeconfig = _up(tmp_path, "--no-ledger")
    try:
        url = _dashboard_line(proc)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        assert not url.startswith("http://127.0.0.1:0/")  # a free port, said as such
        # the page waits (up to 30 s) for the dashboard's first lists of the sandbox
        with urllib.request.urlopen(url + "api/overview", timeout=60) as resp:
            assert json.loads(resp.read())["nodes"] == 2
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_up_without_the_dashboard(tmp_path: Path) -> None:
    proc, _kubeconfig = _up(tmp_path, "--no-ledger", "--no-dashboard")
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "sandbox ready at" in err and "dashboard:" not in err, err
