"""Binding and Event creates as protobuf (batch.kube.protobuf), as client-go sends them.

The encoder's field numbers are written by hand for the few messages a Binding and an Event
use; the sandbox's decoder, whose table is generated from Kubernetes' generated.proto files
(and checked against them in tests/sandbox/test_protobuf.py), is the independent oracle: what
is encoded must decode to the same object, and every hand-written field must be in the table.
An apiserver or proxy that refuses protobuf (415) gets JSON from then on, after one warning.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import batch.cli.scheduler as cli
from batch.kube.binder import Binder, BindOutcome, BindRequest, binding
from batch.kube.client import ApiError
from batch.kube.podcond import scheduled_event
from batch.kube.protobuf import (
    JSON,
    KINDS,
    MEDIA_TYPE,
    MESSAGES,
    ProtobufCreates,
    encodable,
    encode_protobuf,
)
from batch.kube.service import SchedulerOptions
from batch.kube.status import EventSpec, StatusWriter
from batch.sandbox.protobuf import decode_protobuf

ROOT = Path(__file__).resolve().parents[2]
REQ = BindRequest("ns", "p-0", "uid-0", "node-7", "ns/g")


def _event(component: str = "tephra-scheduler") -> dict[str, Any]:
    writer = StatusWriter(None, component=component)  # type: ignore[arg-type]
    return writer.event_body(scheduled_event(REQ.namespace, REQ.pod, REQ.uid, REQ.node))


def test_the_binders_binding_reads_back_as_sent() -> None:
    body = binding(REQ)
    assert decode_protobuf(encode_protobuf(body)) == body


def test_the_status_writers_events_read_back_as_sent() -> None:
    pod = _event()
    writer = StatusWriter(None)  # type: ignore[arg-type]
    podgroup = writer.event_body(
        EventSpec(
            kind="PodGroup",
            namespace="ns",
            name="g",
            reason="Unschedulable",
            message="0/1000 nodes are ready: " + "ü" * 2000,  # cut at 1 KiB, non-ASCII
            type="Warning",
            uid="u-g",
            resource_version="42",
        )
    )
    for body in (pod, podgroup):
        assert decode_protobuf(encode_protobuf(body)) == body
    assert podgroup["involvedObject"]["apiVersion"] == "scheduling.volcano.sh/v1beta1"


def test_every_field_the_decoder_reads_back() -> None:
    """The optional fields Tephra does not send today (labels, host, eventTime with
    microseconds, related) encode as the decoder expects too."""
    event = {
        **_event(),
        "metadata": {
            "generateName": "p-0.",
            "namespace": "ns",
            "labels": {"a": "b", "c": ""},
            "annotations": {"x": "y"},
        },
        "source": {"component": "tephra-scheduler", "host": "h1"},
        "eventTime": "2026-12-06T18:00:00.123456Z",
        "action": "Binding",
        "related": {"kind": "Node", "name": "node-7", "fieldPath": "spec"},
        "reportingInstance": "h1",
    }
    decoded = decode_protobuf(encode_protobuf(event))
    assert decoded["metadata"]["labels"] == {"a": "b", "c": ""}
    assert decoded == event


def test_the_hand_written_fields_are_kubernetes_own() -> None:
    """Each field number, label and type is the one in the table generated from Kubernetes'
    generated.proto files (batch/sandbox/proto_fields.json)."""
    table = json.loads((ROOT / "batch" / "sandbox" / "proto_fields.json").read_text())
    for (api_version, kind), message in KINDS.items():
        assert table["kinds"][f"{api_version}/{kind}"] == message
    for message, fields in MESSAGES.items():
        generated = {name: (n, label, typ) for n, name, label, typ in table["messages"][message]}
        for name, field in fields.items():
            assert generated[name] == field, f"{message}.{name}"
        numbers = [n for n, _label, _typ in fields.values()]
        assert numbers == sorted(numbers), message  # written in field order, as Go does


def test_what_cannot_be_encoded_is_refused_not_dropped() -> None:
    with pytest.raises(ValueError, match="ownerReferences"):
        encode_protobuf({**binding(REQ), "metadata": {"name": "p", "ownerReferences": []}})
    with pytest.raises(ValueError, match="no protobuf encoding"):
        encode_protobuf({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup"})
    with pytest.raises(ValueError, match="not a string"):
        encode_protobuf({**binding(REQ), "target": {"name": 7}})
    with pytest.raises(ValueError, match="without a zone"):
        encode_protobuf({**_event(), "lastTimestamp": "2026-12-06T18:00:00"})
    assert encodable(binding(REQ)) and not encodable({"apiVersion": "v1", "kind": "Pod"})


def test_the_content_type_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tephra scheduler --kube-api-content-type`, as kube-scheduler's flag: protobuf unless
    told application/json."""
    assert ProtobufCreates.for_content_type(MEDIA_TYPE).enabled
    assert not ProtobufCreates.for_content_type(JSON).enabled
    with pytest.raises(ValueError, match="application/yaml"):
        ProtobufCreates.for_content_type("application/yaml")
    assert SchedulerOptions().kube_api_content_type == MEDIA_TYPE
    chosen: list[str] = []
    monkeypatch.setattr(
        cli, "_run", lambda options, _address: chosen.append(options.kube_api_content_type)
    )
    for extra in ([], ["--kube-api-content-type", JSON]):
        result = CliRunner().invoke(cli.scheduler, ["--metrics-bind-address", "0", *extra])
        assert result.exit_code == 0, result.output
    assert chosen == [MEDIA_TYPE, JSON]
    refused = CliRunner().invoke(cli.scheduler, ["--kube-api-content-type", "application/yaml"])
    assert refused.exit_code == 2


class _Api:
    """Records every POST (path, content type, body); answers protobuf with `proto_status`."""

    def __init__(self, proto_status: int = 201) -> None:
        self.proto_status = proto_status
        self.posts: list[tuple[str, str, Any]] = []
        self.answers_read: list[bool] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = JSON,
        answer: bool = True,
        **_: Any,
    ) -> dict[str, Any]:
        assert method == "POST"
        self.posts.append((path, content_type, body))
        self.answers_read.append(answer)
        if content_type == MEDIA_TYPE:
            assert isinstance(body, bytes)
            if self.proto_status >= 400:
                raise ApiError(self.proto_status, {"reason": "UnsupportedMediaType"}, "POST")
        else:
            assert isinstance(body, dict)
        return {}

    async def create(self, res: Any, obj: Any, namespace: str | None = None) -> dict[str, Any]:
        return await self.request("POST", res.path(namespace=namespace), body=obj)

    def types(self) -> list[str]:
        return [ctype for _path, ctype, _body in self.posts]


def _bind_and_tell(api: _Api, creates: ProtobufCreates, n: int) -> list[BindOutcome]:
    binder = Binder(api, protobuf=creates)  # type: ignore[arg-type]
    events = StatusWriter(api, protobuf=creates)  # type: ignore[arg-type]

    async def main() -> list[BindOutcome]:
        outcomes = []
        for i in range(n):
            req = BindRequest("ns", f"p-{i}", f"u-{i}", "node-1")
            outcomes.append((await binder.bind_one(req))[1])
            spec = scheduled_event(req.namespace, req.pod, req.uid, req.node)
            assert await events.post_event(spec)
        return outcomes

    return asyncio.run(main())


def test_binds_and_events_go_as_protobuf_when_on() -> None:
    api = _Api()
    assert _bind_and_tell(api, ProtobufCreates(True), 2) == [BindOutcome.BOUND] * 2
    assert api.types() == [MEDIA_TYPE] * 4
    path, _ctype, raw = api.posts[0]
    assert path == "/api/v1/namespaces/ns/pods/p-0/binding"
    assert decode_protobuf(raw) == binding(BindRequest("ns", "p-0", "u-0", "node-1"))
    assert api.posts[1][0] == "/api/v1/namespaces/ns/events"
    assert decode_protobuf(api.posts[1][2])["reason"] == "Scheduled"
    assert api.answers_read == [False] * 4  # posted for their effect: answers not decoded


def test_json_when_off() -> None:
    api = _Api()
    assert _bind_and_tell(api, ProtobufCreates(False), 2) == [BindOutcome.BOUND] * 2
    assert api.types() == [JSON] * 4
    assert api.answers_read == [False] * 4


def test_a_415_falls_back_to_json_once_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The refused bind is re-sent as JSON at once (not reported failed, not retried as
    protobuf); every later Binding and Event goes as JSON; one warning says why."""
    api = _Api(proto_status=415)
    creates = ProtobufCreates(True)
    with caplog.at_level(logging.WARNING, logger="batch.kube.protobuf"):
        assert _bind_and_tell(api, creates, 3) == [BindOutcome.BOUND] * 3
    assert api.types() == [MEDIA_TYPE] + [JSON] * 6
    assert api.posts[1][2] == binding(BindRequest("ns", "p-0", "u-0", "node-1"))
    assert not creates.enabled
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "415" in warnings[0].getMessage()


@pytest.mark.parametrize("status", [400, 500])
def test_other_refusals_of_protobuf_are_the_binds_own(status: int) -> None:
    """Only a 415 says "not protobuf": a 500 is a transient failure re-sent as protobuf, a 400
    is reported as the bind's failure, as they would be in JSON."""
    api = _Api(proto_status=status)
    binder = Binder(api, protobuf=ProtobufCreates(True))  # type: ignore[arg-type]
    binder.retry_delays = (0.0, 0.0, 0.0)
    _, outcome, message = asyncio.run(binder.bind_one(REQ))
    assert outcome is BindOutcome.FAILED and str(status) in message
    assert set(api.types()) == {MEDIA_TYPE}
    assert len(api.posts) == (1 + len(binder.retry_delays) if status == 500 else 1)


def test_a_creates_answer_is_read_only_when_it_refuses() -> None:
    """Bindings and Events are posted for their effect: a success's body is not decoded (one
    decode less per write), a refusal's still is, for its message."""
    from batch.kube.client import _answer

    assert _answer(201, b"<not read>", "POST", "/b", decode=False) == {}
    assert _answer(201, b'{"kind": "Status"}', "POST", "/b") == {"kind": "Status"}
    with pytest.raises(ApiError) as refused:
        _answer(409, b'{"message": "already bound"}', "POST", "/b", decode=False)
    assert refused.value.status == 409 and "already bound" in str(refused.value)
