"""The one interpreter of reconciler actions: what each action means, over any store.

The reconcilers return ordered actions (`batch.controllers.effects`). Three places apply them:
the API shell (`batch.controllers.shell`), the in-memory cluster of the tests
(`batch.controllers.memory`) and the simulator (`batch.sim.lifecycle`). What an action means is
decided here, once, and each of them supplies only a `Store`: five primitive writes on the objects
it keeps (over HTTP, in dicts, on the virtual cluster).

The meaning:

* Actions are applied in order, and the first real failure stops the batch (ApplyError, naming
  the action): the next reconcile re-derives what is left from the stored state, which is what
  makes a crash or a refused write at any point harmless.
* A store answers a write with None (written) or a `Refused` (the object is missing, or the
  write conflicts with what is there). Names are deterministic, so a create that conflicts
  means an earlier attempt succeeded; a patch of a missing object and a delete of a missing or
  replaced one (another incarnation: a uid conflict) have nothing left to do. Those refusals are
  no writes; any other refusal is a failure.
* An event is best effort: it is never counted and its failure stops nothing.
* `fence` is asked before each write: once it says no (a leader whose lease lapsed) the rest is
  dropped unsent (NotLeading). `applied` hears of each write the store took, as soon as it is
  taken: what is counted (metrics) is what was really written.

A store's methods return their answer directly (`apply_sync`) or as an awaitable
(`apply_async`); the two drivers differ in nothing but the `await`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from batch.controllers.effects import (
    JSON,
    Action,
    CreateObject,
    DeleteObject,
    EmitEvent,
    ObjectRef,
    PatchObject,
    PatchStatus,
)

log = logging.getLogger(__name__)

Reason = Literal["missing", "conflict"]


@dataclass(frozen=True, slots=True)
class Refused:
    """A store did not write: the object is `missing`, or the write is in `conflict` with what
    is there (the name is taken, another incarnation). `error` is the store's own answer (the
    API error), kept as the cause of an ApplyError."""

    reason: Reason
    error: Exception | None = None


MISSING = Refused("missing")
CONFLICT = Refused("conflict")

#: the refusals that leave an action nothing to do (see the module docstring)
TOLERATED: dict[type[Action], frozenset[Reason]] = {
    CreateObject: frozenset({"conflict"}),
    PatchObject: frozenset({"missing"}),
    PatchStatus: frozenset({"missing"}),
    DeleteObject: frozenset({"missing", "conflict"}),
}

Answer = Refused | None
R_co = TypeVar("R_co", covariant=True)
T = TypeVar("T")


class Store(Protocol[R_co]):
    """The primitive writes a place that keeps objects offers, each answering an `Answer` (or
    an awaitable of one). `errors` are the exceptions its writes raise for a failure (they
    become ApplyError; anything else propagates as it is)."""

    @property
    def errors(self) -> tuple[type[Exception], ...]: ...

    def create(self, ref: ObjectRef, body: JSON) -> R_co: ...

    def patch(self, ref: ObjectRef, patch: JSON) -> R_co: ...

    def patch_status(self, ref: ObjectRef, status: JSON) -> R_co: ...

    def delete(self, ref: ObjectRef) -> R_co: ...

    def event(self, ev: EmitEvent) -> R_co: ...


class ApplyError(RuntimeError):
    """An action failed with a real (not tolerated) error."""

    def __init__(self, message: str, action: Action) -> None:
        super().__init__(message)
        self.action = action


class NotLeading(RuntimeError):
    """The controllers' leadership is not current: the rest of a reconcile's actions were
    dropped unsent (it is reconciled again once leadership is back, or by the new leader)."""

    def __init__(self, unsent: int) -> None:
        super().__init__(f"leadership not current: {unsent} writes dropped unsent")
        self.unsent = unsent


def dispatch(store: Store[T], action: Action) -> T:
    """The store's write for one action."""
    if isinstance(action, CreateObject):
        return store.create(action.ref, action.body)
    if isinstance(action, PatchObject):
        return store.patch(action.ref, action.patch)
    if isinstance(action, PatchStatus):
        return store.patch_status(action.ref, action.status)
    if isinstance(action, DeleteObject):
        return store.delete(action.ref)
    return store.event(action)


def describe(action: Action) -> str:
    ref = action.ref
    where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
    return f"{type(action).__name__} {ref.kind} {where}"


class Batch:
    """One application of ordered actions: the fence, the count, and what each answer means."""

    def __init__(
        self,
        actions: Iterable[Action],
        *,
        applied: Callable[[Action], None] | None = None,
        fence: Callable[[], bool] | None = None,
    ) -> None:
        self.pending = list(actions)
        self.applied = applied
        self.fence = fence
        self.writes = 0

    def __iter__(self) -> Iterator[Action]:
        for i, action in enumerate(self.pending):
            if self.fence is not None and not self.fence():
                raise NotLeading(len(self.pending) - i)
            yield action

    def answered(self, action: Action, answer: Answer) -> None:
        """Count a write; a refusal the action tolerates is none, any other raises."""
        if isinstance(action, EmitEvent):
            return
        if answer is None:
            self.writes += 1
            if self.applied is not None:
                self.applied(action)
            return
        if answer.reason not in TOLERATED[type(action)]:
            raise ApplyError(f"{describe(action)}: {answer.error or answer.reason}", action) from (
                answer.error
            )

    def failed(self, action: Action, exc: Exception) -> None:
        """The store's write raised: an event is dropped, anything else stops the batch."""
        if isinstance(action, EmitEvent):  # events are best effort
            log.debug("event for %s not posted: %s", action.ref.name, exc)
            return
        raise ApplyError(f"{describe(action)}: {exc}", action) from exc


def apply_sync(
    store: Store[Answer],
    actions: Iterable[Action],
    *,
    applied: Callable[[Action], None] | None = None,
    fence: Callable[[], bool] | None = None,
) -> int:
    """Apply in order to a store that answers at once; returns the number of writes."""
    batch = Batch(actions, applied=applied, fence=fence)
    for action in batch:
        try:
            answer = dispatch(store, action)
        except store.errors as exc:
            batch.failed(action, exc)
            continue
        batch.answered(action, answer)
    return batch.writes


async def apply_async(
    store: Store[Awaitable[Answer]],
    actions: Iterable[Action],
    *,
    applied: Callable[[Action], None] | None = None,
    fence: Callable[[], bool] | None = None,
) -> int:
    """Apply in order to a store that answers later (`apply_sync`, awaited)."""
    batch = Batch(actions, applied=applied, fence=fence)
    for action in batch:
        try:
            answer = await dispatch(store, action)
        except store.errors as exc:
            batch.failed(action, exc)
            continue
        batch.answered(action, answer)
    return batch.writes


__all__ = [
    "CONFLICT",
    "MISSING",
    "Answer",
    "ApplyError",
    "Batch",
    "NotLeading",
    "Refused",
    "Store",
    "apply_async",
    "apply_sync",
    "describe",
    "dispatch",
]
