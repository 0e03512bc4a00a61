"""Fixtures for the framework-integration tests: the shared corpus and the loaded adapters."""

from __future__ import annotations

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
