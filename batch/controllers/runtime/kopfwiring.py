"""kopf as the controllers use it: thin `on.event` handlers that only record and route.

Handlers for Jobs, Pods, PodGroups, Queues, Commands and workload owners turn an event into a
key (`job ns/name`, `queue name`, `pod ns/name`, `pg ns/name`) on the work queue, after handing
the change to the ledger hook.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import kopf

from batch.controllers import constants as c
from batch.controllers.cronshell import CRONJOB_KEY, owner_key
from batch.controllers.kopflogin import connection_info
from batch.controllers.runtime.watch import Watched

#: hands an object change to the ledger: (kind, watch event type, object)
Record = Callable[[str, str, Mapping[str, Any]], None]


def registry(kubeconfig: Path | None, watched: Watched, record: Record) -> kopf.OperatorRegistry:
    """The handlers of every kind the controllers watch."""
    reg = kopf.OperatorRegistry()

    def enqueue(key: tuple[str, str, str]) -> None:
        watched.keys.enqueue(key)

    @kopf.on.login(registry=reg)
    def _login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(kubeconfig)

    @kopf.on.event(c.BATCH_GROUP, c.BATCH_VERSION, "jobs", registry=reg)
    def _job(event: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
        record("job", str(event.get("type") or ""), body)
        m = body.get("metadata") or {}
        enqueue(("job", str(m.get("namespace")), str(m.get("name"))))
        cron = owner_key(body)
        if cron is not None:
            enqueue(cron)

    @kopf.on.event(c.BATCH_GROUP, c.BATCH_VERSION, "cronjobs", registry=reg)
    def _cronjob(body: Mapping[str, Any], **_: Any) -> None:
        m = body.get("metadata") or {}
        enqueue((CRONJOB_KEY, str(m.get("namespace")), str(m.get("name"))))

    @kopf.on.event("v1", "pods", registry=reg)
    def _pod(event: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
        record("pod", str(event.get("type") or ""), body)
        watched.on_pod_event(str(event.get("type") or ""), body)

    @kopf.on.event(c.SCHED_GROUP, c.SCHED_VERSION, "podgroups", registry=reg)
    def _pg(event: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
        record("podgroup", str(event.get("type") or ""), body)
        watched.on_podgroup_event(body, str(event.get("type") or ""))

    @kopf.on.event(c.SCHED_GROUP, c.SCHED_VERSION, "queues", registry=reg)
    def _queue(event: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
        record("queue", str(event.get("type") or ""), body)
        watched.on_queue_event(str(event.get("type") or ""), body)

    @kopf.on.event(c.BUS_GROUP, c.BUS_VERSION, "commands", registry=reg)
    def _command(body: Mapping[str, Any], **_: Any) -> None:
        watched.on_command_event(body)

    for group, version, plural in (
        ("apps", "v1", "replicasets"),
        ("apps", "v1", "statefulsets"),
        ("batch", "v1", "jobs"),
    ):

        @kopf.on.event(group, version, plural, registry=reg)
        def _owner(body: Mapping[str, Any], **_: Any) -> None:
            m = body.get("metadata") or {}
            enqueue(("pg", str(m.get("namespace")), f"podgroup-{m.get('uid')}"))

    return reg


def kopf_settings() -> kopf.OperatorSettings:
    """kopf as the controllers use it: no events or peering of its own, watches renewed each
    minute and reconnected quickly."""
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.scanning.disabled = True
    settings.watching.server_timeout = 60
    settings.watching.reconnect_backoff = 0.5
    settings.networking.error_backoffs = [0.5, 1, 2, 5]
    return settings
