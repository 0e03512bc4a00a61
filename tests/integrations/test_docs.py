"""The examples in docs/integrations.md say what they do: each manifest gets the gang the text
states, and the third-party adapter example is a working adapter."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from batch.api.integration import WorkloadAdapter, adapter_for_workload
from tests.integrations.conftest import REPO_ROOT

DOC = REPO_ROOT / "docs" / "integrations.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def manifest(kind: str) -> dict[str, Any]:
    for text in blocks("yaml"):
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            continue  # e.g. the RayJob sketch with "{ ... }"
        if isinstance(doc, dict) and doc.get("kind") == kind:
            doc["metadata"].setdefault("uid", "u")
            return doc
    raise AssertionError(f"docs/integrations.md has no {kind} example")


# (kind, name, minMember, minTaskMember, minResources, queue) as the prose states them.
STATED = [
    ("PyTorchJob", "bert", 5, {"master": 1, "worker": 4}, {"nvidia.com/gpu": "40"}, "research"),
    (
        "MPIJob",
        "allreduce",
        5,
        {"launcher": 1, "worker": 4},
        {"cpu": "50m", "nvidia.com/gpu": "32"},
        "hpc",
    ),
    (
        "RayCluster",
        "ray-tune-pg",
        3,
        {"headgroup": 1, "gpu": 2},
        {"cpu": "1500m", "memory": "2560Mi", "nvidia.com/gpu": "2"},
        "research",
    ),
    (
        "SparkApplication",
        "spark-etl-pg",
        5,
        {"spark-driver": 1, "spark-executor": 4},
        {"cpu": "9", "memory": f"{2432 + 4 * 4505}Mi", "nvidia.com/gpu": "4"},
        "etl",
    ),
]


@pytest.mark.parametrize(("kind", "name", "members", "tasks", "resources", "queue"), STATED)
def test_documented_manifest_gets_the_documented_gang(
    adapters: list[WorkloadAdapter],
    kind: str,
    name: str,
    members: int,
    tasks: dict[str, int],
    resources: dict[str, str],
    queue: str,
) -> None:
    obj = manifest(kind)
    adapter = adapter_for_workload(obj, adapters)
    assert adapter is not None
    gang = adapter.gang_for_workload(obj)
    assert gang is not None
    assert (gang.name, gang.min_member, dict(gang.min_task_member)) == (name, members, tasks)
    assert dict(gang.min_resources or {}) == resources
    assert gang.queue == queue


def test_third_party_adapter_example_works() -> None:
    (code,) = [b for b in blocks("python") if "class AcmeAdapter" in b]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/integrations.md", "exec"), namespace)
    acme = namespace["ACME"]
    assert isinstance(acme, WorkloadAdapter)
    job = {
        "apiVersion": "acme.io/v1",
        "kind": "AcmeJob",
        "metadata": {"name": "j", "namespace": "n", "uid": "u"},
        "spec": {
            "workers": 3,
            "queue": "q",
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
            },
        },
    }
    gang = acme.gang_for_workload(job)
    assert (gang.name, gang.min_member, dict(gang.min_resources)) == ("j", 3, {"cpu": "6"})
    pod = {"metadata": {"namespace": "n", "labels": {"acme.io/job": "j"}}}
    assert acme.workload_ref_for_pod(pod).gang_name == "j"
