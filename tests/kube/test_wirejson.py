"""batch.kube.wirejson: the API server's JSON decoded exactly as json.loads decodes it."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, strategies as st

from batch.kube.wirejson import decode_json

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(VALUES, st.booleans())
def test_any_json_value_decodes_as_json_loads_does(value: Any, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only)
    assert decode_json(raw.encode()) == json.loads(raw)
    assert decode_json(raw) == json.loads(raw)


@pytest.mark.parametrize("raw", [b'"\\ud800"', b"NaN", b"[Infinity]", b"1e400", b'{"a": -1e999}'])
def test_what_the_fast_decoder_refuses_is_json_loads_answer(raw: bytes) -> None:
    got, want = decode_json(raw), json.loads(raw)
    if isinstance(want, float) and math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == want and type(got) is type(want)


@pytest.mark.parametrize("raw", [b"", b"{", b'{"a": }', b"\xff"])
def test_malformed_json_raises_json_loads_error(raw: bytes) -> None:
    with pytest.raises(ValueError):
        decode_json(raw)
