"""Protobuf request bodies (what kubectl's typed generators send), decoded by the sandbox."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from batch.sandbox.errors import ApiError
from batch.sandbox.protobuf import decode_protobuf
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return b"k8s\x00" + _field(1, type_meta) + _field(2, raw)


def test_a_priority_class_by_hand() -> None:
    meta = _field(1, b"hi") + _field(11, _field(1, b"team") + _field(2, b"a"))
    raw = _field(1, meta) + _field(2, (1 << 64) - 5) + _field(3, 0) + _field(4, b"")
    obj = decode_protobuf(_envelope("scheduling.k8s.io/v1", "PriorityClass", raw))
    assert obj == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "hi", "labels": {"team": "a"}},
        "value": -5,  # negative int32 as ten-byte varint
        "globalDefault": False,
    }


@pytest.mark.parametrize(
    "body",
    [
        b"not protobuf",
        b"k8s\x00\x0a\xff",  # truncated length
        _envelope("v1", "Namespace", b"\x0a\x05ab"),  # field shorter than its length
        _envelope("v1", "Namespace", b"\x0f"),  # wire type 7
    ],
)
def test_garbage_is_a_400(body: bytes) -> None:
    with pytest.raises(ApiError) as err:
        decode_protobuf(body)
    assert err.value.code == 400


def test_a_kind_without_a_table_is_a_415() -> None:
    with pytest.raises(ApiError) as err:
        decode_protobuf(_envelope("example.com/v1", "Thing", b""))
    assert err.value.code == 415


def _proto_cache() -> Path | None:
    go = shutil.which("go")
    if go is None:
        return None
    cache = Path(subprocess.check_output([go, "env", "GOMODCACHE"], text=True).strip())
    return cache if (cache / "k8s.io" / "api@v0.37.2").is_dir() else None


def test_the_table_is_what_the_generator_makes() -> None:
    """batch/sandbox/proto_fields.json is generated from Kubernetes' generated.proto files in
    the Go module cache that the control-plane build fills."""
    cache = _proto_cache()
    if cache is None:
        pytest.skip("no Go module cache with k8s.io/api@v0.37.2 (scripts/build-kube.sh fills it)")
    gen = load_script(ROOT / "scripts" / "gen-sandbox-proto.py", "gen")
    messages: dict[str, list[list[object]]] = {}
    for module in gen.MODULES:
        for proto in sorted((cache / module).rglob("generated.proto")):
            gen.parse(proto, messages)
    table = json.loads((ROOT / "batch" / "sandbox" / "proto_fields.json").read_text())
    for name, fields in table["messages"].items():
        assert sorted(messages[name]) == fields, name


def test_encoding_is_the_decoders_inverse_for_bindings_and_events() -> None:
    """What Tephra's scheduler sends as protobuf (batch.kube.protobuf): the decoder, checked
    against kubectl above, reads back the object that was encoded."""
    from batch.api.events import event_body, object_reference
    from batch.kube.protobuf import encode_protobuf

    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"a": "b"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    involved = object_reference(api_version="v1", kind="Pod", namespace="ns", name="p", uid="u")
    event = event_body(
        involved,
        reason="Scheduled",
        message="Successfully assigned ns/p to n1",
        type="Normal",
        component="tephra-scheduler",
        stamp="2026-12-06T18:00:00Z",
    )
    for obj in (binding, event):
        assert decode_protobuf(encode_protobuf(obj)) == obj
    raw = encode_protobuf(binding)
    assert raw.startswith(b"k8s\x00") and b"n1" in raw
