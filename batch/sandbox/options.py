"""Options of a sandbox run, shared by `tephra sandbox up`, `run_sandbox` and components."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batch.api.admission import AdmissionLimits


@dataclass(slots=True)
class FaultOptions:
    """Fault injection for reliability tests; deterministic for a given seed.

    A write (POST/PUT/PATCH/DELETE) fails with 500 with probability `error_rate` and with 429
    (Retry-After: 1) with probability `throttle_rate`; every request waits `latency` seconds
    (plus up to `jitter` seconds); watch streams are dropped `drop_watch_every` seconds after they
    open (0 = never). Requests from in-process components are never faulted.
    """

    error_rate: float = 0.0
    throttle_rate: float = 0.0
    latency: float = 0.0
    jitter: float = 0.0
    drop_watch_every: float = 0.0
    seed: int = 0

    @property
    def active(self) -> bool:
        return bool(
            self.error_rate
            or self.throttle_rate
            or self.latency
            or self.jitter
            or self.drop_watch_every
        )


@dataclass(slots=True)
class SandboxOptions:
    """Everything `tephra sandbox up` accepts; components read what concerns them.

    `admission_limits` bound what one object may ask for, in the API server's admission and in the
    controllers alike (None: admission's defaults); `pod_batch` is how many pods the job
    controller creates per reconcile (None: its default); `allowed_hosts` are the Host names
    (and web page origins) answered besides loopback ones (`*`: any); `queue_command_namespace`
    is the one namespace the queue controller takes queue Commands from (None: any).
    """

    host: str = "127.0.0.1"
    port: int = 0
    nodes_file: Path | None = None
    scheduler_conf: Path | None = None
    schedule_period: float = 1.0
    db_url: str | None = None
    max_grace_seconds: float = 2.0
    heartbeat_seconds: float = 10.0
    bookmark_seconds: float = 5.0
    watch_history: int = 100_000
    install_crds: bool = True
    default_queues: bool = True
    workload_controllers: bool = True
    emulator: bool = True
    seed: int = 0
    faults: FaultOptions = field(default_factory=FaultOptions)
    admission_limits: AdmissionLimits | None = None
    pod_batch: int | None = None
    allowed_hosts: tuple[str, ...] = ()
    queue_command_namespace: str | None = None
