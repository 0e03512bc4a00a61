"""Protobuf request bodies of built-in kinds, decoded into the JSON objects the sandbox stores.

Why this exists: kubectl's typed generators (`kubectl create namespace`, `create priorityclass`,
`create deployment`, `create secret`, ...) send `application/vnd.kubernetes.protobuf`, and the
sandbox refused them with 415. The wire format is Kubernetes' envelope (the magic `k8s\\0`, then
a `runtime.Unknown` holding apiVersion, kind and the object's bytes) around the object's
message, whose field numbers come from Kubernetes' own generated.proto files
(`proto_fields.json`, made by scripts/gen-sandbox-proto.py).

JSON has no way to tell an unset field from an empty one, and the Go encoder writes every
non-pointer field; as Go's JSON encoder leaves out empty values of `omitempty` fields, empty
strings, zero times and empty messages are left out here too.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
import struct
from importlib import resources
from typing import Any

from batch.sandbox.decode import check_depth
from batch.sandbox.errors import ApiError

__all__ = ["MEDIA_TYPE", "decode_protobuf"]

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_TIME = {_META + "Time", _META + "MicroTime"}
_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
_RAW = {"k8s.io.apimachinery.pkg.runtime.RawExtension", _META + "FieldsV1"}
_DURATION = _META + "Duration"

Field = tuple[str, str, str]  # name, label (o, r, m), type


@functools.cache
def _table() -> tuple[dict[str, str], dict[str, dict[int, Field]]]:
    text = resources.files("batch.sandbox").joinpath("proto_fields.json").read_text()
    data = json.loads(text)
    messages = {
        name: {int(n): (str(f), str(lbl), str(t)) for n, f, lbl, t in fields}
        for name, fields in data["messages"].items()
    }
    return data["kinds"], messages


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def varint(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.buf) or shift > 63:
                raise _bad("truncated varint")
            byte = self.buf[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise _bad("truncated field")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def fields(self) -> list[tuple[int, int, Any]]:
        """(number, wire type, raw value) of every field, in order."""
        out = []
        while self.pos < len(self.buf):
            key = self.varint()
            number, wire = key >> 3, key & 7
            if wire == 0:
                value: Any = self.varint()
            elif wire == 1:
                value = self.take(8)
            elif wire == 2:
                value = self.take(self.varint())
            elif wire == 5:
                value = self.take(4)
            else:
                raise _bad(f"unsupported wire type {wire}")
            out.append((number, wire, value))
        return out


def _bad(why: str) -> ApiError:
    return ApiError(400, f"error decoding the protobuf body: {why}")


def _signed(value: int, bits: int = 64) -> int:
    return value - (1 << 64) if value >= 1 << (bits - 1) and value < 1 << 64 else value


def _scalars(typ: str, wire: int, raw: Any) -> list[Any]:
    """One field occurrence of a scalar type (a packed repeated field holds several)."""
    if wire == 2 and typ not in ("string", "bytes"):
        reader, values = _Reader(raw), []
        while reader.pos < len(raw):
            if typ == "double":
                values.append(struct.unpack("<d", reader.take(8))[0])
            else:
                values.append(_scalar(typ, 0, reader.varint()))
        return values
    return [_scalar(typ, wire, raw)]


def _scalar(typ: str, wire: int, raw: Any) -> Any:
    if typ == "string":
        return bytes(raw).decode("utf-8", errors="replace")
    if typ == "bytes":
        return base64.b64encode(raw).decode()
    if typ == "bool":
        return bool(raw)
    if typ in ("double", "float"):
        return struct.unpack("<d" if wire == 1 else "<f", raw)[0]
    if typ in ("int32", "int64"):
        return _signed(int(raw))
    return int(raw)


def _special(typ: str, fields: dict[int, Any]) -> Any:
    """The JSON form of the apimachinery types that are not plain objects in JSON."""
    if typ in _TIME:
        seconds, nanos = _signed(fields.get(1, 0)), fields.get(2, 0)
        if not seconds and not nanos:
            return None
        at = dt.datetime.fromtimestamp(seconds, dt.UTC).replace(microsecond=nanos // 1000)
        if typ.endswith("MicroTime"):
            return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if typ == _QUANTITY:
        return bytes(fields.get(1, b"")).decode()
    if typ == _INT_OR_STRING:
        return (
            _signed(fields.get(2, 0))
            if fields.get(1, 0) == 0
            else bytes(fields.get(3, b"")).decode()
        )
    if typ in _RAW:
        raw = fields.get(1)
        return json.loads(raw) if raw else None
    if typ == _DURATION:
        return f"{_signed(fields.get(1, 0)) / 1e9:g}s"
    return ...


def _message(typ: str, raw: bytes, depth: int = 0) -> Any:
    if depth > 64:
        raise _bad("nested too deeply")
    _, messages = _table()
    parsed = _Reader(raw).fields()
    special = _special(typ, {n: v for n, _w, v in parsed})
    if special is not ...:
        return special
    spec = messages.get(typ)
    if spec is None:
        raise _bad(f"no definition of {typ}")
    out: dict[str, Any] = {}
    for number, wire, value in parsed:
        field = spec.get(number)
        if field is None:
            continue  # a field newer than the table: left out, as unknown fields are
        name, label, ftype = field
        if label == "m":
            key, val = _map_entry(ftype, value, depth)
            out.setdefault(name, {})[key] = val
            continue
        items = (
            _scalars(ftype, wire, value) if ftype in _PLAIN else [_message(ftype, value, depth + 1)]
        )
        if label == "r":
            out.setdefault(name, []).extend(items)
        else:
            out[name] = items[-1]
    return {k: v for k, v in out.items() if v not in ("", None, {})}


_PLAIN = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float"}


def _map_entry(value_type: str, raw: bytes, depth: int) -> tuple[str, Any]:
    key, value = "", None
    for number, wire, item in _Reader(raw).fields():
        if number == 1:
            key = bytes(item).decode("utf-8", errors="replace")
        elif number == 2:
            value = (
                _scalars(value_type, wire, item)[0]
                if value_type in _PLAIN
                else _message(value_type, item, depth + 1)
            )
    if value is None:
        value = "" if value_type in ("string", "bytes") else ({} if value_type not in _PLAIN else 0)
    return key, value


def decode_protobuf(raw: bytes) -> dict[str, Any]:
    """The object a protobuf request body carries, with its apiVersion and kind."""
    if not raw.startswith(_MAGIC):
        raise _bad("no k8s envelope")
    envelope = {n: v for n, _w, v in _Reader(raw[len(_MAGIC) :]).fields()}
    type_meta = {n: bytes(v).decode() for n, _w, v in _Reader(envelope.get(1, b"")).fields()}
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    if not kind:
        raise _bad("Object 'Kind' is missing")
    kinds, _ = _table()
    message = kinds.get(f"{api_version}/{kind}")
    if message is None:
        raise ApiError(
            415,
            f"the sandbox decodes protobuf only for its built-in kinds, not {api_version} {kind}",
        )
    obj = _message(message, envelope.get(2, b""))
    if not isinstance(obj, dict):
        raise _bad(f"{kind} is not an object")
    out: dict[str, Any] = check_depth({"apiVersion": api_version, "kind": kind, **obj})
    return out
