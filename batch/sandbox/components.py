"""Pluggable sandbox components: the controllers and the scheduler that `sandbox up` starts.

The sandbox itself only needs the API server and the node emulator; Tephra's controllers and
scheduler live in lower layers and are plugged in here as `Component`s. `sandbox up` (and
`run_sandbox`) start every component against an internal kubeconfig once the API server is
serving, wait until all report ready, and only then write the user's kubeconfig.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from batch.sandbox.options import SandboxOptions

log = logging.getLogger(__name__)


@runtime_checkable
class Component(Protocol):
    """Something that runs beside the sandbox API server (controllers, scheduler, ...)."""

    @property
    def name(self) -> str: ...

    def start(self, *, kubeconfig: Path, options: SandboxOptions) -> None:
        """Start without blocking (threads or processes); talk to the API via kubeconfig."""

    def wait_ready(self, timeout: float) -> bool:
        """True once the component serves; False if it is not ready within timeout seconds."""

    def stop(self) -> None:
        """Stop and release everything started; must be safe to call twice."""


ComponentFactory = Callable[[SandboxOptions], Component]

# Components `tephra sandbox up` starts, in order. Layers below the sandbox register theirs here
# through `register_component` (called by `default_components`), keeping the import direction
# sandbox -> controllers/scheduler.
_FACTORIES: list[tuple[str, ComponentFactory]] = []


def register_component(name: str, factory: ComponentFactory) -> None:
    """Add (or replace) a component factory for `sandbox up`."""
    for i, (existing, _f) in enumerate(_FACTORIES):
        if existing == name:
            _FACTORIES[i] = (name, factory)
            return
    _FACTORIES.append((name, factory))


def _controllers(options: SandboxOptions) -> Component:
    from batch.controllers.runner import ControllerComponent

    return ControllerComponent(options)


def _scheduler(options: SandboxOptions) -> Component:
    from batch.kube.service import SchedulerComponent, SchedulerOptions

    return SchedulerComponent(
        SchedulerOptions(
            scheduler_conf=options.scheduler_conf,
            schedule_period=options.schedule_period,
            db_url=options.db_url,
        )
    )


# The controllers first (they create PodGroups), then the scheduler.
_BUILTIN: list[tuple[str, ComponentFactory]] = [
    ("controllers", _controllers),
    ("scheduler", _scheduler),
]


def default_components(options: SandboxOptions) -> list[Component]:
    """The components `tephra sandbox up` runs: controllers, scheduler, then registered ones.

    A factory registered under a built-in name replaces the built-in one.
    """
    registered = dict(_FACTORIES)
    factories = [(name, registered.pop(name, f)) for name, f in _BUILTIN]
    factories += [(name, f) for name, f in _FACTORIES if name in registered]
    return [factory(options) for _name, factory in factories]


def start_all(
    components: Sequence[Component],
    *,
    kubeconfig: Path,
    options: SandboxOptions,
    timeout: float = 60.0,
) -> None:
    """Start components in order and wait for each; stop the started ones on failure."""
    started: list[Component] = []
    try:
        for c in components:
            log.info("starting sandbox component %s", c.name)
            c.start(kubeconfig=kubeconfig, options=options)
            started.append(c)
        for c in components:
            if not c.wait_ready(timeout):
                raise RuntimeError(f"sandbox component {c.name} was not ready within {timeout}s")
    except BaseException:
        stop_all(started)
        raise


def stop_all(components: Sequence[Component]) -> None:
    for c in reversed(list(components)):
        try:
            c.stop()
        except Exception:
            log.exception("stopping sandbox component %s failed", c.name)
