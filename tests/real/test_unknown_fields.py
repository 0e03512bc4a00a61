"""Differential: unknown fields in a VCJob, on the real apiserver (the oracle) and the sandbox.

Volcano's CRDs prune unknown fields of its own types (no `x-kubernetes-preserve-unknown-fields`
on `spec`): a typo such as `minAvaliable` is dropped, and refused outright with
`fieldValidation=Strict` (what `kubectl --validate=strict` sends). Fields of the pod template
that Tephra does not model are core/v1 fields and are kept."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.real.conftest import Api, json_request

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"
TYPO_JOB: dict[str, Any] = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "typo"},
    "spec": {
        "minAvaliable": 2,
        "tasks": [
            {
                "name": "w",
                "replicas": 2,
                "bogus": 1,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "c", "image": "busybox", "command": ["sleep", "1"]}
                        ],
                        "restartPolicy": "Never",
                    }
                },
            }
        ],
    },
}

Post = Callable[[str, dict[str, Any]], tuple[int, Any]]


@pytest.fixture(scope="module")
def sandbox_post() -> Iterator[Post]:
    from batch.sandbox.testing import run_sandbox

    with run_sandbox() as sb:
        yield lambda path, body: json_request(sb.url + path, "POST", body)


def servers(api: Api, sandbox_post: Post) -> dict[str, Post]:
    return {"real": lambda path, body: api.request("POST", path, body), "sandbox": sandbox_post}


def test_strict_field_validation_refuses_typos_on_both(
    api: Api, crds: list[str], sandbox_post: Post
) -> None:
    for server, post in servers(api, sandbox_post).items():
        code, answer = post(f"{JOBS}?dryRun=All&fieldValidation=Strict", copy.deepcopy(TYPO_JOB))
        assert code == 400, (server, answer)
        assert 'unknown field "spec.minAvaliable"' in answer["message"], (server, answer)
        assert 'unknown field "spec.tasks[0].bogus"' in answer["message"], (server, answer)


def test_typos_are_pruned_and_template_fields_kept_on_both(
    api: Api, crds: list[str], sandbox_post: Post
) -> None:
    for server, post in servers(api, sandbox_post).items():
        code, stored = post(f"{JOBS}?dryRun=All", copy.deepcopy(TYPO_JOB))
        assert code == 201, (server, stored)
        assert "minAvaliable" not in stored["spec"], server
        task = stored["spec"]["tasks"][0]
        assert "bogus" not in task, server
        assert task["template"]["spec"]["containers"][0]["command"] == ["sleep", "1"], server
