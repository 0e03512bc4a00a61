"""RFC 6902 patches produced by admission: applying them reproduces the target exactly."""

from __future__ import annotations

from typing import Any

import jsonpatch
from hypothesis import given, settings, strategies as st

from batch.api.admission import json_patch

JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=4)),
    lambda c: st.one_of(
        st.lists(c, max_size=3),
        st.dictionaries(
            st.sampled_from(["a", "b", "x/y", "m~n", "", "volcano.sh/q"]), c, max_size=3
        ),
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(
    src=st.dictionaries(st.sampled_from(["a", "b/c", "~"]), JSON, max_size=3),
    dst=st.dictionaries(st.sampled_from(["a", "b/c", "~"]), JSON, max_size=3),
)
def test_patch_applies(src: dict[str, Any], dst: dict[str, Any]) -> None:
    assert jsonpatch.apply_patch(src, json_patch(src, dst)) == dst


def test_patch_escapes_and_types() -> None:
    src = {"metadata": {"annotations": {"volcano.sh/hierarchy": "a"}}, "n": 1, "l": [1, 2]}
    dst = {"metadata": {"annotations": {"volcano.sh/hierarchy": "root/a"}}, "n": True, "l": [1]}
    ops = json_patch(src, dst)
    assert {
        "op": "replace",
        "path": "/metadata/annotations/volcano.sh~1hierarchy",
        "value": "root/a",
    } in ops
    assert {"op": "replace", "path": "/n", "value": True} in ops  # 1 == True, but not the same JSON
    assert {"op": "replace", "path": "/l", "value": [1]} in ops
    assert json_patch(src, src) == []
