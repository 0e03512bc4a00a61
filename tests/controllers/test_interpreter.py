"""The one action interpreter over a store that answers at once (the shell's async driver is
tested through apply_actions in test_shell_apply.py)."""

from __future__ import annotations

import pytest

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
from batch.controllers.interpreter import (
    CONFLICT,
    MISSING,
    Answer,
    ApplyError,
    NotLeading,
    Refused,
    apply_sync,
)

POD = ObjectRef("v1", "Pod", "ns", "p")
BODY = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}


class Boom(Exception):
    pass


class Scripted:
    """Answers each write as told by verb; records what it was asked."""

    errors: tuple[type[Exception], ...] = (Boom,)

    def __init__(self, **answers: Answer | Exception) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def _answer(self, verb: str) -> Answer:
        self.calls.append(verb)
        found = self.answers.get(verb)
        if isinstance(found, Exception):
            raise found
        return found

    def create(self, ref: ObjectRef, body: JSON) -> Answer:
        return self._answer("create")

    def patch(self, ref: ObjectRef, patch: JSON) -> Answer:
        return self._answer("patch")

    def patch_status(self, ref: ObjectRef, status: JSON) -> Answer:
        return self._answer("patch_status")

    def delete(self, ref: ObjectRef) -> Answer:
        return self._answer("delete")

    def event(self, ev: EmitEvent) -> Answer:
        return self._answer("event")


ALL: list[Action] = [
    CreateObject(BODY),
    PatchObject(POD, {}),
    PatchStatus(POD, {}),
    DeleteObject(POD),
    EmitEvent(POD, "R", "m"),
]


def test_each_write_is_counted_in_order_events_never() -> None:
    store = Scripted()
    taken: list[Action] = []
    assert apply_sync(store, ALL, applied=taken.append) == 4
    assert store.calls == ["create", "patch", "patch_status", "delete", "event"]
    assert taken == ALL[:4]


def test_the_refusals_that_leave_nothing_to_do_are_no_writes() -> None:
    store = Scripted(create=CONFLICT, patch=MISSING, patch_status=MISSING, delete=MISSING)
    assert apply_sync(store, ALL) == 0
    assert apply_sync(Scripted(delete=CONFLICT), [DeleteObject(POD)]) == 0


@pytest.mark.parametrize(
    ("verb", "answer", "action"),
    [
        ("create", MISSING, ALL[0]),
        ("patch", CONFLICT, ALL[1]),
        ("patch_status", CONFLICT, ALL[2]),
    ],
)
def test_any_other_refusal_stops_the_batch_with_its_cause(
    verb: str, answer: Refused, action: Action
) -> None:
    cause = Boom("409 Conflict")
    store = Scripted(**{verb: Refused(answer.reason, cause)})
    with pytest.raises(ApplyError, match=f"{type(action).__name__} Pod ns/p: 409") as err:
        apply_sync(store, [action, CreateObject(BODY)])
    assert err.value.action is action and err.value.__cause__ is cause
    assert store.calls == [verb]


def test_a_store_error_stops_the_batch_but_not_for_an_event() -> None:
    cause = Boom("500")
    with pytest.raises(ApplyError) as err:
        apply_sync(Scripted(delete=cause), [DeleteObject(POD), CreateObject(BODY)])
    assert err.value.__cause__ is cause
    store = Scripted(event=Boom("500"))
    assert apply_sync(store, [EmitEvent(POD, "R", "m"), CreateObject(BODY)]) == 1
    with pytest.raises(ValueError):  # not the store's failure: it propagates as it is
        apply_sync(Scripted(create=ValueError("bug")), [CreateObject(BODY)])


def test_a_fence_that_says_no_drops_the_rest_unsent() -> None:
    store = Scripted()
    answers = iter([True, False])
    with pytest.raises(NotLeading) as err:
        apply_sync(store, ALL[:3], fence=lambda: next(answers))
    assert err.value.unsent == 2 and store.calls == ["create"]
