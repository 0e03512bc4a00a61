"""The admission size limits reach every caller: the webhook server and `tephra validate`."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from batch.api.admission import AdmissionLimits
from batch.cli.validate import validate
from batch.controllers.webhook import review_response

from .conftest import make_job, make_task

SMALL = AdmissionLimits(pods_per_job=10, replicas_per_task=6)


def test_the_webhook_answers_with_its_configured_limits() -> None:
    job = make_job(tasks=[make_task(replicas=7)])
    review = {"apiVersion": "admission.k8s.io/v1", "request": {"uid": "u", "object": job}}
    review["request"]["kind"] = {"kind": "Job"}
    assert review_response(review, mutate=False, lookup=None)["response"]["allowed"]
    denied = review_response(review, mutate=False, lookup=None, limits=SMALL)["response"]
    assert not denied["allowed"] and denied["status"]["code"] == 422
    assert denied["status"]["details"]["causes"][0]["field"] == "spec.tasks[0].replicas"


def test_validate_says_invalid_and_takes_the_limits(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(make_job(tasks=[make_task(replicas=100_000_000)])))
    refused = CliRunner().invoke(validate, ["-q", str(path)])
    assert refused.exit_code == 1
    assert "spec.tasks[0].replicas: maxTaskReplicas" in refused.stderr
    raised = ["-q", "--max-pods-per-job", "100000000", "--max-task-replicas", "100000000"]
    allowed = CliRunner().invoke(validate, [*raised, str(path)])
    assert allowed.exit_code == 0, allowed.stderr
