"""Fixtures of the sandbox contract suite: one sandbox per module, clients loaded explicitly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from batch.sandbox.nodes import make_nodes
from batch.sandbox.options import SandboxOptions
from batch.sandbox.testing import SandboxHandle, run_sandbox


@pytest.fixture(scope="module")
def sb() -> Iterator[SandboxHandle]:
    nodes = make_nodes(count=3, gpus=8, cpu="16", memory="64Gi", racks=2)
    with run_sandbox(nodes=nodes, options=SandboxOptions(max_grace_seconds=0.5)) as handle:
        yield handle


@pytest.fixture(scope="module")
def api(sb: SandboxHandle) -> Any:
    client = sb.api_client()
    yield client
    client.close()
