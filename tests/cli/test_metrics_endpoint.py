"""`tephra sandbox up` serves `/metrics` of its scheduler and controllers, with the process and
Python collectors and without `*_created` series; `tephra_is_leader` is 1 for a scheduler that
runs without leader election (it is the only one). Issue 15, item 11."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from batch.api.errors import UserError
from batch.cli.main import main
from batch.cli.metrics import parse_bind_address

TEPHRA = [sys.executable, "-m", "batch.cli.main"]


def _scrape(url: str, deadline: float) -> str:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                text: str = resp.read().decode()
                if "volcano_e2e_scheduling_latency_milliseconds_count" in text:
                    return text
        except OSError:
            pass
        assert time.monotonic() < deadline, "no /metrics"
        time.sleep(0.2)


def _metrics_line(proc: subprocess.Popen[str]) -> str:
    """The URL `sandbox up` prints for its metrics (stderr, after "sandbox ready at")."""
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("metrics: "):
            return line.removeprefix("metrics: ").strip()
    raise AssertionError(f"no metrics line; exit {proc.wait()}")


def test_sandbox_up_serves_scheduler_and_controller_metrics(tmp_path: Path) -> None:
    """By default on a free port (8080 is often taken), which it prints."""
    kubeconfig = tmp_path / "kc"
    proc = subprocess.Popen(
        [
            *TEPHRA,
            "sandbox",
            "up",
            "--kubeconfig",
            str(kubeconfig),
            "--no-ledger",
            "--schedule-period",
            "0.2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        url = _metrics_line(proc)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        assert not url.startswith("http://127.0.0.1:0/")
        text = _scrape(url, deadline)
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    names = {line.split("{")[0].split()[0] for line in text.splitlines() if line[:1].isalpha()}
    assert "volcano_e2e_scheduling_latency_milliseconds_bucket" in names  # the scheduler's
    assert "volcano_controller_job_to_pod_creation_latency_milliseconds_bucket" in names
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total", "python_info"} <= names
    assert "python_gc_collections_total" in names
    assert not [n for n in names if n.endswith("_created")]
    assert "tephra_is_leader 1.0" in text


def test_bind_addresses() -> None:
    assert parse_bind_address("127.0.0.1:9090") == ("127.0.0.1", 9090)
    assert parse_bind_address(":8080") == ("0.0.0.0", 8080)
    assert parse_bind_address("[::1]:8080") == ("::1", 8080)
    assert parse_bind_address("0") is None
    for bad in ("8080x", "host", "h:99999"):
        with pytest.raises(UserError, match="--metrics-bind-address"):
            parse_bind_address(bad)


@pytest.mark.parametrize("command", ["sandbox", "controller", "scheduler"])
def test_a_bad_bind_address_is_one_line(tmp_path: Path, command: str) -> None:
    args = {
        "sandbox": ["sandbox", "up", "--kubeconfig", str(tmp_path / "kc")],
        "controller": ["controller"],
        "scheduler": ["scheduler"],
    }[command]
    result = CliRunner().invoke(main, [*args, "--metrics-bind-address", "nowhere"])
    assert result.exit_code in (1, 2), result.output
    assert result.stderr.strip().count("\n") == 0 and "--metrics-bind-address" in result.stderr


def test_one_ledger_family_for_every_component_and_their_health() -> None:
    """`sandbox up` serves the controllers' and the scheduler's registries together: each has
    `tephra_ledger_up`, which must come out as one family (Prometheus refuses a name twice)."""
    import datetime as dt
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry, generate_latest

    from batch.cli.metrics import component_health, exposition_registry
    from batch.ledger.health import LedgerCollector, LedgerHealth

    spill = Path("/tmp/spill.jsonl")
    down = LedgerHealth(
        up=False,
        url="postgresql+psycopg://u@db/tephra",
        spill_path=spill,
        reason="connection refused",
        since=dt.datetime(2026, 12, 6, tzinfo=dt.UTC),
    )
    up = LedgerHealth(up=True, url="sqlite:///l.db", spill_path=spill)
    controllers = SimpleNamespace(name="controllers", recorder=SimpleNamespace(health=lambda: down))
    ledger = SimpleNamespace(recorder=SimpleNamespace(health=lambda: up))
    scheduler = SimpleNamespace(name="scheduler", service=SimpleNamespace(ledger=ledger))
    registries = []
    for component, source in ((controllers, controllers.recorder), (scheduler, ledger.recorder)):
        registry = CollectorRegistry()
        registry.register(LedgerCollector(source, component.name))
        registries.append(registry)
    text = generate_latest(exposition_registry(lambda: registries)).decode()
    assert text.count("# TYPE tephra_ledger_up gauge") == 1
    assert 'tephra_ledger_up{component="controllers"} 0.0' in text
    assert 'tephra_ledger_up{component="scheduler"} 1.0' in text
    assert component_health([controllers, scheduler, SimpleNamespace(name="api")]) == [
        "controllers: ledger down since 2026-12-06T00:00:00+00:00"
        " (postgresql+psycopg://u@db/tephra: connection refused); recording to /tmp/spill.jsonl",
        "scheduler: ledger up (sqlite:///l.db)",
    ]
