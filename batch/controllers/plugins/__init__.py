"""VCJob plugins, controller side (`volcano-semantics.md#job-plugins`): svc, ssh, env, pytorch,
mpi, tensorflow, ray,
hcclrank.

A plugin is a small object with three hooks, called by the pure job reconciler:
`on_job_add` (objects to create once when the job is initialised), `on_job_update` (objects to
rewrite when replicas change, e.g. the svc ConfigMap) and `on_pod_create` (mutates a pod before it
is created). `object_keys` names the objects the plugin creates or rewrites, so the operator can
read them and the reconciler refuse to touch one the job does not own. Plugins never do I/O.
"""

from __future__ import annotations

from typing import Any

from batch.api.jobplugins import plugin_arg_problems
from batch.api.jobview import JobView
from batch.controllers.plugins.base import (
    JSON,
    JobPlugin,
    ObjectKey,
    PluginArgsError,
    PluginBase,
    add_env,
    add_port,
    parse_args,
    task_hosts,
)
from batch.controllers.plugins.distributed import (
    HcclRankPlugin,
    MpiPlugin,
    PytorchPlugin,
    RayPlugin,
    TensorflowPlugin,
)
from batch.controllers.plugins.env import EnvPlugin
from batch.controllers.plugins.ssh import SshPlugin
from batch.controllers.plugins.svc import SvcPlugin

__all__ = [
    "JSON",
    "JobPlugin",
    "ObjectKey",
    "PluginArgsError",
    "PluginBase",
    "add_env",
    "add_port",
    "build_plugins",
    "parse_args",
    "task_hosts",
]


def build_plugins(job: JobView) -> list[JobPlugin]:
    """Instantiate the job's plugins in a stable order (unknown names are ignored here; the
    admission webhook rejects them). Raises PluginArgsError when an argument has a wrong type."""
    factories: dict[str, Any] = {
        "svc": SvcPlugin,
        "ssh": SshPlugin,
        "env": EnvPlugin,
        "pytorch": PytorchPlugin,
        "mpi": MpiPlugin,
        "tensorflow": TensorflowPlugin,
        "ray": RayPlugin,
        "hcclrank": HcclRankPlugin,
    }
    requested = dict(job.plugins)
    # Implicit plugins (the mutating webhook adds them; repeat here for jobs that bypassed it).
    if (
        any(k in requested for k in ("tensorflow", "mpi", "pytorch", "ray"))
        and "svc" not in requested
    ):
        requested["svc"] = []
    if "mpi" in requested and "ssh" not in requested:
        requested["ssh"] = []
    problems = [
        f"plugin {name}: {p}"
        for name in sorted(requested)
        for p in plugin_arg_problems(name, requested[name])
    ]
    if problems:
        raise PluginArgsError("; ".join(problems))
    out: list[JobPlugin] = []
    for name, factory in factories.items():
        if name in requested:
            out.append(factory(parse_args(requested[name])))
    return out
