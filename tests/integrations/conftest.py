"""Fixtures for the framework-integration tests: the shared corpus and the loaded adapters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from batch.api.integration import WorkloadAdapter, load_adapters

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """The `shared/` folder beside the checkout (walks up from the repo root)."""
    for base in (REPO_ROOT, *REPO_ROOT.parents):
        candidate = base / "shared"
        if (candidate / "corpus" / "frameworks").is_dir():
            return candidate
    pytest.fail("shared/corpus/frameworks not found beside the repository", pytrace=False)


def frameworks_dir() -> Path:
    return shared_dir() / "corpus" / "frameworks"


def load_workload(relpath: str, kind: str) -> dict[str, Any]:
    """The single document of `kind` in corpus file `relpath` (files also hold Queues etc.)."""
    docs = [d for d in yaml.safe_load_all((frameworks_dir() / relpath).read_text()) if d]
    matches = [d for d in docs if d.get("kind") == kind]
    assert len(matches) == 1, f"{relpath}: expected one {kind}, found {len(matches)}"
    return matches[0]


@pytest.fixture(scope="session")
def adapters() -> list[WorkloadAdapter]:
    return load_adapters()


@pytest.fixture(scope="session")
def e2e_api() -> Iterator[Any]:
    """One sandbox per test process for the end-to-end tests: Tephra's controllers and scheduler
    (0.2 s period), two general nodes (64 cpu, 8 GPUs), the operators' CRDs from
    fixtures/crds, the Volcano queue `research` and the PriorityClass `high`."""
    pytest.importorskip("batch.sandbox.testing")
    pytest.importorskip("batch.kube.service")
    from kubernetes import client

    from batch.controllers.runner import ControllerComponent
    from batch.kube.service import SchedulerComponent, SchedulerOptions
    from batch.sandbox.nodes import make_nodes
    from batch.sandbox.testing import run_sandbox

    scheduler = SchedulerComponent(SchedulerOptions(schedule_period=0.2))
    with run_sandbox(
        nodes=make_nodes(count=2, gpus=8), components=[ControllerComponent(), scheduler]
    ) as sb:
        api = sb.api_client()
        ext = client.ApiextensionsV1Api(api)
        for path in sorted((Path(__file__).parent / "fixtures" / "crds").glob("*.yaml")):
            ext.create_custom_resource_definition(yaml.safe_load(path.read_text()))
        client.CustomObjectsApi(api).create_cluster_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            "queues",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "research"},
                "spec": {"weight": 1},
            },
        )
        client.SchedulingV1Api(api).create_priority_class(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "high"},
                "value": 1000,
            }
        )
        yield api
