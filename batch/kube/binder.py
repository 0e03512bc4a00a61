"""Binder and evictor: the scheduler's only writes that move pods.

Why this exists: a session's decisions are worth nothing until the API server has them, and
the two ways of getting them there fail differently. Binds go out concurrently through a
bounded pool (`pods/<name>/binding`); a bind that fails is reported back so the cache returns
the task to Pending and the next session retries it. A transient failure (5xx, 429, a dropped
connection) is first re-sent a few times at once, while the cache still holds the pod's room: a
gang whose other members were bound would otherwise stay partly bound until a later session
finds room again, which another job may have taken meanwhile. A 409 means the pod is bound
already (a restarted scheduler re-sending its own bind, or another scheduler winning a race):
it is reported as a conflict, never retried blindly. Evictions use the Eviction API, which honours
PodDisruptionBudgets, and fall back to a graceful delete where that API is missing. An eviction
is two writes (the DisruptionTarget condition, then the eviction); its `guard` is checked again
between them, so a replica whose leadership lapsed meanwhile does not send the second.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, TypeVar

from batch.kube.client import RESOURCES, ApiError, KubeClient
from batch.kube.dispatch import Dropped
from batch.kube.limits import BIND_CONCURRENCY
from batch.kube.protobuf import ProtobufCreates

__all__ = ["BindOutcome", "BindRequest", "Binder", "EvictRequest", "Evictor"]

log = logging.getLogger(__name__)
_POD = RESOURCES["Pod"]
T = TypeVar("T")
R = TypeVar("R")


class BindOutcome(Enum):
    BOUND = "bound"
    CONFLICT = "conflict"  # already bound (409)
    GONE = "gone"  # the pod no longer exists (404)
    FAILED = "failed"  # any other error: retry next session


@dataclass(frozen=True, slots=True)
class BindRequest:
    namespace: str
    pod: str
    uid: str
    node: str
    job: str = ""


@dataclass(frozen=True, slots=True)
class EvictRequest:
    namespace: str
    pod: str
    uid: str
    reason: str
    job: str = ""


async def _bounded(items: Sequence[T], limit: int, fn: Callable[[T], Awaitable[R]]) -> list[R]:
    """Run `fn` over items with at most `limit` in flight; results in input order."""
    sem = asyncio.Semaphore(limit)

    async def one(item: T) -> R:
        async with sem:
            return await fn(item)

    return list(await asyncio.gather(*(one(item) for item in items)))


def binding(req: BindRequest) -> dict[str, Any]:
    """The Binding object that binds `req`'s pod to its node."""
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": req.pod, "namespace": req.namespace, "uid": req.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": req.node},
    }


def binding_path(req: BindRequest) -> str:
    """Where `binding(req)` is posted: the pod's binding subresource."""
    return _POD.path(namespace=req.namespace, name=req.pod, sub="binding")


class Binder:
    """Posts Binding objects with bounded concurrency, as protobuf while `protobuf` is on
    (shared with the event writer: a 415 turns both to JSON)."""

    #: pauses before re-sending a bind that failed transiently (one re-send per pause)
    retry_delays: tuple[float, ...] = (0.05, 0.2, 0.5)

    def __init__(
        self,
        client: KubeClient,
        *,
        concurrency: int = BIND_CONCURRENCY,
        protobuf: ProtobufCreates | None = None,
    ) -> None:
        self.client = client
        self.concurrency = concurrency
        self.protobuf = protobuf or ProtobufCreates(False)

    async def bind_one(
        self, req: BindRequest, *, guard: Callable[[], bool] | None = None
    ) -> tuple[BindRequest, BindOutcome, str]:
        """Bind, re-sending after a transient failure while `guard` holds; raises `Dropped`
        when the guard fails before a re-send."""
        for delay in self.retry_delays:
            answer, transient = await self._post(req)
            if not transient:
                return answer
            await asyncio.sleep(delay)
            if guard is not None and not guard():
                raise Dropped(f"bind of {req.namespace}/{req.pod}")
        return (await self._post(req))[0]

    async def _post(self, req: BindRequest) -> tuple[tuple[BindRequest, BindOutcome, str], bool]:
        """One Binding POST: its answer, and whether a failure is transient (worth a re-send)."""
        try:
            await self.protobuf.create(self.client, binding_path(req), binding(req))
        except ApiError as exc:
            if exc.status == 409:
                return (req, BindOutcome.CONFLICT, str(exc)), False
            if exc.status == 404:
                return (req, BindOutcome.GONE, str(exc)), False
            transient = exc.status >= 500 or exc.status == 429
            return (req, BindOutcome.FAILED, str(exc)), transient
        except Exception as exc:  # connection errors, timeouts
            return (req, BindOutcome.FAILED, repr(exc)), True
        return (req, BindOutcome.BOUND, ""), False

    async def bind_all(
        self, reqs: Sequence[BindRequest]
    ) -> list[tuple[BindRequest, BindOutcome, str]]:
        return await _bounded(reqs, self.concurrency, self.bind_one)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Evictor:
    """Evicts victims: mark the pod as a disruption target, then the Eviction API."""

    def __init__(
        self, client: KubeClient, *, concurrency: int = 32, grace_seconds: int | None = None
    ) -> None:
        self.client = client
        self.concurrency = concurrency
        self.grace_seconds = grace_seconds

    async def evict_one(
        self, req: EvictRequest, *, guard: Callable[[], bool] | None = None
    ) -> tuple[EvictRequest, bool, str]:
        """Evict one pod; raises `Dropped` when `guard` fails after the pod was marked."""
        conditions: list[dict[str, Any]] = [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": f"Tephra: {req.reason}",
                "lastTransitionTime": _now(),
            }
        ]
        try:
            await self.client.patch(
                _POD,
                req.pod,
                {"status": {"conditions": conditions}},
                namespace=req.namespace,
                sub="status",
                patch_type="strategic",
            )
        except ApiError as exc:
            if exc.status == 404:
                return req, True, "already gone"
            log.debug(
                "could not mark %s/%s as a disruption target: %s", req.namespace, req.pod, exc
            )
        except Exception as exc:
            return req, False, repr(exc)
        if guard is not None and not guard():
            raise Dropped(f"eviction of {req.namespace}/{req.pod}")
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": req.pod, "namespace": req.namespace},
            "deleteOptions": {"preconditions": {"uid": req.uid}},
        }
        if self.grace_seconds is not None:
            body["deleteOptions"]["gracePeriodSeconds"] = self.grace_seconds
        try:
            await self.client.request(
                "POST", _POD.path(namespace=req.namespace, name=req.pod, sub="eviction"), body=body
            )
            return req, True, ""
        except ApiError as exc:
            if exc.status == 404 and exc.reason != "NotFound":
                pass  # the eviction subresource itself is missing: delete instead
            elif exc.status in (404, 409):
                return req, True, "already gone"
            elif exc.status != 405:
                return req, False, str(exc)
        except Exception as exc:
            return req, False, repr(exc)
        try:
            await self.client.delete(
                _POD, req.pod, req.namespace, grace_seconds=self.grace_seconds, uid=req.uid
            )
        except ApiError as exc:
            if exc.status in (404, 409):
                return req, True, "already gone"
            return req, False, str(exc)
        except Exception as exc:
            return req, False, repr(exc)
        return req, True, ""

    async def evict_all(self, reqs: Sequence[EvictRequest]) -> list[tuple[EvictRequest, bool, str]]:
        return await _bounded(reqs, self.concurrency, self.evict_one)
