"""`env` job plugin: exposes the pod's task index as VK_TASK_INDEX and VC_TASK_INDEX."""

from __future__ import annotations

from collections.abc import Sequence

from batch.api.jobview import JobView, TaskView
from batch.controllers.plugins.base import JSON, PluginBase, add_env


class EnvPlugin(PluginBase):
    name = "env"

    def on_pod_create(
        self,
        job: JobView,
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
