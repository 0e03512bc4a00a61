"""Queue weights act at admission on the sandbox (issue 17.1): the real controllers and the
scheduler service (Tephra's default configuration) run two queues that submit the same backlog
of one-GPU VCJobs at once; while both still wait, the GPUs are shared in the weights' ratio.

Volcano's semantics admitted one queue's whole backlog first (the older, or by uid on a tie), so
raising a weight changed nothing until that backlog ran.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("batch.sandbox.testing")
pytest.importorskip("batch.kube.service")

from kubernetes import client

from batch.sandbox.components import default_components
from batch.sandbox.nodes import make_nodes
from batch.sandbox.options import SandboxOptions
from batch.sandbox.testing import run_sandbox
from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG
from tests.waiting import wait_for

pytestmark = pytest.mark.xdist_group("controllers-scheduler")

B = ("batch.volcano.sh", "v1alpha1")
Q = ("scheduling.volcano.sh", "v1beta1")
JOBS = 10  # per queue, on 4 GPUs: both queues keep a backlog for several waves
RUN_S = "1.5"
Queues = tuple[str, str]


def _queue(name: str, weight: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{Q[0]}/{Q[1]}",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "reclaimable": True},
    }


def _job(name: str, queue: str) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {
            "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
            "limits": {"nvidia.com/gpu": "1"},
        },
    }
    template = {
        "metadata": {"annotations": {"sandbox.tephra.io/run-seconds": RUN_S}},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    return {
        "apiVersion": f"{B[0]}/{B[1]}",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "minAvailable": 1,
            "schedulerName": "volcano",
            "queue": queue,
            "tasks": [{"name": "worker", "replicas": 1, "template": template}],
        },
    }


def _running_while_both_wait(co: Any, core: Any, queues: tuple[str, str]) -> dict[str, int]:
    """Sum over samples, taken while both queues have jobs not yet started, of each queue's
    running pods."""
    running = dict.fromkeys(queues, 0)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod("default").items
        started = dict.fromkeys(queues, 0)
        now = dict.fromkeys(queues, 0)
        for p in pods:
            q = (p.metadata.annotations or {}).get("scheduling.volcano.sh/queue-name", "")
            q = q or p.metadata.name.split("-")[0]
            if q not in queues:
                continue
            if p.spec.node_name:
                started[q] += 1
                if p.status.phase in ("Running", "Pending"):
                    now[q] += 1
        finished = _finished(co, queues)
        if any(started[q] + finished[q] >= JOBS for q in queues):
            break  # one queue's backlog is gone: the ratio no longer applies
        for q in queues:
            running[q] += now[q]
        time.sleep(0.1)
    return running


def _finished(co: Any, queues: tuple[str, str]) -> dict[str, int]:
    items = co.list_namespaced_custom_object(*B, "default", "jobs")["items"]
    out = dict.fromkeys(queues, 0)
    for j in items:
        phase = ((j.get("status") or {}).get("state") or {}).get("phase", "")
        q = j["spec"]["queue"]
        if q in out and phase == "Completed":
            out[q] += 1
    return out


@contextmanager
def _backlog(w1: int, w2: int, *, conf: Path | None = None) -> Iterator[tuple[Any, Any, Queues]]:
    """A sandbox whose two queues (weights ``w1``, ``w2``) each submitted JOBS jobs, interleaved,
    before its one 4-GPU node appeared; on exit, every job has Completed."""
    options = SandboxOptions(schedule_period=0.2, max_grace_seconds=0.3, scheduler_conf=conf)
    queues = (f"a{w1}{w2}", f"b{w1}{w2}")
    with run_sandbox(
        nodes=[], options=options, components=default_components(options), ready_timeout=120
    ) as sb:
        co: Any = client.CustomObjectsApi(sb.api_client())
        core: Any = client.CoreV1Api(sb.api_client())
        for q, w in zip(queues, (w1, w2), strict=True):
            co.create_cluster_custom_object(*Q, "queues", _queue(q, w))
        for i in range(JOBS):  # interleaved, so submission order favours neither queue
            for q in queues:
                co.create_namespaced_custom_object(*B, "default", "jobs", _job(f"{q}-{i}", q))
        wait_for(  # the whole backlog waits for a node, then it comes
            lambda: len(_podgroups(co)) == 2 * JOBS, what="every PodGroup created", timeout=60
        )
        core.create_node(make_nodes(count=1, gpus=4, cpu="16", memory="64Gi")[0])
        yield co, core, queues
        wait_for(
            lambda: sum(_finished(co, queues).values()) == 2 * JOBS,
            what="every job Completed",
            timeout=120,
            explain=lambda: _finished(co, queues),
        )


def _podgroups(co: Any) -> list[dict[str, Any]]:
    return list(co.list_namespaced_custom_object(*Q, "default", "podgroups")["items"])


def _shares(w1: int, w2: int) -> tuple[float, dict[str, int]]:
    """The first queue's part of the running pods while both wait, and the samples."""
    with _backlog(w1, w2) as (co, core, queues):
        running = _running_while_both_wait(co, core, queues)
        total = running[queues[0]] + running[queues[1]]
        assert total > 0, running
    return running[queues[0]] / total, running


def _first_wave(w1: int, w2: int, conf: Path) -> dict[str, int]:
    """Per queue, the PodGroups admitted (out of Pending) once the node's 4 GPUs are taken: the
    first enqueue sessions' work, before any job can finish and free budget (a job runs 1.5 s)."""
    with _backlog(w1, w2, conf=conf) as (co, _core, queues):
        wave: dict[str, int] = {}

        def admitted() -> bool:
            wave.clear()
            for pg in _podgroups(co):
                if (pg.get("status") or {}).get("phase", "Pending") != "Pending":
                    q = pg["spec"]["queue"]
                    wave[q] = wave.get(q, 0) + 1
            return sum(wave.values()) >= 4

        wait_for(admitted, what="the node's 4 GPUs admitted", timeout=60)
        assert set(wave) <= set(queues), wave
    return wave


@pytest.mark.parametrize(("w1", "w2"), [(1, 1), (3, 1), (1, 3)])
def test_same_backlog_shares_the_gpus_by_weight(w1: int, w2: int) -> None:
    share, running = _shares(w1, w2)
    assert share == pytest.approx(w1 / (w1 + w2), abs=0.12), running


def test_volcano_semantics_admit_one_queue_first(tmp_path: Path) -> None:
    """With ``fairShare`` off, a Pending PodGroup adds nothing to its queue's share,
    so the first enqueue session orders two empty queues by their tie-break alone and admits one
    queue's jobs until overcommit's budget is gone: the weights (1:3) play no part. (Later waves
    do follow allocated shares, so a sample of running pods over the whole backlog cannot tell
    the two semantics apart reliably.)"""
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(TEPHRA_DEFAULT_CONFIG.replace("fairShare: true", "fairShare: false"))
    wave = _first_wave(1, 3, conf)
    assert len(wave) == 1, wave


def test_fair_admission_first_wave_follows_the_weights(tmp_path: Path) -> None:
    """The same first wave under Tephra's default: both queues are admitted at once, the one
    with weight 3 more than the other."""
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(TEPHRA_DEFAULT_CONFIG)
    wave = _first_wave(1, 3, conf)
    assert len(wave) == 2 and wave["b13"] > wave["a13"], wave
