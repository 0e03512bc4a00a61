"""What every VCJob plugin shares: the hook protocol, a base class, argument errors and the
pod and host helpers the plugins use (`batch.controllers.plugins` builds them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from batch.api.jobplugins import parse_plugin_args
from batch.api.jobview import JobView, TaskView

JSON = dict[str, Any]

#: (apiVersion, kind, name) of an object a plugin creates in the job's namespace.
ObjectKey = tuple[str, str, str]


class JobPlugin(Protocol):
    """The controller-side hooks of one job plugin."""

    name: str

    def object_keys(self, job: JobView) -> list[ObjectKey]: ...

    def on_job_add(self, job: JobView, tasks: Sequence[TaskView]) -> list[JSON]: ...

    def on_job_update(self, job: JobView, tasks: Sequence[TaskView]) -> list[JSON]: ...

    def on_pod_create(
        self,
        job: JobView,
        tasks: Sequence[TaskView],
        pod: JSON,
        task: TaskView,
        index: int,
    ) -> None: ...


class PluginBase:
    """Keeps the parsed arguments; hooks a plugin does not need create and rewrite nothing."""

    name = ""

    def __init__(self, args: Mapping[str, str]) -> None:
        self.args = dict(args)

    def object_keys(self, job: JobView) -> list[ObjectKey]:
        return []

    def on_job_add(self, job: JobView, tasks: Sequence[TaskView]) -> list[JSON]:
        return []

    def on_job_update(self, job: JobView, tasks: Sequence[TaskView]) -> list[JSON]:
        return []


#: The one parser of plugin arguments (admission uses it too).
parse_args = parse_plugin_args


class PluginArgsError(ValueError):
    """A job's plugin arguments have values of the wrong type (admission refuses them)."""


def add_env(pod: JSON, env: Sequence[JSON], *, init: bool = True, only: str | None = None) -> None:
    """Append env vars (skipping names already set) to containers (and init containers)."""
    spec = pod.setdefault("spec", {})
    groups = ["containers", "initContainers"] if init else ["containers"]
    for g in groups:
        for ctr in spec.get(g) or []:
            if only is not None and ctr.get("name") != only:
                continue
            cur = ctr.setdefault("env", [])
            names = {e.get("name") for e in cur}
            for e in env:
                if e["name"] not in names:
                    cur.append(dict(e))


def add_port(pod: JSON, port: int, name: str) -> None:
    for ctr in (pod.get("spec") or {}).get("containers") or []:
        ports = ctr.setdefault("ports", [])
        if not any(p.get("containerPort") == port for p in ports):
            ports.append({"name": name, "containerPort": port, "protocol": "TCP"})


def task_hosts(job: JobView, task: TaskView) -> list[str]:
    """FQDN-ish host names `<pod>.<subdomain>` of a task (one entry if hostname is fixed)."""
    job_name = job.name
    spec = task.pod_spec
    fixed = spec.get("hostname")
    sub = spec.get("subdomain") or job_name
    if fixed:
        return [f"{fixed}.{sub}"]
    return [f"{job_name}-{task.name}-{i}.{sub}" for i in range(task.replicas)]
