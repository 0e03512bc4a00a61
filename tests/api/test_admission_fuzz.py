"""Fuzz target: hostile AdmissionReviews through the webhook's entry points (issue 30).

Valid VCJob, Queue, PodGroup, Command and CronJob objects are mutated where an attacker would:
nesting hundreds of levels deep, lists of up to 20,000 items, values of the wrong type, any
unicode, fields removed; the review around them is corrupted too (uid, kind, operation, object
of the wrong type). Invariants, for `review_response` (the webhook's pure answer) and for the
HTTP server on raw bytes:
* always a well-formed answer: an AdmissionReview with the request's uid and a boolean
  `allowed`, a denial carrying a code and a one-line message, a patch that decodes; over HTTP a
  200 with such a review or a 400/413 with a message for a body that is none; never a 500;
* never an exception: no answer reports an internal error;
* bounded work: an object over a size or depth limit is refused before it is copied or
  validated (`early`), and the answer serializes (no recursion left for the encoder).
Examples per test are kept small (the `ci` profile replays the same ones every run).
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings, strategies as st

from batch.api.admission import DEFAULT_LIMITS, MAX_DEPTH, AssumeAllQueues, StaticLookup, admit
from batch.api.admission.bounds import deeper_than
from batch.controllers.webhook import make_app, review_response

from .conftest import make_job, make_queue, make_task

_PG = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "pg", "namespace": "ml"},
    "spec": {"minMember": 2, "queue": "q", "minTaskMember": {"worker": 2}},
}
_COMMAND = {
    "apiVersion": "bus.volcano.sh/v1alpha1",
    "kind": "Command",
    "metadata": {"name": "c", "namespace": "ml"},
    "action": "AbortJob",
    "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train"},
}
_CRON = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "CronJob",
    "metadata": {"name": "nightly", "namespace": "ml"},
    "spec": {"schedule": "TZ=UTC 0 1 * * *", "jobTemplate": {"spec": make_job()["spec"]}},
}
BASES: list[tuple[str, dict[str, Any]]] = [
    ("Job", make_job(tasks=[make_task("a"), make_task("b", policies=[{"event": "PodFailed"}])])),
    ("Queue", make_queue("q", weight=2, capability={"cpu": "4"})),
    ("PodGroup", _PG),
    ("Command", _COMMAND),
    ("CronJob", _CRON),
]
LOOKUP = StaticLookup([make_queue("q"), make_queue("default")], [])


def nested(depth: int, leaf: Any) -> Any:
    """`leaf` under `depth` levels of alternating dicts and lists (built without recursion)."""
    value = leaf
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=12),  # any unicode, lone surrogates included
    st.sampled_from(["", "root", "1Gi", "-1", "\u202e", "0 * * * *", "TZ=../../etc/passwd @daily"]),
)
# The hostile values: wrong types, deep nesting, huge lists (repeated items: cheap to build);
# nesting is drawn as often as all the rest, it is where a recursive step breaks.
DEEP = st.builds(nested, st.sampled_from([990, 500, MAX_DEPTH + 1, MAX_DEPTH - 2]), SCALARS)
HOSTILE = st.one_of(
    DEEP,
    st.one_of(
        SCALARS,
        st.builds(lambda n, item: [item] * n, st.sampled_from([101, 1_000, 20_000]), SCALARS),
        st.builds(lambda n: {f"t{i}": 1 for i in range(n)}, st.sampled_from([101, 5_000])),
        st.lists(SCALARS, max_size=3),
        st.dictionaries(st.text(max_size=4), SCALARS, max_size=3),
    ),
)
_DELETE = object()


def _paths(doc: Any, limit: int = 12) -> list[tuple[Any, ...]]:
    """The paths of `doc`'s fields down to `limit` levels (iterative: `doc` may be deep)."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), doc)]
    while stack:
        prefix, node = stack.pop()
        out.append(prefix)
        if len(prefix) >= limit:
            continue
        if isinstance(node, dict):
            stack.extend(((*prefix, k), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend(((*prefix, i), v) for i, v in enumerate(node))
    return out


def _mutate(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    """`doc` with `value` at `path` (or the field removed for `_DELETE`); only the containers
    on the path are copied, so the deep values already in `doc` are shared, not walked."""
    root = _shallow(doc)
    node = root
    for key in path[:-1]:
        node[key] = _shallow(node[key])
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return root


def _shallow(node: Any) -> Any:
    return dict(node) if isinstance(node, dict) else list(node)


def _mostly(draw: st.DrawFn, usual: Any, other: st.SearchStrategy[Any]) -> Any:
    """`usual` nine times in ten, else a draw of `other` (a corrupted envelope field)."""
    return usual if draw(st.integers(0, 9)) < 9 else draw(other)


@st.composite
def hostile_objects(draw: st.DrawFn) -> tuple[str, Any]:
    kind, obj = draw(st.sampled_from(BASES))
    for _ in range(draw(st.integers(1, 3))):
        paths = sorted(_paths(obj)[1:], key=len, reverse=True)  # the deepest fields first
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        obj = _mutate(obj, path, _mostly(draw, draw(HOSTILE), st.just(_DELETE)))
    return kind, obj


@st.composite
def reviews(draw: st.DrawFn) -> dict[str, Any]:
    kind, obj = draw(hostile_objects())
    request: dict[str, Any] = {
        "uid": _mostly(draw, "u-1", SCALARS),
        "kind": _mostly(draw, {"kind": kind}, st.one_of(SCALARS, st.just({"kind": 7}))),
        "operation": _mostly(draw, "CREATE", st.sampled_from(["UPDATE", "DELETE", "PATCH", 3])),
        "object": _mostly(draw, obj, st.one_of(SCALARS, st.lists(SCALARS, max_size=2))),
        "oldObject": _mostly(draw, None, st.one_of(st.just(dict(BASES)[kind]), SCALARS)),
    }
    if draw(st.integers(0, 9)) == 9:
        request.pop(draw(st.sampled_from(list(request))))
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def assert_well_formed(answer: dict[str, Any], review: dict[str, Any]) -> None:
    json.dumps(answer)  # the encoder has room left
    assert answer["kind"] == "AdmissionReview" and answer["apiVersion"] == "admission.k8s.io/v1"
    response = answer["response"]
    uid = review["request"].get("uid")
    assert response["uid"] == (uid if isinstance(uid, str) else "")
    assert isinstance(response["allowed"], bool)
    if not response["allowed"]:
        status = response["status"]
        assert isinstance(status["code"], int) and 400 <= status["code"] < 500, status
        assert status["message"] and "\n" not in status["message"]
        assert "admission failed" not in status["message"], status["message"]
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        assert isinstance(json.loads(base64.b64decode(response["patch"])), list)


_SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))


@_SETTINGS
@given(review=reviews(), mutate=st.booleans(), facts=st.booleans())
def test_every_hostile_review_gets_a_well_formed_answer(
    review: dict[str, Any], mutate: bool, facts: bool
) -> None:
    lookup = LOOKUP if facts else AssumeAllQueues()
    answer = review_response(review, mutate=mutate, lookup=lookup, kind=None)
    assert_well_formed(answer, review)


def _oversized(kind: str, obj: Any) -> bool:
    """Whether `obj` breaks a limit `bounds.py` checks before any other work."""
    if deeper_than(obj, MAX_DEPTH):
        return True
    spec = obj.get("spec") if isinstance(obj, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    if kind == "CronJob":
        template = spec.get("jobTemplate")
        spec = template.get("spec") if isinstance(template, dict) else None
        spec = spec if isinstance(spec, dict) else {}
    tasks = spec.get("tasks")
    return isinstance(tasks, list) and len(tasks) > DEFAULT_LIMITS.tasks_per_job


@_SETTINGS
@given(case=hostile_objects())
def test_an_oversized_object_is_refused_before_any_copy(case: tuple[str, Any]) -> None:
    kind, obj = case
    result = admit(kind=kind, operation="CREATE", obj=obj, old=None, lookup=LOOKUP)
    assert all(e.rule != "internal" for e in result.errors), result.messages()
    if _oversized(kind, obj):
        assert result.early and not result.allowed and result.object == {}


RAW = st.one_of(
    st.builds(lambda r: json.dumps(r).encode(), reviews()),
    st.binary(max_size=64),
    st.builds(lambda n: b'{"request": ' + b"[" * n + b"]" * n + b"}", st.integers(1, 100_000)),
    st.builds(lambda r: json.dumps(r).encode()[:-3], reviews()),  # truncated
    st.just(b"\xff\xfe{}"),
)


async def _post_all(bodies: list[bytes]) -> list[tuple[int, Any]]:
    async with TestClient(TestServer(make_app(adapters=[]))) as client:
        out = []
        for body in bodies:
            path = "/validate" if len(out) % 2 else "/jobs/mutate"
            answer = await client.post(path, data=body)
            out.append((answer.status, await answer.json()))
        return out


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(bodies=st.lists(RAW, min_size=1, max_size=4))
def test_the_http_server_answers_any_body_without_a_500(bodies: list[bytes]) -> None:
    for body, (code, answer) in zip(bodies, asyncio.run(_post_all(bodies)), strict=True):
        assert code in (200, 400, 413), (code, answer)
        if code != 200:
            assert answer["message"]
            continue
        assert_well_formed(answer, json.loads(body))
