"""Every Volcano example VCJob in shared/corpus runs to its expected phase on the sandbox, with
Tephra's own controllers and scheduler (default configuration).

Each task gets `sandbox.tephra.io/run-seconds: 1`; tasks whose restartPolicy is Always (the pod
default) restart forever as on a real cluster, so such jobs are expected to stay Running; the
others must reach Completed. Queues defined in the corpus are created first.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("batch.sandbox.testing")

from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox

from .test_integration import B, S

ROOT = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "volcano-examples" / "volcano"


def _corpus() -> tuple[list[tuple[Path, dict[str, Any]]], list[dict[str, Any]]]:
    jobs, queues = [], []
    for f in sorted(ROOT.rglob("*.yaml")):
        if "invalid" in str(f):
            continue
        try:
            docs = [d for d in yaml.safe_load_all(f.read_text()) if isinstance(d, dict)]
        except yaml.YAMLError:
            continue
        for d in docs:
            if d.get("kind") == "Job" and str(d.get("apiVersion", "")).startswith(
                "batch.volcano.sh"
            ):
                jobs.append((f, d))
            elif d.get("kind") == "Queue":
                queues.append(d)
    return jobs, queues


def _expected(doc: dict[str, Any]) -> str:
    policies = [
        (t["template"].get("spec") or {}).get("restartPolicy", "Always")
        for t in doc["spec"]["tasks"]
    ]
    return "Running" if "Always" in policies else "Completed"


def test_every_corpus_job_reaches_its_phase() -> None:
    if not ROOT.exists():
        pytest.skip(f"corpus not found at {ROOT}")
    jobs, queues = _corpus()
    assert len(jobs) >= 15
    nodes = make_nodes(count=4, cpu="256", memory="2Ti", gpus=16)
    scheduler = SchedulerComponent(SchedulerOptions(schedule_period=0.2))
    with run_sandbox(
        nodes=nodes,
        components=[ControllerComponent(), scheduler],
        max_grace_seconds=0.3,
        ready_timeout=120,
    ) as sb:
        api = sb.api_client()
        co = client.CustomObjectsApi(api)
        for q in queues:
            co.create_cluster_custom_object(*S, "queues", q)
        time.sleep(1.0)  # the queue controller opens them
        expected: dict[str, tuple[str, str]] = {}
        for i, (path, raw) in enumerate(jobs):
            doc = copy.deepcopy(raw)
            doc["metadata"]["name"] = f"c{i}-{doc['metadata']['name']}"[:40]
            doc["metadata"]["namespace"] = "default"
            for t in doc["spec"]["tasks"]:
                t["template"].setdefault("metadata", {}).setdefault("annotations", {})[
                    "sandbox.tephra.io/run-seconds"
                ] = "1"
            co.create_namespaced_custom_object(*B, "default", "jobs", doc)
            expected[doc["metadata"]["name"]] = (_expected(raw), str(path.relative_to(ROOT)))
        deadline = time.monotonic() + 120
        phases: dict[str, str] = {}
        while time.monotonic() < deadline:
            for name in expected:
                j = co.get_namespaced_custom_object(*B, "default", "jobs", name)
                phases[name] = ((j.get("status") or {}).get("state") or {}).get("phase", "")
            if all(phases[n] == want for n, (want, _p) in expected.items()):
                break
            time.sleep(1.0)
    wrong = {
        f"{n} ({p})": (phases.get(n), want)
        for n, (want, p) in expected.items()
        if phases.get(n) != want
    }
    assert not wrong, json.dumps(wrong, indent=1)
