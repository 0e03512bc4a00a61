"""The webhook bounds the admissions it works on at once (issue 30 item 6).

Eight 10,000-task VCJobs in parallel made an unrelated review wait 9.2 s against the apiserver's
10 s timeout: every review ran on the event loop, one after the other. Now a large review (body
over `INLINE_BYTES`) runs in a worker thread behind a gate of `concurrency` slots, and a small
one on the loop at once; a large review that finds the gate full is answered at once as busy,
refused for Tephra's kinds (their failure policy is Fail) and allowed with a warning for pods
(Ignore). These tests order events instead of timing them: a review held in
its worker must not hold the others, and a test that needs the gate in some state waits for
that state (`AdmissionGate.wait_until`), failing if a review within its capacity is answered
first.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import batch.controllers.webhook as webhook
from batch.controllers.webhook import ADMISSION_GATE, INLINE_BYTES, MAX_BODY_BYTES, make_app
from batch.controllers.webhook_gate import AdmissionGate, Busy


def review(kind: str, uid: str) -> dict[str, Any]:
    """A small review, or for a uid starting with `hold` one over `INLINE_BYTES` (worked on in
    a thread, behind the gate)."""
    obj: dict[str, Any] = {"metadata": {"name": "q"}, "spec": {"weight": 1}}
    if uid.startswith("hold"):
        obj["metadata"]["annotations"] = {"pad": "x" * INLINE_BYTES}
    request = {"uid": uid, "kind": {"kind": kind}, "operation": "CREATE", "object": obj}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Reviews whose uid starts with `hold` stay in their worker until the event is set."""
    release = threading.Event()
    real = webhook.review_response

    def slow(r: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if r["request"]["uid"].startswith("hold"):
            assert release.wait(20), "the held review was never released"
        return real(r, **kw)

    monkeypatch.setattr(webhook, "review_response", slow)
    return release


async def _gate_reaches(
    gate: AdmissionGate, held: list[asyncio.Task[Any]], *, running: int, queued: int
) -> None:
    """Wait until `running` reviews run in the gate and `queued` wait; fail if a held review is
    answered first (the gate refused or let through one it should hold)."""
    reached = asyncio.create_task(gate.wait_until(running=running, queued=queued))
    await asyncio.wait([reached, *held], return_when=asyncio.FIRST_COMPLETED)
    answered = [t for t in held if t.done()]
    reached.cancel()
    assert not answered, f"a held review was answered: {[t.exception() for t in answered]}"


async def _scenario(release: threading.Event, concurrency: int) -> dict[str, Any]:
    app = make_app(adapters=[], concurrency=concurrency)
    answers: dict[str, Any] = {}
    async with TestClient(TestServer(app)) as client:

        async def send(path: str, uid: str, kind: str = "Queue") -> None:
            answer = await client.post(f"{path}?timeout=10s", json=review(kind, uid))
            answers[uid] = (answer.status, (await answer.json())["response"])

        try:
            holding = [asyncio.create_task(send("/queues/validate", "hold-1"))]
            await _gate_reaches(app[ADMISSION_GATE], holding, running=1, queued=0)
            # while it is held: an unrelated review, then (when it has the only slot) two more
            await send("/queues/validate", "small")
            answers["small-before-release"] = not release.is_set()
            await send("/pods/validate", "pod", kind="Pod")
        finally:
            release.set()
        await asyncio.gather(*holding)
    return answers


def test_a_review_held_in_its_worker_does_not_hold_an_unrelated_one(
    held: threading.Event,
) -> None:
    answers = asyncio.run(_scenario(held, concurrency=2))
    assert answers["small-before-release"], "the small review waited for the held one"
    assert answers["small"] == (200, {"uid": "small", "allowed": True})
    assert answers["hold-1"][1]["allowed"] is True


async def _full_gate(release: threading.Event) -> dict[str, Any]:
    app = make_app(adapters=[], concurrency=1)
    answers: dict[str, Any] = {}
    async with TestClient(TestServer(app)) as client:

        async def send(path: str, uid: str, kind: str = "Queue") -> None:
            answer = await client.post(f"{path}?timeout=10s", json=review(kind, uid))
            answers[uid] = (answer.status, (await answer.json())["response"])

        try:
            # one running, four waiting (four per slot): the sixth large review finds it full
            held = [asyncio.create_task(send("/queues/validate", f"hold-{i}")) for i in range(5)]
            await _gate_reaches(app[ADMISSION_GATE], held, running=1, queued=4)
            await send("/queues/validate", "hold-excess")
            await send("/pods/validate", "hold-excess-pod", kind="Pod")
            await send("/queues/validate", "small")  # small reviews never wait for the gate
            answers["answered-while-full"] = not release.is_set()
        finally:
            release.set()
        await asyncio.gather(*held)
    return answers


def test_a_full_gate_answers_at_once_refusing_our_kinds_and_allowing_pods(
    held: threading.Event,
) -> None:
    answers = asyncio.run(_full_gate(held))
    assert answers["answered-while-full"]
    code, refused = answers["hold-excess"]
    assert code == 200 and refused["uid"] == "hold-excess" and refused["allowed"] is False
    assert refused["status"]["code"] == 429 and "busy" in refused["status"]["message"]
    full = "1 admissions running and 4 waiting"  # refused at once, not after waiting
    assert full in refused["status"]["message"]
    code, pod = answers["hold-excess-pod"]
    assert pod["allowed"] is True and "busy" in pod["warnings"][0] and full in pod["warnings"][0]
    assert answers["small"] == (200, {"uid": "small", "allowed": True})
    assert all(answers[f"hold-{i}"][1]["allowed"] for i in range(5))


async def _five_and_one_more(turns: int) -> list[Any]:
    """A gate of one slot and four waiting places: one admission, `turns` turns of the loop
    (its slot taken, not yet handed to it, handed to it), then five more at once."""
    gate = AdmissionGate(slots=1, waiting=4)
    release = threading.Event()

    def work() -> str:
        assert release.wait(20), "the admission was never released"
        return "done"

    try:
        runs = [asyncio.create_task(gate.run(10, work))]
        for _ in range(turns):
            await asyncio.sleep(0)
        runs += [asyncio.create_task(gate.run(10, work)) for _ in range(5)]
        await asyncio.wait(runs, return_when=asyncio.FIRST_COMPLETED)  # one is refused
    finally:
        release.set()
    results = await asyncio.gather(*runs, return_exceptions=True)
    assert gate.running == gate.queued == 0
    return results


@pytest.mark.parametrize("turns", range(6))
def test_the_gate_lets_in_exactly_its_slots_and_waiting_places(turns: int) -> None:
    """Whatever turn of the loop the slot is handed over at, the five admissions within
    `slots + waiting` run and only the sixth is refused (an admission holding its slot was
    counted as waiting until the slot reached it, and a seventh let in before it was taken)."""
    results = asyncio.run(_five_and_one_more(turns))
    assert results[:5] == ["done"] * 5, results
    assert isinstance(results[5], Busy), results


def test_an_admission_that_stops_waiting_gives_its_place_back() -> None:
    async def scenario() -> tuple[int, int]:
        gate = AdmissionGate(slots=1, waiting=1)
        release = threading.Event()
        try:
            first = asyncio.create_task(gate.run(10, release.wait, 20))
            await _gate_reaches(gate, [first], running=1, queued=0)
            with pytest.raises(Busy, match="no admission slot free"):
                await gate.run(0.01, release.wait, 20)  # waits for a slot, in vain
            cancelled = asyncio.create_task(gate.run(10, release.wait, 20))
            await _gate_reaches(gate, [first, cancelled], running=1, queued=1)
            cancelled.cancel()
            await asyncio.gather(cancelled, return_exceptions=True)
            waiting = gate.queued
            last = asyncio.create_task(gate.run(10, release.wait, 20))  # its place is free
            await _gate_reaches(gate, [first, last], running=1, queued=1)
        finally:
            release.set()
        await asyncio.gather(first, last)
        return waiting, gate.refused

    assert asyncio.run(scenario()) == (0, 1)


def test_a_body_over_the_limit_is_refused_before_it_is_read() -> None:
    async def post() -> tuple[int, Any]:
        async with TestClient(TestServer(make_app(adapters=[]))) as client:
            body = b'{"request": {"uid": "u", "object": "' + b"x" * MAX_BODY_BYTES + b'"}}'
            answer = await client.post("/jobs/validate", data=body)
            return answer.status, await answer.json()

    code, body = asyncio.run(post())
    assert code == 413 and f"limit of {MAX_BODY_BYTES} bytes" in body["message"]
