"""The job controller's events name the job as client-go's recorder does: apiVersion, kind,
namespace, name, uid and the resourceVersion the reconcile saw (issue 15; the scheduler's and
the queue controller's already do, through `batch.api.events`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from batch.api.admission import AdmissionLimits
from batch.controllers import constants as c
from batch.controllers.effects import EmitEvent
from batch.controllers.job import reconcile_job
from batch.controllers.shell import apply_actions
from tests.controllers.fakeapi import FakeApi

from .conftest import make_job, task


@pytest.mark.parametrize("case", ["command", "too-large"])
def test_job_events_carry_uid_and_resource_version(case: str) -> None:
    job = make_job(tasks=[task("worker", 2)])
    job["metadata"].update(uid="uid-j", resourceVersion="17")
    job["status"] = {"state": {"phase": "Running"}} if case == "command" else {}
    command = {
        "apiVersion": c.BUS_API,
        "kind": "Command",
        "metadata": {"name": "abort", "namespace": "ns", "uid": "uid-c"},
        "action": "AbortJob",
        "target": {"kind": "Job", "name": "job", "uid": "uid-j"},
    }
    now = datetime(2026, 1, 1, tzinfo=UTC)
    limits = AdmissionLimits(pods_per_job=1) if case == "too-large" else AdmissionLimits()
    cmds = [command] if case == "command" else []
    res = reconcile_job(job, [], None, now=now, commands=cmds, limits=limits)
    events = res.of_type(EmitEvent)
    assert events, res.actions
    api: Any = FakeApi()  # a KubeClient by duck typing
    asyncio.run(apply_actions(api, events, component="tephra-controllers"))
    posted = api.of_kind("Event")
    assert posted
    for event in posted:
        assert event["involvedObject"] == {
            "apiVersion": c.BATCH_API,
            "kind": "Job",
            "namespace": "ns",
            "name": "job",
            "uid": "uid-j",
            "resourceVersion": "17",
        }
