"""Structural-schema handling for custom resources, as kube-apiserver does it.

On every write of a custom resource: unknown fields are pruned (unless
`x-kubernetes-preserve-unknown-fields`), `default`s are applied, and the object is validated
against the version's `openAPIV3Schema` (types, required, enum, numeric and length bounds,
patterns, item/property counts). CEL rules (`x-kubernetes-validations`) are not evaluated.
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from typing import Any

from batch.sandbox.errors import Cause

_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def prune_and_default(obj: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Drop unknown fields and fill defaults, in place (obj must be a private copy); returns the
    dropped fields' paths as kube-apiserver names them (`spec.tasks[0].bogus`)."""
    pruned: list[str] = []
    _walk(obj, schema, "", pruned, root=True)
    return pruned


def unknown_fields(obj: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """The fields `fieldValidation=Strict` refuses: those pruning would drop."""
    return prune_and_default(copy.deepcopy(obj), schema)


def _walk(
    value: Any, schema: dict[str, Any], path: str, pruned: list[str], *, root: bool = False
) -> None:
    if isinstance(value, dict):
        props = schema.get("properties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
        addl = schema.get("additionalProperties")
        embedded = schema.get("x-kubernetes-embedded-resource") is True
        if props is not None or addl is not None or not preserve:
            for key in list(value):
                if (root or embedded) and key in _ROOT_KEEP:
                    continue
                sub = props.get(key) if props else None
                here = f"{path}.{key}" if path else key
                if sub is not None:
                    _walk(value[key], sub, here, pruned)
                elif isinstance(addl, dict):
                    _walk(value[key], addl, here, pruned)
                elif addl is True or preserve:
                    continue
                else:
                    pruned.append(here)
                    del value[key]
        if props:
            for key, sub in props.items():
                if key not in value and "default" in sub:
                    value[key] = copy.deepcopy(sub["default"])
                    _walk(value[key], sub, f"{path}.{key}" if path else key, [])
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _walk(item, items, f"{path}[{i}]", pruned)


_TYPE_NAMES = {
    "object": "object",
    "array": "array",
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
}


def _type_ok(value: Any, typ: str) -> bool:
    if typ == "object":
        return isinstance(value, dict)
    if typ == "array":
        return isinstance(value, list)
    if typ == "string":
        return isinstance(value, str)
    if typ == "boolean":
        return isinstance(value, bool)
    if typ == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if typ == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return True


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return repr(value).lower() if isinstance(value, bool) else repr(value)


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def validate(value: Any, schema: dict[str, Any], path: str = "") -> list[Cause]:
    """Schema violations of value, each a 422 cause naming the field path."""
    causes: list[Cause] = []
    _validate(value, schema, path, causes, root=True)
    return causes


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _validate(
    value: Any, schema: dict[str, Any], path: str, causes: list[Cause], *, root: bool = False
) -> None:
    where = path or "<root>"
    if value is None:
        if not (schema.get("nullable") or root):
            causes.append(Cause(where, "FieldValueRequired", "Required value"))
        return
    wrong_type = _type_cause(value, schema, where)
    if wrong_type is not None:
        causes.append(wrong_type)
        return
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        allowed = ", ".join(f'"{e}"' if isinstance(e, str) else str(e) for e in enum)
        causes.append(
            Cause(
                where,
                "FieldValueNotSupported",
                f"Unsupported value: {_show(value)}: supported values: {allowed}",
            )
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        _bounds(value, schema, where, causes)
    if isinstance(value, str):
        _string(value, schema, where, causes)
    if isinstance(value, list):
        _array(value, schema, path, causes)
    if isinstance(value, dict):
        _object(value, schema, path, causes, root=root)
    _combinators(value, schema, path, causes)


def _type_cause(value: Any, schema: dict[str, Any], where: str) -> Cause | None:
    """The cause when value is not of the schema's type (then nothing else is checked)."""
    if schema.get("x-kubernetes-int-or-string") is True:
        if isinstance(value, str) or _type_ok(value, "integer"):
            return None
        return Cause(
            where,
            "FieldValueTypeInvalid",
            f"Invalid value: {_show(value)}: {where} in body must be of type integer or string",
        )
    typ = schema.get("type")
    if not typ or _type_ok(value, typ):
        return None
    return Cause(
        where,
        "FieldValueTypeInvalid",
        f"Invalid value: {_show(value)}: {where} in body must be of type {typ}: "
        f'"{_describe(value)}"',
    )


def _string(value: str, schema: dict[str, Any], where: str, causes: list[Cause]) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        causes.append(
            Cause(
                where,
                "FieldValueInvalid",
                f"Invalid value: {_show(value)}: {where} in body should be at least "
                f"{schema['minLength']} chars long",
            )
        )
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        causes.append(
            Cause(
                where,
                "FieldValueTooLong",
                f"Too long: {where} may not be more than {schema['maxLength']} bytes",
            )
        )
    pat = schema.get("pattern")
    if pat and not _regex(pat).search(value):
        causes.append(
            Cause(
                where,
                "FieldValueInvalid",
                f"Invalid value: {_show(value)}: {where} in body should match '{pat}'",
            )
        )


def _array(value: list[Any], schema: dict[str, Any], path: str, causes: list[Cause]) -> None:
    where = path or "<root>"
    if "minItems" in schema and len(value) < schema["minItems"]:
        causes.append(
            Cause(
                where,
                "FieldValueInvalid",
                f"Invalid value: {len(value)}: {where} in body should have at least "
                f"{schema['minItems']} items",
            )
        )
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        causes.append(
            Cause(
                where,
                "FieldValueTooMany",
                f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
            )
        )
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", causes)


def _object(
    value: dict[str, Any], schema: dict[str, Any], path: str, causes: list[Cause], *, root: bool
) -> None:
    where = path or "<root>"
    for req in schema.get("required") or []:
        if req not in value:
            causes.append(Cause(_join(path, req), "FieldValueRequired", "Required value"))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        causes.append(
            Cause(
                where,
                "FieldValueInvalid",
                f"{where} in body should have at least {schema['minProperties']} properties",
            )
        )
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        causes.append(
            Cause(
                where,
                "FieldValueTooMany",
                f"{where} in body should have at most {schema['maxProperties']} properties",
            )
        )
    props = schema.get("properties") or {}
    addl = schema.get("additionalProperties")
    for key, sub in value.items():
        if root and key in ("apiVersion", "kind", "metadata"):
            continue
        if key in props:
            _validate(sub, props[key], _join(path, key), causes)
        elif isinstance(addl, dict):
            _validate(sub, addl, _join(path, key), causes)


def _combinators(value: Any, schema: dict[str, Any], path: str, causes: list[Cause]) -> None:
    """allOf, anyOf and oneOf."""
    where = path or "<root>"
    for sub in schema.get("allOf") or []:
        _validate(value, sub, path, causes)
    any_of = schema.get("anyOf")
    if any_of and not any(not validate(value, s, path) for s in any_of):
        causes.append(Cause(where, "FieldValueInvalid", f"{where} must match at least one schema"))
    one_of = schema.get("oneOf")
    if one_of and sum(1 for s in one_of if not validate(value, s, path)) != 1:
        causes.append(Cause(where, "FieldValueInvalid", f"{where} must match exactly one schema"))


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _bounds(value: float, schema: dict[str, Any], where: str, causes: list[Cause]) -> None:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if lo is not None:
        if schema.get("exclusiveMinimum") is True and value <= lo:
            causes.append(
                Cause(
                    where,
                    "FieldValueInvalid",
                    f"Invalid value: {value}: {where} in body should be greater than {lo}",
                )
            )
        elif value < lo:
            causes.append(
                Cause(
                    where,
                    "FieldValueInvalid",
                    f"Invalid value: {value}: "
                    f"{where} in body should be greater than or equal to {lo}",
                )
            )
    if hi is not None:
        if schema.get("exclusiveMaximum") is True and value >= hi:
            causes.append(
                Cause(
                    where,
                    "FieldValueInvalid",
                    f"Invalid value: {value}: {where} in body should be less than {hi}",
                )
            )
        elif value > hi:
            causes.append(
                Cause(
                    where,
                    "FieldValueInvalid",
                    f"Invalid value: {value}: {where} in body should be less than or equal to {hi}",
                )
            )
