"""The webhook answers within the apiserver's timeout and never with a traceback.

The apiserver gives each call `?timeout=<timeoutSeconds>s` and treats a late answer as a failure
(with `failurePolicy: Fail` the user's request is refused). Reading cluster facts must therefore
stop well inside that budget; a body nested too deeply for the JSON decoder is a 400, not a 500.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from batch.controllers.webhook import ClusterFacts, make_app

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "u-1",
        "kind": {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "Queue"},
        "operation": "CREATE",
        "object": {"metadata": {"name": "q"}, "spec": {"weight": 1}},
    },
}


class SlowFacts(ClusterFacts):
    """An apiserver that does not answer the webhook's own reads."""

    def __init__(self) -> None:
        super().__init__(None)
        self.cancelled = False  # the webhook gave up on the read instead of waiting for it

    async def lookup(self, review: Mapping[str, Any]) -> Any:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled = True
            raise

    async def close(self) -> None:
        return None


async def _post(path: str, body: Any, *, facts: ClusterFacts | None = None) -> tuple[int, Any]:
    async with TestClient(TestServer(make_app(facts=facts, adapters=[]))) as client:
        if isinstance(body, bytes):
            answer = await client.post(path, data=body)
        else:
            answer = await client.post(path, json=body)
        return answer.status, await answer.json()


def test_slow_cluster_facts_do_not_outlive_the_apiservers_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    facts = SlowFacts()
    with caplog.at_level(logging.WARNING, logger="batch.controllers.webhook"):
        code, body = asyncio.run(_post("/queues/validate?timeout=2s", REVIEW, facts=facts))
    assert code == 200 and body["response"]["uid"] == "u-1", body
    # the read was cut by the budget (half the apiserver's 2 s), not waited for
    assert facts.cancelled
    assert "cluster facts not read within 1.0 s" in caplog.text, caplog.text


def test_a_deeply_nested_body_is_a_400_not_a_traceback() -> None:
    nested = b'{"request": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    code, body = asyncio.run(_post("/jobs/validate", nested))
    assert code == 400, body
    assert "nested" in body["message"], body
