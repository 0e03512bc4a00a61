"""`tephra webhook` as a process: self-signed TLS, healthz, clean exit on SIGTERM."""

from __future__ import annotations

import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_webhook_process_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "batch.cli.main",
            "webhook",
            "--self-signed",
            "--port",
            "0",
            "--host",
            "127.0.0.1",
            "--assume-queues",
            "--cert-dir",
            str(tmp_path),
        ],
        cwd=REPO,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        port = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and port is None:
            line = proc.stderr.readline()
            m = re.search(r"listening on https://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
        assert port, "webhook did not start"
        ctx = ssl.create_default_context(cafile=str(tmp_path / "tls.crt"))
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/healthz", context=ctx, timeout=10
        ) as r:
            assert r.read() == b"ok"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_webhook_without_certificates_is_a_usage_error() -> None:
    from click.testing import CliRunner

    from batch.cli.main import main

    res = CliRunner().invoke(main, ["webhook", "--port", "0"])
    assert res.exit_code == 2
    assert "--cert-file" in res.output
