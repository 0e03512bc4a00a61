"""What the controller manager was started with, read by each of its parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from batch.api.admission import DEFAULT_LIMITS, AdmissionLimits
from batch.controllers import constants as c


@dataclass
class Settings:
    """The controllers' options (the adapters may be replaced while nothing runs)."""

    #: pods whose `schedulerName` is one of these are the controllers' to group
    scheduler_names: tuple[str, ...] = c.DEFAULT_SCHEDULER_NAMES
    #: framework adapters (`batch.api.integration`) the pods and the ledger are read with
    adapters: list[Any] = field(default_factory=list)
    #: pods a job's reconcile creates at most before it is requeued
    pod_batch: int = c.POD_BATCH
    limits: AdmissionLimits = DEFAULT_LIMITS
    #: the one namespace queue Commands are taken from (None: any; the webhook checks who)
    queue_command_namespace: str | None = None
