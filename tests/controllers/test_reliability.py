"""Reliability: SIGKILL the controller process at random points of jobs' lives and restart it.

Checks: no pod is created twice (distinct pod uids per job == what the job's life needs), no
transition is lost or repeated (conditions and retryCount exact), and every job ends in the
phase it would have reached without the kills.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("batch.sandbox.testing")

from kubernetes import client

from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .minisched import MiniScheduler
from .test_integration import B, vcjob

pytestmark = pytest.mark.xdist_group("controllers-reliability")

REPO = Path(__file__).resolve().parents[2]


class Controller:
    def __init__(self, kubeconfig: Path, log: Path) -> None:
        self.kubeconfig = kubeconfig
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def start(self) -> None:
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "batch.cli.main",
                "controller",
                "--kubeconfig",
                str(self.kubeconfig),
                "--metrics-port",
                "0",
            ],
            cwd=REPO,
            stdout=out,
            stderr=out,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until this incarnation printed "controllers ready" (one line per start)."""
        want = self.kills + 1 if self.proc is not None else 0
        wait_for(
            lambda: (
                self.log.exists()
                and self.log.read_text(errors="replace").count("controllers ready") >= want
            ),
            timeout=timeout,
            what="controller ready",
        )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.kills += 1

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class PodLedger:
    """Every (job, pod name, uid) ever seen, by polling."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.seen: dict[str, set[tuple[str, str]]] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for p in self.core.list_namespaced_pod("default").items:
                    job = (p.metadata.labels or {}).get("volcano.sh/job-name")
                    if job:
                        self.seen.setdefault(job, set()).add((p.metadata.name, p.metadata.uid))
            except Exception:
                pass
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(5)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Any, Controller, MiniScheduler]]:
    nodes = make_nodes(count=2, cpu="64")
    with run_sandbox(nodes=nodes, max_grace_seconds=0.3) as sb:
        ctl = Controller(sb.kubeconfig_path, tmp_path / "controller.log")
        sched = MiniScheduler(sb.api_client(), nodes=[n["metadata"]["name"] for n in nodes]).start()
        try:
            yield sb, ctl, sched
        finally:
            sched.stop()
            ctl.stop()


def _phase(co: Any, name: str) -> str:
    j = co.get_namespaced_custom_object(*B, "default", "jobs", name)
    return ((j.get("status") or {}).get("state") or {}).get("phase", "")


@pytest.mark.slow
def test_sigkill_and_restart_controller_mid_job(
    cluster: tuple[Any, Controller, MiniScheduler],
) -> None:
    sb, ctl, _sched = cluster
    api = sb.api_client()
    co = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    ledger = PodLedger(core)
    rng = random.Random(7)
    ctl.start()
    co.create_namespaced_custom_object(*B, "default", "jobs", vcjob("steady", replicas=4, run=3.0))
    co.create_namespaced_custom_object(
        *B,
        "default",
        "jobs",
        vcjob(
            "retrying",
            replicas=2,
            run=0.6,
            exit_code=1,
            maxRetry=3,
            policies=[{"event": "PodFailed", "action": "RestartJob"}],
        ),
    )
    suspended = vcjob("suspended", replicas=2)
    suspended["spec"]["tasks"][0]["template"]["metadata"]["annotations"] = {}
    co.create_namespaced_custom_object(*B, "default", "jobs", suspended)
    deadline = time.monotonic() + 90
    aborted_sent = False
    try:
        while time.monotonic() < deadline and ctl.kills < 8:
            ctl.wait_ready()
            time.sleep(rng.uniform(0.2, 1.5))
            ctl.kill()
            if not aborted_sent and _phase(co, "suspended") == "Running":
                j = co.get_namespaced_custom_object(*B, "default", "jobs", "suspended")
                ref = {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": "suspended",
                    "uid": j["metadata"]["uid"],
                    "controller": True,
                }
                co.create_namespaced_custom_object(
                    "bus.volcano.sh",
                    "v1alpha1",
                    "default",
                    "commands",
                    {
                        "apiVersion": "bus.volcano.sh/v1alpha1",
                        "kind": "Command",
                        "metadata": {
                            "generateName": "suspended-abortjob-",
                            "ownerReferences": [ref],
                        },
                        "action": "AbortJob",
                        "target": ref,
                    },
                )
                aborted_sent = True
            ctl.start()
            done = {n: _phase(co, n) for n in ("steady", "retrying", "suspended")}
            if (
                done == {"steady": "Completed", "retrying": "Failed", "suspended": "Aborted"}
                and ctl.kills >= 4
            ):
                break
        wait_for(lambda: _phase(co, "steady") == "Completed", timeout=90, what="steady Completed")
        wait_for(lambda: _phase(co, "retrying") == "Failed", timeout=90, what="retrying Failed")
        wait_for(lambda: _phase(co, "suspended") == "Aborted", timeout=90, what="suspended Aborted")
    finally:
        ledger.stop()
        log = ctl.log.read_text(errors="replace") if ctl.log.exists() else ""
    assert ctl.kills >= 4, f"only {ctl.kills} kills happened"

    steady = co.get_namespaced_custom_object(*B, "default", "jobs", "steady")
    assert [x["status"] for x in steady["status"]["conditions"]] == [
        "Pending",
        "Running",
        "Completed",
    ]
    assert steady["status"]["retryCount"] == 0
    assert steady["status"]["succeeded"] == 4
    assert len(ledger.seen["steady"]) == 4, ledger.seen["steady"]  # no pod created twice

    retrying = co.get_namespaced_custom_object(*B, "default", "jobs", "retrying")
    assert retrying["status"]["retryCount"] == 3, log[-3000:]
    # one incarnation of each pod per attempt: 2 pods x (1 + 3 restarts) at most
    assert len(ledger.seen["retrying"]) <= 2 * 4

    susp = co.get_namespaced_custom_object(*B, "default", "jobs", "suspended")
    assert susp["status"]["retryCount"] == 0
    assert len(ledger.seen["suspended"]) == 2
    assert (
        co.list_namespaced_custom_object("bus.volcano.sh", "v1alpha1", "default", "commands")[
            "items"
        ]
        == []
    )
