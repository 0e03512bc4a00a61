"""RFC 7386 merge patches: the patch computed from two documents turns one into the other."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from batch.api.mergepatch import apply_merge_patch, merge_patch

# Merge patches cannot express a null value (null means "remove"), so documents hold none.
JSON = st.recursive(
    st.one_of(st.booleans(), st.integers(), st.text(max_size=4)),
    lambda c: st.one_of(
        st.lists(c, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "nvidia.com/gpu"]), c, max_size=3),
    ),
    max_leaves=20,
)
DOCS = st.dictionaries(st.sampled_from(["allocated", "phase", "taskStatusCount"]), JSON)


@settings(max_examples=200, deadline=None)
@given(old=DOCS, new=DOCS)
def test_patch_turns_old_into_new(old: dict[str, Any], new: dict[str, Any]) -> None:
    assert apply_merge_patch(old, merge_patch(old, new) or {}) == new


def test_a_key_that_left_a_nested_map_is_removed() -> None:
    old = {"taskStatusCount": {"worker": {"phase": {"Running": 2}}}}
    new = {"taskStatusCount": {"worker": {"phase": {"Succeeded": 2}}}}
    patch = merge_patch(old, new)
    assert patch == {"taskStatusCount": {"worker": {"phase": {"Running": None, "Succeeded": 2}}}}
    assert merge_patch(new, new) is None


def test_apply_leaves_its_target_untouched() -> None:
    target = {"allocated": {"cpu": "1", "nvidia.com/gpu": "2"}}
    assert apply_merge_patch(target, {"allocated": {"nvidia.com/gpu": None}}) == {
        "allocated": {"cpu": "1"}
    }
    assert target == {"allocated": {"cpu": "1", "nvidia.com/gpu": "2"}}
