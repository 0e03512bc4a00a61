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


def _job_review(spec: Any) -> dict[str, Any]:
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "metadata": {"name": "j"}, "spec": spec}
    request = {**REVIEW["request"], "kind": {"kind": "Job"}, "object": job}  # type: ignore[dict-item]
    return {**REVIEW, "request": request}


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_an_object_nested_500_deep_is_a_400_answer_on_both_endpoints() -> None:
    # 500 levels decode as JSON, but used to raise RecursionError in admission: an internal
    # error on /validate and an unchanged object on /mutate
    for path in ("/jobs/validate", "/jobs/mutate"):
        code, body = asyncio.run(_post(path, _job_review({"x": _nested(500)})))
        assert code == 200, body
        answer = body["response"]
        assert answer["uid"] == "u-1" and answer["allowed"] is False, (path, answer)
        assert answer["status"]["code"] == 400 and answer["status"]["reason"] == "BadRequest"
        assert "maxDepth" in answer["status"]["message"], answer
        assert "Recursion" not in answer["status"]["message"]


def test_a_job_over_the_task_limit_is_refused_on_the_mutating_endpoint_too() -> None:
    tasks = [{"name": f"t{i}", "replicas": 1} for i in range(101)]
    code, body = asyncio.run(_post("/jobs/mutate", _job_review({"tasks": tasks})))
    status = body["response"]["status"]
    assert code == 200 and body["response"]["allowed"] is False
    assert status["code"] == 422 and "over the limit of 100 tasks per job" in status["message"]


def _cron_review(schedule: str) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    template = {"spec": {"tasks": [{"name": "t", "replicas": 1, "template": pod}]}}
    cron = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "default"},
        "spec": {"schedule": schedule, "jobTemplate": template},
    }
    request = {**REVIEW["request"], "kind": {"kind": "CronJob"}, "object": cron}  # type: ignore[dict-item]
    return {**REVIEW, "request": request}


def test_cronjobs_are_validated_by_the_webhook() -> None:
    # issue 30 item 9: the webhook served no CronJob path; these schedules were accepted
    for schedule, why in [("61 * * * *", "invalid field 1"), ("TZ=../../etc/passwd 0 1 * * *", "")]:
        code, body = asyncio.run(_post("/cronjobs/validate", _cron_review(schedule)))
        answer = body["response"]
        assert code == 200 and answer["allowed"] is False, (schedule, answer)
        assert "spec.schedule" in answer["status"]["message"] and why in answer["status"]["message"]
    code, body = asyncio.run(_post("/cronjobs/validate", _cron_review("0 1 * * *")))
    assert code == 200 and body["response"]["allowed"] is True, body
