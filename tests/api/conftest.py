"""Fixtures for batch.api tests: the Volcano example corpus and small object builders."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from batch.api.yamlio import iter_documents

REPO = Path(__file__).resolve().parents[2]


def find_shared() -> Path | None:
    """The `shared/` folder beside the checkout (or beside any parent of it)."""
    for base in (REPO, *REPO.parents):
        candidate = base.parent / "shared"
        if (candidate / "corpus").is_dir():
            return candidate
    return None


SHARED = find_shared()
CORPUS = SHARED / "corpus" / "volcano-examples" if SHARED else None


def corpus_files() -> list[Path]:
    if CORPUS is None:
        return []
    return sorted(CORPUS.rglob("*.yaml"))


def corpus_documents() -> Iterator[tuple[str, int, Any]]:
    """(relative file, 1-based doc index, document) for every non-empty corpus document."""
    assert CORPUS is not None
    for path in corpus_files():
        for i, doc in enumerate(iter_documents(path.read_text(encoding="utf-8")), start=1):
            if doc is not None:
                yield str(path.relative_to(CORPUS)), i, doc


@pytest.fixture(scope="session")
def corpus() -> Path:
    if CORPUS is None:
        pytest.fail("shared/corpus/volcano-examples not found beside the repository")
    return CORPUS


_JOB: dict[str, Any] = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {
        "tasks": [
            {
                "name": "worker",
                "replicas": 2,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                            }
                        ],
                        "restartPolicy": "Never",
                    }
                },
            }
        ]
    },
}


def make_job(**spec: Any) -> dict[str, Any]:
    """A minimal valid VCJob; keyword arguments replace spec fields."""
    job = copy.deepcopy(_JOB)
    job["spec"].update(copy.deepcopy(spec))
    return job


def make_task(name: str = "worker", replicas: int = 2, **fields: Any) -> dict[str, Any]:
    task = copy.deepcopy(_JOB["spec"]["tasks"][0])
    task["name"], task["replicas"] = name, replicas
    task.update(copy.deepcopy(fields))
    return task


def make_queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": dict(spec),
    }
