"""apply_actions: each kind of action, what it tolerates, what it counts and where it stops."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from batch.controllers.effects import (
    Action,
    CreateObject,
    DeleteObject,
    EmitEvent,
    ObjectRef,
    PatchObject,
    PatchStatus,
)
from batch.controllers.shell import ApplyError, NotLeading, apply_actions

from .fakeapi import FakeApi

POD = ObjectRef("v1", "Pod", "ns", "p")
TEAM = ObjectRef("v1", "Namespace", "", "team")


def _pod(name: str = "p") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}}


def _apply(api: FakeApi, actions: list[Action]) -> tuple[int, list[Action]]:
    taken: list[Action] = []
    writes = asyncio.run(apply_actions(api, actions, component="t", applied=taken.append))  # type: ignore[arg-type]
    return writes, taken


def test_each_write_is_counted_and_reported_once_taken() -> None:
    api = FakeApi()
    create = CreateObject(_pod())
    patch = PatchObject(POD, {"metadata": {"labels": {"a": "b"}}})
    status = PatchStatus(POD, {"phase": "Running"})
    delete = DeleteObject(POD)
    assert _apply(api, [create, patch, status, delete]) == (4, [create, patch, status, delete])
    assert [c[0] for c in api.calls] == ["CREATE", "PATCH", "PATCH", "DELETE"]
    assert api.calls[2][3] == "status"


def test_already_there_and_already_gone_are_no_writes() -> None:
    api = FakeApi()
    api.put("Pod", _pod())
    actions: list[Action] = [
        CreateObject(_pod()),  # 409
        PatchObject(ObjectRef("v1", "Pod", "ns", "gone"), {}),  # 404
        PatchStatus(ObjectRef("v1", "Pod", "ns", "gone"), {}),  # 404
        DeleteObject(ObjectRef("v1", "Pod", "ns", "gone")),  # 404
    ]
    assert _apply(api, actions) == (0, [])
    api.fail = lambda method, *_: 409 if method == "DELETE" else None  # another incarnation
    assert _apply(api, [DeleteObject(POD)]) == (0, [])


@pytest.mark.parametrize(
    ("action", "status"),
    [
        (CreateObject(_pod()), 404),
        (PatchObject(POD, {}), 409),
        (PatchStatus(POD, {}), 409),
        (DeleteObject(POD), 500),
    ],
)
def test_a_real_failure_stops_the_batch(action: Action, status: int) -> None:
    api = FakeApi()
    api.put("Pod", _pod())
    api.fail = lambda *_: status
    after = CreateObject(_pod("q"))
    with pytest.raises(ApplyError, match=f"{type(action).__name__} Pod ns/p"):
        _apply(api, [action, after])
    assert len(api.calls) == 1  # nothing after the failure was tried


def test_events_are_best_effort_and_count_no_write() -> None:
    api = FakeApi()
    api.fail = lambda method, kind, *_: 500 if kind == "Event" else None
    event = EmitEvent(POD, "Reason", "message")
    create = CreateObject(_pod())
    assert _apply(api, [event, create]) == (1, [create])
    ok = FakeApi()
    assert _apply(ok, [EmitEvent(TEAM, "Reason", "m")]) == (0, [])
    [posted] = ok.of_kind("Event")
    assert posted["metadata"]["namespace"] == "default"  # a cluster object's event


def test_a_cluster_scoped_object_is_written_without_a_namespace() -> None:
    api = FakeApi()
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    assert _apply(api, [CreateObject(body), DeleteObject(TEAM)])[0] == 2


def test_a_fence_that_says_no_stops_the_remaining_writes() -> None:
    """A leader whose leadership lapsed (paused past the lease) sends nothing more (issue 30:
    controllers' writes check lease currency as the scheduler's binds do)."""
    api = FakeApi()
    answers = iter([True, False])
    taken: list[Action] = []
    actions: list[Action] = [CreateObject(_pod("a")), CreateObject(_pod("b")), DeleteObject(POD)]
    with pytest.raises(NotLeading) as err:
        asyncio.run(
            apply_actions(
                api,  # type: ignore[arg-type]
                actions,
                component="t",
                applied=taken.append,
                fence=lambda: next(answers),
            )
        )
    assert err.value.unsent == 2
    assert taken == actions[:1] and len(api.calls) == 1


def test_a_manager_out_of_its_lease_drops_and_retries_without_blame() -> None:
    """The reconcile's writes are dropped unsent, counted, and the key comes back later; the
    job is not charged a failure (which would count towards terminating it)."""
    from batch.controllers.effects import ReconcileResult
    from batch.controllers.operator import ControllerManager
    from batch.controllers.runtime.leadership import FENCE

    mgr = ControllerManager(None, scheduler_names=("volcano",), adapters=[])
    mgr.client = FakeApi()  # type: ignore[assignment]
    later: list[tuple[tuple[str, str, str], float]] = []
    mgr.keys.enqueue_later = lambda key, seconds: later.append((key, seconds))  # type: ignore[method-assign]
    result = ReconcileResult()
    result.actions.append(CreateObject(_pod()))
    key = ("job", "ns", "j")

    async def run() -> bool:
        FENCE.set(lambda: False)
        return await mgr.writes.apply(key, result)

    assert asyncio.run(run()) is False
    assert mgr.client.calls == []  # type: ignore[attr-defined]
    assert later == [(key, 1.0)] and key not in mgr.writes.failures
    assert mgr.metrics.dropped_writes._value.get() == 1
