"""Object metadata validation, as kube-apiserver's ValidateObjectMeta/ValidateObjectMetaUpdate.

Every kind, built-in or custom resource, goes through the same checks on create and on every
non-status write: label keys (qualified names: an optional DNS-1123 subdomain prefix of at most
253 characters, '/', then a name of at most 63 alphanumerics, '-', '_' or '.') and values (at most
63 of the same characters, or empty); annotation keys (qualified names) and their total size
(256 KiB); ownerReferences (apiVersion, kind, name and uid required, at most one controller);
finalizer names (qualified names, not both `orphan` and `foregroundDeletion`); and, on update, no
new finalizer while the object is being deleted. Problems come back as `Cause`s with Kubernetes'
field paths and messages (`metadata.labels: Invalid value: "...": must be no more than 63
bytes`). The same string checks serve the label selector parser.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from batch.sandbox.errors import ApiError, Cause

TOTAL_ANNOTATION_SIZE = 256 * 1024
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
SUBDOMAIN_MAX = 253

_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME = re.compile(f"^{_QNAME_FMT}$")
_LABEL_VALUE_FMT = f"({_QNAME_FMT})?"
_SUBDOMAIN_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SUBDOMAIN = re.compile(f"^{_SUBDOMAIN_FMT}$")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len(n: int, unit: str = "characters") -> str:
    """content.MaxLenError's wording: names count characters, qualified names and label values
    bytes (kube-apiserver 1.37)."""
    return f"must be no more than {n} {unit}"


_QNAME_MSG = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character",
    _QNAME_FMT,
    "MyName",
    "my.name",
    "123-abc",
)


@functools.lru_cache(maxsize=8192)
def subdomain_errors(value: str, unit: str = "characters") -> tuple[str, ...]:
    """IsDNS1123Subdomain."""
    errs: list[str] = []
    if len(value) > SUBDOMAIN_MAX:
        errs.append(_max_len(SUBDOMAIN_MAX, unit))
    if not _SUBDOMAIN.match(value):
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                _SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return tuple(errs)


@functools.lru_cache(maxsize=8192)
def qualified_name_errors(value: str) -> tuple[str, ...]:
    """IsQualifiedName: `[prefix/]name`, prefix a DNS-1123 subdomain, name at most 63 chars."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in subdomain_errors(prefix, "bytes"))
    else:
        return (
            "a qualified name "
            + _regex_error(
                "must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                "end with an alphanumeric character",
                _QNAME_FMT,
                "MyName",
                "my.name",
                "123-abc",
            )
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        )
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + _max_len(QUALIFIED_NAME_MAX, "bytes"))
    if not _QNAME.match(name):
        errs.append("name part " + _QNAME_MSG)
    return tuple(errs)


@functools.lru_cache(maxsize=8192)
def label_value_errors(value: str) -> tuple[str, ...]:
    """IsValidLabelValue: empty, or at most 63 alphanumerics, '-', '_', '.' (alnum at ends)."""
    errs: list[str] = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(_max_len(LABEL_VALUE_MAX, "bytes"))
    if value and not _QNAME.match(value):
        errs.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return tuple(errs)


def _quote(value: Any) -> str:
    text = str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def _required(field: str) -> Cause:
    return Cause(field, "FieldValueRequired", "Required value: must not be empty")


def _invalid(field: str, value: Any, msg: str) -> Cause:
    return Cause(field, "FieldValueInvalid", f"Invalid value: {_quote(value)}: {msg}")


def _decode_error(kind: str, what: str) -> ApiError:
    return ApiError(
        400,
        f"{kind} in version cannot be handled as a {kind}: json: cannot unmarshal {what}",
    )


def _string_map(kind: str, meta: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = meta.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _decode_error(kind, f"metadata.{key} into Go struct field of type map[string]string")
    for k, v in value.items():
        if not isinstance(v, str):
            raise _decode_error(
                kind,
                f"{type(v).__name__} into Go struct field ObjectMeta.metadata.{key} of type "
                f"string (key {k!r})",
            )
    return value


def _string_list(kind: str, meta: Mapping[str, Any], key: str) -> list[Any]:
    value = meta.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _decode_error(kind, f"metadata.{key} into Go struct field of type []string")
    return value


def object_meta_causes(meta: Mapping[str, Any], *, kind: str = "object") -> list[Cause]:
    """ValidateObjectMeta's labels, annotations, ownerReferences and finalizers checks.

    Raises a 400 ApiError for values a typed decoder could not read (a non-string label)."""
    causes: list[Cause] = []
    for k, v in _string_map(kind, meta, "labels").items():
        for msg in qualified_name_errors(k):
            causes.append(_invalid("metadata.labels", k, msg))
        for msg in label_value_errors(v):
            causes.append(_invalid("metadata.labels", v, msg))
    annotations = _string_map(kind, meta, "annotations")
    size = 0
    for k, v in annotations.items():
        for msg in qualified_name_errors(k.lower()):
            causes.append(_invalid("metadata.annotations", k, msg))
        size += len(k.encode()) + len(v.encode())
    if size > TOTAL_ANNOTATION_SIZE:
        causes.append(
            Cause(
                "metadata.annotations",
                "FieldValueTooLong",
                f"Too long: may not be more than {TOTAL_ANNOTATION_SIZE} bytes",
            )
        )
    refs = meta.get("ownerReferences")
    if refs is not None:
        if not isinstance(refs, list) or not all(isinstance(r, Mapping) for r in refs):
            raise _decode_error(kind, "metadata.ownerReferences into []v1.OwnerReference")
        causes.extend(_owner_reference_causes(refs))
    finalizers = _string_list(kind, meta, "finalizers")
    for i, f in enumerate(finalizers):
        errors = qualified_name_errors(f)
        for msg in errors:
            causes.append(_invalid("metadata.finalizers", f, msg))
        if "/" not in f and f not in _STANDARD_FINALIZERS:
            msg = "name is neither a standard finalizer name nor is it fully qualified"
            causes.append(_invalid(f"metadata.finalizers[{i}]", f, msg))
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        causes.append(
            Cause(
                "metadata.finalizers",
                "FieldValueInvalid",
                "Invalid value: "
                + _quote(finalizers)
                + ": finalizer orphan and foregroundDeletion cannot be both set",
            )
        )
    return causes


def _group_version(api_version: str) -> tuple[str, str]:
    """schema.ParseGroupVersion; an unparseable string has an empty version."""
    slashes = api_version.count("/")
    if api_version == "/" or slashes > 1:
        return "", ""
    if slashes == 0:
        return "", api_version
    group, _, version = api_version.partition("/")
    return group, version


def _owner_reference_causes(refs: list[Mapping[str, Any]]) -> list[Cause]:
    causes: list[Cause] = []
    path = "metadata.ownerReferences"
    first_controller = ""
    for i, ref in enumerate(refs):
        api_version = str(ref.get("apiVersion") or "")
        kind = str(ref.get("kind") or "")
        group, version = _group_version(api_version)
        if api_version and not version:
            causes.append(_invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        # kube-apiserver 1.37: each missing field is Required at its indexed path
        for key, value in (("apiVersion", api_version), ("kind", kind)):
            if not value:
                causes.append(_required(f"{path}[{i}].{key}"))
        for key in ("name", "uid"):
            if not ref.get(key):
                causes.append(_required(f"{path}[{i}].{key}"))
        if group == "" and version == "v1" and kind == "Event":
            causes.append(_invalid(path, kind, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            current = f"{kind}/{ref.get('name') or ''}"
            if first_controller:
                causes.append(
                    Cause(
                        path,
                        "FieldValueInvalid",
                        "Invalid value: []v1.OwnerReference: Only one reference can have "
                        f'Controller set to true. Found "true" in references for '
                        f"{first_controller} and {current}",
                    )
                )
            else:
                first_controller = current
    return causes


def object_meta_update_causes(meta: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """ValidateObjectMetaUpdate's finalizer rule: none may be added once deletion started."""
    if not old.get("deletionTimestamp"):
        return []
    extra = sorted(
        {v for v in meta.get("finalizers") or [] if isinstance(v, str)}
        - set(old.get("finalizers") or [])
    )
    if not extra:
        return []
    shown = ", ".join(_quote(e) for e in extra)
    return [
        Cause(
            "metadata.finalizers",
            "FieldValueForbidden",
            "Forbidden: no new finalizers can be added if the object is being deleted, found "
            f"new finalizers []string{{{shown}}}",
        )
    ]


MICRO_TIME_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"  # metav1.RFC3339Micro
_MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")
# The MicroTime fields of the kinds that have them, as dotted paths.
MICRO_TIME_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Event"): ("eventTime", "series.lastObservedTime"),
    ("events.k8s.io", "Event"): ("eventTime", "series.lastObservedTime"),
    ("coordination.k8s.io", "Lease"): ("spec.acquireTime", "spec.renewTime"),
}


def check_micro_times(group: str, kind: str, api_version: str, obj: Mapping[str, Any]) -> None:
    """metav1.MicroTime decodes only RFC 3339 with six fractional digits: anything else is the
    400 kube-apiserver's decoder answers."""
    for path in MICRO_TIME_FIELDS.get((group, kind), ()):
        value: Any = obj
        for key in path.split("."):
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is None or (isinstance(value, str) and _MICRO_TIME.match(value)):
            continue
        version = api_version.rpartition("/")[2]
        raise ApiError(
            400,
            f'{kind} in version "{version}" cannot be handled as a {kind}: '
            f'parsing time "{value}" as "{MICRO_TIME_LAYOUT}"',
        )
