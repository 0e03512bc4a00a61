"""The pure scheduling cycle: session framework, actions, plugins and configuration. No I/O.

Entry points (see docs/scheduler.md): ``run_session``, ``Scheduler``, ``apply_decisions``,
``load_config`` and the default configurations, and the decision types.
"""

from __future__ import annotations

from batch.scheduler.config import (
    BUILTIN_DEFAULT_CONFIG,
    HELM_DEFAULT_CONFIG,
    TEPHRA_DEFAULT_CONFIG,
    ConfigError,
    SchedulerConfig,
    load_config,
)
from batch.scheduler.cycle import Scheduler, apply_decisions, run_session
from batch.scheduler.framework.decisions import (
    Bind,
    Decisions,
    Event,
    Eviction,
    PendingReason,
    Pipeline,
)

__all__ = [
    "BUILTIN_DEFAULT_CONFIG",
    "HELM_DEFAULT_CONFIG",
    "TEPHRA_DEFAULT_CONFIG",
    "Bind",
    "ConfigError",
    "Decisions",
    "Event",
    "Eviction",
    "PendingReason",
    "Pipeline",
    "Scheduler",
    "SchedulerConfig",
    "apply_decisions",
    "load_config",
    "run_session",
]
