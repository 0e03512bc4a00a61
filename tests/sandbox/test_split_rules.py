"""Pins of the sandbox rules split into steps (issue 16, item 3): pod update validation,
strategic merge patch and the CRD schema validator, branch by branch."""

from __future__ import annotations

from typing import Any

import pytest

from batch.sandbox import defaults, schema
from batch.sandbox.errors import Cause
from batch.sandbox.patch import strategic_merge_patch


def _fields(causes: list[Cause]) -> list[tuple[str, str]]:
    return [(c.field, c.reason) for c in causes]


def _spec(**extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "busybox"}], **extra}


def test_pod_update_same_spec_is_allowed() -> None:
    assert defaults.pod_update_causes(_spec(), _spec()) == []


def test_pod_update_container_count_is_the_only_cause() -> None:
    new = {"containers": [{"name": "c", "image": " bad"}], "initContainers": [{"name": "i"}]}
    causes = defaults.pod_update_causes(new, _spec())
    assert _fields(causes) == [("spec.initContainers", "FieldValueForbidden")]


def test_pod_update_images_then_spec() -> None:
    new = {
        "containers": [{"name": "c", "image": ""}],
        "initContainers": [{"name": "i", "image": "x "}],
    }
    old = {**_spec(), "initContainers": [{"name": "i", "image": "x"}]}
    assert _fields(defaults.pod_update_causes(new, old)) == [
        ("spec.containers[0].image", "FieldValueRequired"),
        ("spec.initContainers[0].image", "FieldValueInvalid"),
    ]


@pytest.mark.parametrize(
    ("new", "old", "message"),
    [
        (None, 5, "must not update from a positive integer to nil value"),
        (-1, None, "must be between 0 and 2147483647"),
        ("5", None, "must be between 0 and 2147483647"),
        (9, 5, "must be less than or equal to previous value"),
        (3, 5, None),
        (7, None, None),
    ],
)
def test_pod_update_active_deadline(new: Any, old: Any, message: str | None) -> None:
    new_spec = _spec() if new is None else _spec(activeDeadlineSeconds=new)
    old_spec = _spec() if old is None else _spec(activeDeadlineSeconds=old)
    causes = defaults.pod_update_causes(new_spec, old_spec)
    if message is None:
        assert causes == []
    else:
        assert [c.field for c in causes] == ["spec.activeDeadlineSeconds"]
        assert message in causes[0].message


def test_pod_update_tolerations_gates_and_other_fields() -> None:
    old = _spec(
        tolerations=[{"key": "a", "operator": "Exists"}],
        schedulingGates=[{"name": "g"}],
    )
    new = _spec(
        tolerations=[{"key": "b", "operator": "Exists"}],
        schedulingGates=[{"name": "g"}, {"name": "h"}],
        hostname="x",
    )
    assert _fields(defaults.pod_update_causes(new, old)) == [
        ("spec.tolerations", "FieldValueForbidden"),
        ("spec.schedulingGates[1].name", "FieldValueForbidden"),
        ("spec", "FieldValueForbidden"),
    ]


def test_pod_update_may_lower_grace_of_a_negative_one() -> None:
    old = _spec(terminationGracePeriodSeconds=-1)
    assert defaults.pod_update_causes(_spec(terminationGracePeriodSeconds=1), old) == []


def test_strategic_merge_patch_each_kind_of_key() -> None:
    target = {
        "keep": 1,
        "gone": 2,
        "nested": {"a": 1, "b": 2},
        "drop": {"x": 1},
        "containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}],
        "finalizers": ["f1"],
        "args": ["x", "y"],
        "tags": ["t1", "t2"],
    }
    patch = {
        "$setElementOrder/containers": [{"name": "b"}],
        "$retainKeys": ["keep"],
        "gone": None,
        "nested": {"b": None, "c": {"$patch": "replace", "d": 4}},
        "drop": {"$patch": "delete"},
        "containers": [{"name": "b", "image": "3"}, {"name": "c", "$patch": "merge"}],
        "finalizers": ["f2", "f1"],
        "$deleteFromPrimitiveList/tags": ["t1"],
        "args": ["z", {"$patch": "merge", "k": 1}],
    }
    assert strategic_merge_patch(target, patch) == {
        "keep": 1,
        "nested": {"a": 1, "c": {"d": 4}},
        "containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "3"}, {"name": "c"}],
        "finalizers": ["f1", "f2"],
        "args": ["z", {"k": 1}],
        "tags": ["t2"],
    }
    assert target["finalizers"] == ["f1"]


def test_strategic_merge_patch_primitive_list_without_current_is_replaced() -> None:
    assert strategic_merge_patch({}, {"finalizers": ["f"]}) == {"finalizers": ["f"]}
    assert strategic_merge_patch({"tags": 1}, {"$deleteFromPrimitiveList/tags": ["t"]}) == {
        "tags": 1
    }


_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": {
            "type": "object",
            "minProperties": 2,
            "maxProperties": 4,
            "properties": {
                "name": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-z]+$"},
                "mode": {"type": "string", "enum": ["a", 1]},
                "size": {"x-kubernetes-int-or-string": True},
                "count": {"type": "integer", "minimum": 1, "maximum": 3},
                "items": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 2,
                    "items": {"type": "integer"},
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "opt": {"type": "string", "nullable": True},
                "req": {"type": "string"},
                "all": {"allOf": [{"type": "integer"}, {"minimum": 5}]},
                "any": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
                "one": {"oneOf": [{"type": "integer"}, {"minimum": 0}]},
            },
        }
    },
}


def test_schema_validate_accepts_a_good_object() -> None:
    good = {"apiVersion": 1, "kind": 2, "metadata": 3, "spec": {"name": "ab", "size": "1Gi"}}
    assert schema.validate(good, _SCHEMA) == []
    assert schema.validate(None, _SCHEMA) == []


def test_schema_validate_each_rule() -> None:
    bad = {
        "spec": {
            "name": "ABCD",
            "mode": "b",
            "size": 1.5,
            "count": 0,
            "items": [1, "x", 3],
            "labels": {"k": 1},
            "opt": None,
            "req": None,
            "all": 2,
            "any": "s",
            "one": 1,
        },
        "other": [],
    }
    assert _fields(schema.validate(bad, _SCHEMA)) == [
        ("spec", "FieldValueTooMany"),
        ("spec.name", "FieldValueTooLong"),
        ("spec.name", "FieldValueInvalid"),
        ("spec.mode", "FieldValueNotSupported"),
        ("spec.size", "FieldValueTypeInvalid"),
        ("spec.count", "FieldValueInvalid"),
        ("spec.items", "FieldValueTooMany"),
        ("spec.items[1]", "FieldValueTypeInvalid"),
        ("spec.labels.k", "FieldValueTypeInvalid"),
        ("spec.req", "FieldValueRequired"),
        ("spec.all", "FieldValueInvalid"),
        ("spec.any", "FieldValueInvalid"),
        ("spec.one", "FieldValueInvalid"),
    ]


def test_schema_validate_short_and_missing() -> None:
    assert _fields(schema.validate({"spec": {"name": "a"}}, _SCHEMA)) == [
        ("spec", "FieldValueInvalid"),
        ("spec.name", "FieldValueInvalid"),
    ]
    assert _fields(schema.validate({}, _SCHEMA)) == [("spec", "FieldValueRequired")]
    assert _fields(schema.validate([], _SCHEMA)) == [("<root>", "FieldValueTypeInvalid")]
    assert _fields(schema.validate({"spec": {"items": [], "count": 9}}, _SCHEMA)) == [
        ("spec.items", "FieldValueInvalid"),
        ("spec.count", "FieldValueInvalid"),
    ]
