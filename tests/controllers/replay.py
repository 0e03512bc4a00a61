"""Replayed histories of `reconcile_job`: the old-vs-new check for refactoring the job controller.

Each job (the Volcano example VCJobs in shared/corpus and the controller tests' job shapes) runs
through scripted lifecycles on the in-memory runner (`MemoryCluster`); every reconcile's action
list and the job's status after it are hashed into one digest per (job, lifecycle). A refactor that
claims "behaviour unchanged" must reproduce the recorded digests (tests/controllers/data/).
Regenerate only for an intended behaviour change: `python -m tests.controllers.replay --write`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from batch.controllers.memory import MemoryCluster, command

from .conftest import make_job, task

CORPUS = next(
    (
        d / "shared" / "corpus" / "volcano-examples"
        for d in Path(__file__).resolve().parents
        if (d / "shared" / "corpus" / "volcano-examples").is_dir()
    ),
    Path("/nonexistent"),
)
GOLDEN = Path(__file__).with_name("data") / "reconcile_replay.json"
START = datetime(2026, 1, 1, tzinfo=UTC)


def corpus_jobs() -> Iterator[tuple[str, dict[str, Any]]]:
    for f in sorted(CORPUS.rglob("*.yaml")):
        try:
            docs = [d for d in yaml.safe_load_all(f.read_text()) if isinstance(d, dict)]
        except yaml.YAMLError:
            continue
        for i, d in enumerate(docs):
            if d.get("kind") == "Job" and str(d.get("apiVersion", "")).startswith(
                "batch.volcano.sh"
            ):
                body = copy.deepcopy(d)
                body.setdefault("metadata", {})["namespace"] = "ns"
                yield f"{f.relative_to(CORPUS)}#{i}", body


def fixture_jobs() -> Iterator[tuple[str, dict[str, Any]]]:
    restart = [{"event": "PodFailed", "action": "RestartJob"}]
    yield "plain", make_job()
    yield "min1", make_job(min_available=1, tasks=[task("a", 2), task("b", 1)])
    yield "minsuccess", make_job(minSuccess=1, tasks=[task("w", 3)])
    yield "restartjob", make_job(policies=restart, maxRetry=2)
    yield "restarttask", make_job(policies=[{"event": "PodFailed", "action": "RestartTask"}])
    yield "restartpod", make_job(policies=[{"event": "PodFailed", "action": "RestartPod"}])
    yield "abortjob", make_job(policies=[{"event": "PodFailed", "action": "AbortJob"}])
    yield "terminate", make_job(policies=[{"event": "PodEvicted", "action": "TerminateJob"}])
    yield (
        "complete",
        make_job(
            tasks=[
                task("m", 1, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
                task("w", 2),
            ]
        ),
    )
    yield "exitcode", make_job(policies=[{"exitCode": 3, "action": "RestartJob"}])
    yield "ttl", make_job(ttlSecondsAfterFinished=5)
    yield "depends", make_job(tasks=[task("a", 1), task("b", 1, dependsOn={"name": ["a"]})])
    yield "zero", make_job(tasks=[task("w", 0)])


Step = Callable[[MemoryCluster, dict[str, Any]], None]


def _pods(phase: str, **kw: Any) -> Step:
    return lambda cl, job: cl.set_job_pods(job, phase, **kw)


def _pg(phase: str) -> Step:
    return lambda cl, job: cl.set_podgroup_phase(job, phase)


def _cmd(action: str) -> Step:
    def step(cl: MemoryCluster, job: dict[str, Any]) -> None:
        cl.add(command(job, action, name=f"c-{action.lower()}"))

    return step


def _first_pod(phase: str, **kw: Any) -> Step:
    def step(cl: MemoryCluster, job: dict[str, Any]) -> None:
        pods = [p for p in cl.job_pods(job) if not p["metadata"].get("deletionTimestamp")]
        if pods:
            m = pods[0]["metadata"]
            cl.set_pod_phase(m["namespace"], m["name"], phase, **kw)

    return step


def _evict(cl: MemoryCluster, job: dict[str, Any]) -> None:
    pods = cl.job_pods(job)
    if pods:
        m = pods[-1]["metadata"]
        del cl.objects[cl.key("Pod", m["namespace"], m["name"])]


def _finish(cl: MemoryCluster, job: dict[str, Any]) -> None:
    cl.finish_deletions()


def _noop(cl: MemoryCluster, job: dict[str, Any]) -> None:
    return None


RUN: list[Step] = [_noop, _pg("Inqueue"), _pg("Running"), _pods("Running")]
LIFECYCLES: dict[str, list[Step]] = {
    "succeed": [*RUN, _pods("Succeeded"), _noop],
    "fail": [*RUN, _first_pod("Failed", exit_code=3), _finish, _pods("Running"), _pods("Failed")],
    "evict": [*RUN, _evict, _finish, _noop],
    "suspend": [*RUN, _cmd("AbortJob"), _finish, _cmd("ResumeJob"), _pg("Running")],
    "pending": [_noop, _pg("Inqueue"), _pg("Pending"), _noop],
}


#: fields whose values are freshly generated on each run (the ssh plugin's key pair)
RANDOM = frozenset({"id_rsa", "id_rsa.pub", "authorized_keys"})


def _canon(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"@": type(obj).__name__, **{k: _canon(v) for k, v in vars_of(obj).items()}}
    if isinstance(obj, dict):
        return {str(k): "<random>" if k in RANDOM else _canon(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_canon(v) for v in obj]
    if isinstance(obj, str | int | float | bool) or obj is None:
        return obj
    return repr(obj)


def vars_of(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def replay(job: dict[str, Any], steps: list[Step]) -> str:
    cl = MemoryCluster(graceful=True)
    cl.now = START
    body = cl.add(job)
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    h = hashlib.sha256()
    now = START
    for i, step in enumerate(steps):
        now += timedelta(seconds=7)
        step(cl, cl.get("Job", ns, name) or body)
        for _ in range(8):
            res = cl.reconcile(ns, name, now=now)
            status = (cl.get("Job", ns, name) or {}).get("status")
            record = {"step": i, "result": _canon(res), "status": _canon(status)}
            h.update(json.dumps(record, sort_keys=True, default=repr).encode())
            if not res.actions:
                break
    return h.hexdigest()[:16]


def histories() -> dict[str, str]:
    out: dict[str, str] = {}
    for label, job in [*fixture_jobs(), *corpus_jobs()]:
        for lc, steps in LIFECYCLES.items():
            out[f"{label}/{lc}"] = replay(job, steps)
    return out


if __name__ == "__main__":
    data = histories()
    if "--write" in sys.argv:
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(len(data), "histories")
