"""`env` job plugin: exposes the pod's task index as VK_TASK_INDEX and VC_TASK_INDEX."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from batch.controllers.jobspec import TaskView
from batch.controllers.plugins import JSON, add_env


class EnvPlugin:
    name = "env"

    def __init__(self, args: Mapping[str, str]) -> None:
        self.args = dict(args)

    def on_job_add(self, job: Mapping[str, Any], tasks: Sequence[TaskView]) -> list[JSON]:
        return []

    def on_job_update(self, job: Mapping[str, Any], tasks: Sequence[TaskView]) -> list[JSON]:
        return []

    def on_pod_create(
        self,
        job: Mapping[str, Any],
        tasks: Sequence[TaskView],
        pod: JSON,
        task: TaskView,
        index: int,
    ) -> None:
        add_env(
            pod,
            [
                {"name": "VK_TASK_INDEX", "value": str(index)},
                {"name": "VC_TASK_INDEX", "value": str(index)},
            ],
        )
