"""Chaos: the controller and the scheduler SIGKILLed mid-gang and restarted, several times.

Gangs queue for a cluster that holds two at a time, so kills land while PodGroups are being
admitted, pods created and gangs bound. After each round the invariants hold: no double bind,
no node over-committed (counted on every bind); once the kills stop, every job Completed, no
gang partly bound and no orphan. Reuses the process harnesses of the controller and scheduler
reliability tests.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.controllers.test_reliability import Controller
from tests.kube.test_reliability import _scheduler_process
from tests.waiting import wait_for

from .conftest import B, vcjob
from .invariants import Watchdog

pytestmark = pytest.mark.xdist_group("chaos")

JOBS = 6
ROUNDS = 2


class Scheduler:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def start(self) -> None:
        self.proc = _scheduler_process(self.kubeconfig)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            self.kills += 1

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def sb() -> Iterator[SandboxHandle]:
    with run_sandbox(nodes=make_nodes(count=2, cpu="4", memory="16Gi"), max_grace_seconds=0.2) as h:
        yield h


def _phases(co: Any) -> dict[str, str]:
    items = co.list_namespaced_custom_object(*B, "default", "jobs")["items"]
    return {
        j["metadata"]["name"]: ((j.get("status") or {}).get("state") or {}).get("phase", "")
        for j in items
    }


@pytest.mark.slow
def test_controller_and_scheduler_killed_mid_gang(sb: SandboxHandle, tmp_path: Path) -> None:
    dog = Watchdog(sb)
    co = client.CustomObjectsApi(sb.api_client())
    ctl = Controller(sb.kubeconfig_path, tmp_path / "controller.log")
    sched = Scheduler(sb.kubeconfig_path)
    rng = random.Random(30)
    open_at_kill: list[int] = []  # jobs not yet Completed when each round's kills landed
    ctl.start()
    sched.start()
    try:
        # 3 x 1 cpu each on 2 x 4 cpu: two gangs at a time, each running 3 s, so gangs are
        # still open when both rounds of kills land (0.3 s runs finished before the second)
        for i in range(JOBS):
            co.create_namespaced_custom_object(
                *B, "default", "jobs", vcjob(f"g{i}", cpu="1", run=3.0)
            )
        for _ in range(ROUNDS):
            ctl.wait_ready(timeout=60)
            time.sleep(rng.uniform(0.3, 1.5))
            first, second = rng.sample([ctl, sched], 2)
            first.kill()
            open_at_kill.append(sum(p != "Completed" for p in _phases(co).values()))
            time.sleep(rng.uniform(0.0, 0.5))
            second.kill()
            counts = dog.counts
            assert counts.double_binds == 0 and counts.over_commits == 0, counts.details
            sched.start()
            ctl.start()
        wait_for(
            lambda: set(_phases(co).values()) == {"Completed"},
            "every job Completed",
            timeout=150,
            explain=lambda: _phases(co),
        )
        counts = wait_for(
            lambda: c if (c := dog.snapshot()).orphan_pods + c.orphan_podgroups == 0 else None,
            "no orphans",
            timeout=30,
        )
    finally:
        sched.stop()
        ctl.stop()
    print(
        f"kills: controller {ctl.kills}, scheduler {sched.kills}; {JOBS} gangs, open at the "
        f"kills {open_at_kill}; {counts.report()}"
    )
    assert all(open_at_kill), "a round's kills landed after every gang was done"
    assert ctl.kills == ROUNDS and sched.kills == ROUNDS
    assert counts.double_binds == 0 and counts.over_commits == 0, counts.details
    assert counts.partial_gangs == 0 and counts.unfinished_jobs == 0, counts.details
    assert counts.binds >= 3 * JOBS
