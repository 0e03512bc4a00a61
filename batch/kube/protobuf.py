"""Binding and Event creates in Kubernetes' protobuf wire format, as client-go sends them.

Why this exists: every pod costs a scheduler two creates, its Binding and its `Scheduled`
Event. kube-scheduler (client-go) sends both as `application/vnd.kubernetes.protobuf`; Tephra
sent JSON, which the apiserver decodes more slowly. On the real control plane a binder that
does nothing else bound 269.0 pods/s in protobuf against 237.9 in JSON, with 4.94 s of
apiserver CPU per 1,000 pods against 5.39 (docs/benchmarks.md, "The wire format, measured").

The body is Kubernetes' envelope (the magic `k8s\\0`, then a `runtime.Unknown` holding
apiVersion, kind and the object's bytes) around the object's message. The field numbers below
are those of Kubernetes' generated.proto files for the few messages these two kinds use; the
sandbox's decoder (`batch.sandbox.protobuf`, generated from the same files) is the test's
independent check of them. Only what Tephra writes is encodable (strings, integers, string
maps, messages, times): anything else raises ValueError rather than being left out.

Answers are still read as JSON (the client's Accept header). An apiserver or proxy that refuses
protobuf answers 415: `ProtobufCreates` then logs it once and sends JSON from then on.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from batch.kube.resource import ApiError

if TYPE_CHECKING:  # the CLI reads MEDIA_TYPE: no aiohttp at its import
    from batch.kube.client import KubeClient

__all__ = ["JSON", "MEDIA_TYPE", "ProtobufCreates", "encodable", "encode_protobuf"]

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
JSON = "application/json"
_MAGIC = b"k8s\x00"

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_CORE = "k8s.io.api.core.v1."
TIME, MICRO_TIME = _META + "Time", _META + "MicroTime"
_REFERENCE = _CORE + "ObjectReference"

#: message -> JSON field name -> (field number, label: o(ptional) or m(ap of strings), type);
#: in field-number order, as Go's marshaller writes them
MESSAGES: dict[str, dict[str, tuple[int, str, str]]] = {
    _CORE + "Binding": {
        "metadata": (1, "o", _META + "ObjectMeta"),
        "target": (2, "o", _REFERENCE),
    },
    _META + "ObjectMeta": {
        "name": (1, "o", "string"),
        "generateName": (2, "o", "string"),
        "namespace": (3, "o", "string"),
        "uid": (5, "o", "string"),
        "resourceVersion": (6, "o", "string"),
        "labels": (11, "m", "string"),
        "annotations": (12, "m", "string"),
    },
    _REFERENCE: {
        "kind": (1, "o", "string"),
        "namespace": (2, "o", "string"),
        "name": (3, "o", "string"),
        "uid": (4, "o", "string"),
        "apiVersion": (5, "o", "string"),
        "resourceVersion": (6, "o", "string"),
        "fieldPath": (7, "o", "string"),
    },
    _CORE + "Event": {
        "metadata": (1, "o", _META + "ObjectMeta"),
        "involvedObject": (2, "o", _REFERENCE),
        "reason": (3, "o", "string"),
        "message": (4, "o", "string"),
        "source": (5, "o", _CORE + "EventSource"),
        "firstTimestamp": (6, "o", TIME),
        "lastTimestamp": (7, "o", TIME),
        "count": (8, "o", "int32"),
        "type": (9, "o", "string"),
        "eventTime": (10, "o", MICRO_TIME),
        "action": (12, "o", "string"),
        "related": (13, "o", _REFERENCE),
        "reportingComponent": (14, "o", "string"),
        "reportingInstance": (15, "o", "string"),
    },
    _CORE + "EventSource": {
        "component": (1, "o", "string"),
        "host": (2, "o", "string"),
    },
}

#: (apiVersion, kind) -> its message
KINDS = {("v1", "Binding"): _CORE + "Binding", ("v1", "Event"): _CORE + "Event"}


_SMALL = [bytes((i,)) for i in range(0x80)]  # the one-byte varints: most keys and lengths


def _varint(n: int) -> bytes:
    if 0 <= n < 0x80:
        return _SMALL[n]
    n &= (1 << 64) - 1  # a negative int64/int32 is its two's complement, ten bytes
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


@functools.lru_cache(maxsize=64)  # an event's two stamps, and a second's events, are one
def _time(value: str) -> bytes:
    """A meta/v1 Time or MicroTime: seconds, then nanoseconds when there are any."""
    at = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if at.tzinfo is None:
        raise ValueError(f"a time without a zone: {value!r}")
    seconds, nanos = int(at.timestamp() // 1), at.microsecond * 1000
    return _varint(1 << 3) + _varint(seconds) + (_varint(2 << 3) + _varint(nanos) if nanos else b"")


def _field(number: int, typ: str, value: Any) -> bytes:
    if typ == "string":
        if not isinstance(value, str):
            raise ValueError(f"field {number}: not a string: {value!r}")
        return _delimited(number, value.encode())
    if typ in ("int32", "int64"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"field {number}: not an integer: {value!r}")
        return _varint(number << 3) + _varint(value)
    if typ in (TIME, MICRO_TIME):
        return _delimited(number, _time(str(value)))
    if not isinstance(value, Mapping):
        raise ValueError(f"field {number}: not an object: {value!r}")
    return _delimited(number, _message(typ, value))


def _message(typ: str, value: Mapping[str, Any]) -> bytes:
    spec = MESSAGES[typ]
    unknown = value.keys() - spec.keys()
    if unknown:
        raise ValueError(f"{typ.rsplit('.', 1)[-1]}: cannot encode {sorted(unknown)}")
    out = bytearray()
    for name, (number, label, ftype) in spec.items():
        item = value.get(name)
        if item is None:
            continue
        if label == "m":
            for key, val in item.items():
                out += _delimited(number, _field(1, "string", key) + _field(2, ftype, val))
        else:
            out += _field(number, ftype, item)
    return bytes(out)


def encodable(obj: Mapping[str, Any]) -> bool:
    """Whether `obj`'s kind is one `encode_protobuf` knows."""
    return (obj.get("apiVersion"), obj.get("kind")) in KINDS


def encode_protobuf(obj: Mapping[str, Any]) -> bytes:
    """The protobuf body of a v1 Binding or Event, as client-go sends it; ValueError for
    another kind or a field this module does not know."""
    api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
    message = KINDS.get((api_version, kind))
    if message is None:
        raise ValueError(f"no protobuf encoding of {api_version} {kind}")
    type_meta = _delimited(1, api_version.encode()) + _delimited(2, kind.encode())
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return _MAGIC + _delimited(1, type_meta) + _delimited(2, _message(message, body))


class ProtobufCreates:
    """Whether a scheduler's Binding and Event creates go as protobuf, shared by its binder and
    its event writer. The first 415 (an apiserver or proxy that refuses protobuf) turns it off
    for good, logged once; that create is then re-sent as JSON."""

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled

    @classmethod
    def for_content_type(cls, content_type: str) -> ProtobufCreates:
        """On for `MEDIA_TYPE`, off for JSON (`--kube-api-content-type`)."""
        if content_type not in (MEDIA_TYPE, JSON):
            raise ValueError(f"unknown content type {content_type!r}: {MEDIA_TYPE} or {JSON}")
        return cls(content_type == MEDIA_TYPE)

    async def create(self, client: KubeClient, path: str, body: Mapping[str, Any]) -> None:
        """POST `body` to `path`: as protobuf while on, else (off, refused with 415 just now,
        or a body with no encoding) as JSON. Any other failure is raised as the JSON POST's
        would be."""
        if not await self._protobuf(client, path, body):
            await client.request("POST", path, body=body, answer=False)

    async def _protobuf(self, client: KubeClient, path: str, body: Mapping[str, Any]) -> bool:
        """POST `body` as protobuf when on: True when sent so, False when it must go as JSON."""
        if not self.enabled or not encodable(body):
            return False
        try:
            raw = encode_protobuf(body)
        except ValueError as exc:
            log.warning("sending %s as JSON: %s", body.get("kind"), exc)
            return False
        try:
            await client.request("POST", path, body=raw, content_type=MEDIA_TYPE, answer=False)
        except ApiError as exc:
            if exc.status != 415:
                raise
            if self.enabled:
                self.enabled = False
                log.warning(
                    "the apiserver refused a protobuf body (415: %s): Bindings and Events go "
                    "as JSON from now on (--kube-api-content-type=%s avoids the first try)",
                    exc,
                    JSON,
                )
            return False
        return True
