"""What every reconciling part of the controller manager works with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from batch.controllers.runtime.settings import Settings
from batch.controllers.runtime.watch import Watched
from batch.controllers.runtime.writes import Writes
from batch.kube.client import KubeClient


@dataclass(eq=False)
class Part:
    """The manager's settings, its API client (once connected), the watch's caches and the
    writes that apply reconcile results; shared by the job, queue and grouping parts."""

    settings: Settings
    client: Callable[[], KubeClient]
    watched: Watched
    writes: Writes
