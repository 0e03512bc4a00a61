"""A VCJob run to completion on the sandbox (real controllers and scheduler) leaves its history.

The ledger is fed here by watching the API, as the controllers' own recorder does (with
``--db``; tests/controllers/test_ledger_wiring.py): every watch event goes through the
``events_from_*`` converters into recorders writing to SQLite and PostgreSQL at the same time.
The objects are the sandbox's real ones (server-set uids and timestamps, emulator-written
container states).
"""

from __future__ import annotations

import datetime as dt
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("batch.sandbox.testing")
pytest.importorskip("batch.kube.service")
pytest.importorskip("batch.controllers.runner")

from kubernetes import client, watch

from batch.controllers.runner import ControllerComponent
from batch.kube.service import SchedulerComponent
from batch.ledger.convert import events_from_job, events_from_pod, events_from_podgroup
from batch.ledger.db import make_engine
from batch.ledger.recorder import Recorder
from batch.ledger.reports import Filters, outcomes, usage, wait_times
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox

from .helpers import rows

pytestmark = [pytest.mark.xdist_group("ledger-sandbox"), pytest.mark.postgres]

B = ("batch.volcano.sh", "v1alpha1")
S = ("scheduling.volcano.sh", "v1beta1")


class Feed:
    """Watches jobs, podgroups and pods; hands (old, new) pairs to the converters."""

    def __init__(self, api: Any, recorders: list[Recorder]) -> None:
        self.api = api
        self.recorders = recorders
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.seen = 0

    def start(self) -> None:
        co = client.CustomObjectsApi(self.api)
        core = client.CoreV1Api(self.api)
        sources: list[tuple[Callable[..., Any], tuple[Any, ...], Callable[..., Any]]] = [
            (co.list_namespaced_custom_object, (*B, "default", "jobs"), events_from_job),
            (co.list_namespaced_custom_object, (*S, "default", "podgroups"), events_from_podgroup),
            (core.list_namespaced_pod, ("default",), events_from_pod),
        ]
        for fn, args, convert in sources:
            t = threading.Thread(target=self._run, args=(fn, args, convert), daemon=True)
            t.start()
            self.threads.append(t)

    def _run(
        self, fn: Callable[..., Any], args: tuple[Any, ...], convert: Callable[..., Any]
    ) -> None:
        last: dict[str, Any] = {}
        while not self.stop.is_set():
            w = watch.Watch()
            try:
                for event in w.stream(fn, *args, timeout_seconds=1):
                    obj = event["raw_object"]
                    uid = obj["metadata"]["uid"]
                    old = last.get(uid)
                    new = None if event["type"] == "DELETED" else obj
                    if new is None:
                        last.pop(uid, None)
                    else:
                        last[uid] = new
                    out = convert(old, new)
                    for rec in self.recorders:
                        rec.record(out)
                    self.seen += 1
                    if self.stop.is_set():
                        w.stop()
            except Exception:  # the sandbox stopping under a watch
                if self.stop.is_set():
                    return
                time.sleep(0.1)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(5)


def vcjob(name: str) -> dict[str, Any]:
    template = {
        "metadata": {"annotations": {"sandbox.tephra.io/run-seconds": "1"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "train",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": {"tephra.io/submitter": "alice"}},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": 2,
            "queue": "default",
            "tasks": [{"name": "worker", "replicas": 2, "template": template}],
        },
    }


@pytest.fixture
def two_ledgers(sqlite_template: Path, pg_session_url: str, tmp_path: Path) -> Iterator[list[str]]:
    from .conftest import _truncate

    target = tmp_path / "ledger.db"
    shutil.copyfile(sqlite_template, target)
    _truncate(pg_session_url)
    yield [f"sqlite:///{target}", pg_session_url]


def test_vcjob_on_the_sandbox_leaves_its_full_history(
    two_ledgers: list[str], tmp_path: Path
) -> None:
    recorders = [
        Recorder(url, spill_path=tmp_path / f"spill-{i}.jsonl", flush_interval=0.1)
        for i, url in enumerate(two_ledgers)
    ]
    started = dt.datetime.now(dt.UTC)
    with run_sandbox(
        nodes=make_nodes(count=2, gpus=4, cpu="8", memory="32Gi"),
        components=[ControllerComponent(), SchedulerComponent()],
        max_grace_seconds=0.3,
    ) as sb:
        api = sb.api_client()
        feed = Feed(api, recorders)
        feed.start()
        try:
            co = client.CustomObjectsApi(api)
            co.create_namespaced_custom_object(*B, "default", "jobs", vcjob("mnist"))
            deadline = time.monotonic() + 90
            phase = ""
            while time.monotonic() < deadline:
                job = co.get_namespaced_custom_object(*B, "default", "jobs", "mnist")
                phase = ((job.get("status") or {}).get("state") or {}).get("phase", "")
                if phase == "Completed":
                    break
                time.sleep(0.2)
            assert phase == "Completed", f"job did not complete (phase {phase!r}): {job}"
            time.sleep(1.5)  # let the watches deliver the last updates
        finally:
            feed.close()
    for rec in recorders:
        assert rec.flush(timeout=30)
        rec.close()
    window = Filters(since=started - dt.timedelta(minutes=5), until=started + dt.timedelta(hours=1))
    per_backend = []
    for url in two_ledgers:
        engine = make_engine(url)
        try:
            (j,) = rows(engine, "jobs")
            assert (j["namespace"], j["name"], j["kind"], j["queue"]) == (
                "default",
                "mnist",
                "VCJob",
                "default",
            )
            assert j["submitter"] == "alice" and j["replicas"] == {"worker": 2}
            assert j["requested_gpu_milli"] == 2000 and j["requested_cpu_milli"] == 2000
            assert j["final_phase"] == "Completed" and j["phase"] == "Completed"
            assert j["submitted_at"] <= j["first_started_at"] <= j["finished_at"]
            transitions = {(r["source"], r["to_phase"]) for r in rows(engine, "job_transitions")}
            assert {("job", "Pending"), ("job", "Running"), ("job", "Completed")} <= transitions
            assert ("podgroup", "Running") in transitions or ("podgroup", "Inqueue") in transitions
            pods = rows(engine, "pod_attempts")
            assert len(pods) == 2
            for p in pods:
                assert p["job_uid"] == j["uid"] and p["role"] == "worker"
                assert p["node"] and p["outcome"] == "Succeeded" and p["exit_code"] == 0
                assert p["started_at"] is not None and p["finished_at"] is not None
                assert p["gpu_milli"] == 1000
            with engine.connect() as conn:
                waits = wait_times(conn, window).as_dicts()
                used = usage(conn, window, by=["queue"]).as_dicts()
                done = outcomes(conn, window).as_dicts()
            assert waits[0]["jobs"] == 1 and waits[0]["started"] == 1
            assert used[0]["pods"] == 2 and 0 < used[0]["gpu_hours"] < 0.1
            assert done[0]["completed"] == 1
            per_backend.append((j["uid"], len(transitions), waits[0]["mean_wait_s"]))
        finally:
            engine.dispose()
    assert per_backend[0] == per_backend[1]  # both databases hold the same history
