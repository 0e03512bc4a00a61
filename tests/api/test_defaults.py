"""Job defaults: what admission writes is what the controllers assume for an unadmitted Job
(the controllers read a Job through its view, `batch.api.jobview.job_view`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from batch.api.admission.job import mutate_job_spec
from batch.api.constants import DEFAULT_MAX_RETRY
from batch.api.defaults import default_task_min_available, max_retry
from batch.api.jobview import job_view

TASKS: list[dict[str, Any]] = [
    {"replicas": 4, "template": {}},
    {"name": "ps", "replicas": 2, "maxRetry": 0, "template": {}},
    {
        "name": "part",
        "replicas": 8,
        "maxRetry": 7,
        "partitionPolicy": {"minPartitions": 2, "partitionSize": 2, "totalPartitions": 4},
        "template": {},
    },
]


@pytest.mark.parametrize("job_min", [None, 0, 5])
def test_controllers_read_an_unadmitted_job_as_admission_would_default_it(
    job_min: int | None,
) -> None:
    raw: dict[str, Any] = {"spec": {"tasks": copy.deepcopy(TASKS)}}
    if job_min is not None:
        raw["spec"]["minAvailable"] = job_min
    admitted = copy.deepcopy(raw)
    mutate_job_spec(admitted["spec"])
    assert job_view(raw).tasks == job_view(admitted).tasks
    assert job_view(raw).min_available == job_view(admitted).min_available == (job_min or 10)
    views = job_view(raw).tasks
    assert [v.name for v in views] == ["default0", "ps", "part"]
    assert [v.max_retry for v in views] == [DEFAULT_MAX_RETRY, DEFAULT_MAX_RETRY, 7]


def test_rules() -> None:
    assert max_retry(None) == max_retry(0) == DEFAULT_MAX_RETRY and max_retry(5) == 5
    assert default_task_min_available({"replicas": 3}) == 3
    assert default_task_min_available({"replicas": "x"}) is None
    part = {"replicas": 9, "partitionPolicy": {"minPartitions": 0, "partitionSize": 3}}
    assert default_task_min_available(part) == 9  # no partition asked for: replicas
