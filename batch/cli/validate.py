"""`tephra validate FILE...`: offline defaulting and validation of Volcano/Tephra YAML.

Runs exactly the admission the API server runs (`batch.api.admission.admit`, operation CREATE)
on every document of every file. Valid documents are printed defaulted (YAML, stdout); each
error is one line on stderr: `FILE:DOC Kind ns/name: field.path: rule (message)` (DOC counts
documents from 1). Documents of kinds Tephra does not serve are listed as skipped. Queues are
assumed to exist, be Open and be leaves unless `--queues FILE` gives them (Queue and Namespace
documents; Queues defined in the validated files count too). The size limits are the admission
defaults unless `--max-pods-per-job`/`--max-task-replicas` give the cluster's. A directory
argument means its *.yaml, *.yml and *.json files, recursively. Exit status 1 on any error.

Unknown fields are errors (rule `unknownField`), as `kubectl apply --validate=strict` makes
them: each field the kind's generated CRD schema does not declare, by path
(`spec.minAvaliable`), which the API server would otherwise drop without a word, and each
`metadata` field ObjectMeta does not have (`metadata.lables`). Pod templates
(`spec.tasks[*].template`) and other places the CRDs keep verbatim are checked against nothing,
and neither is a core `v1 Pod`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import click
import yaml

from batch.api.admission import (
    AdmissionLimits,
    AdmissionLookup,
    AssumeAllQueues,
    FieldError,
    StaticLookup,
    admit,
)
from batch.api.admission.common import object_ref
from batch.api.crdgen import openapi_schema
from batch.api.kinds import KindInfo, kind_for_object
from batch.api.meta import ObjectMeta
from batch.api.yamlio import (
    FileInputError,
    dump_yaml,
    iter_documents,
    manifest_paths,
    read_text_file,
    yaml_error_summary,
)
from batch.cli.limits import limit_options
from batch.sandbox.schema import unknown_fields


@dataclass
class _Doc:
    source: str
    index: int
    obj: Any


@dataclass
class _Loaded:
    docs: list[_Doc] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _load(path: str) -> _Loaded:
    loaded = _Loaded()
    try:
        text = read_text_file(path) if path != "-" else sys.stdin.read()
    except FileInputError as exc:
        loaded.problems.append(str(exc))
        return loaded
    index = 0
    try:
        for obj in iter_documents(text):
            index += 1
            if obj is not None:
                loaded.docs.append(_Doc(path, index, obj))
    except yaml.YAMLError as exc:
        loaded.problems.append(f"{path}:{index + 1} invalid YAML: {yaml_error_summary(exc)}")
    return loaded


def _describe(obj: Any) -> str:
    if not isinstance(obj, Mapping):
        return f"a {type(obj).__name__}, not a Kubernetes object"
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return "no apiVersion/kind, not a Kubernetes object"
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return f"{api_version} {kind}" + (f" {name}" if isinstance(name, str) else "")


def _lookup_from(path: str | None, extra_queues: list[Mapping[str, Any]]) -> AdmissionLookup | str:
    if path is None:
        return AssumeAllQueues()
    loaded = _load(path)
    if loaded.problems:
        return "; ".join(loaded.problems)
    queues = list(extra_queues)
    namespaces = []
    for doc in loaded.docs:
        if isinstance(doc.obj, Mapping) and doc.obj.get("kind") == "Queue":
            queues.append(doc.obj)
        elif isinstance(doc.obj, Mapping) and doc.obj.get("kind") == "Namespace":
            namespaces.append(doc.obj)
    return StaticLookup(queues, namespaces)


def _served_kind(obj: Any) -> str | None:
    """The admission kind of a document, or None when Tephra does not serve it."""
    if not isinstance(obj, Mapping):
        return None
    if obj.get("apiVersion") == "v1" and obj.get("kind") == "Pod":
        return "Pod"  # core pods: Volcano's pod webhook (jdb annotations)
    info = kind_for_object(obj)
    return info.kind if info else None


@cache
def _schema(info: KindInfo) -> dict[str, Any]:
    return openapi_schema(info)


#: ObjectMeta's fields (the CRD schemas say only `metadata: object`; the API server decodes it
#: as ObjectMeta, strictly under --validate=strict); selfLink is deprecated but still a field
_META_FIELDS = frozenset(
    {(f.alias or name) for name, f in ObjectMeta.model_fields.items()} | {"selfLink"}
)


def _unknown_metadata(obj: Mapping[str, Any]) -> list[str]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return []
    return [f"metadata.{key}" for key in meta if key not in _META_FIELDS]


def _unknown_field_errors(obj: Any) -> list[FieldError]:
    """What `--validate=strict` refuses: the fields the kind's CRD schema would prune."""
    info = kind_for_object(obj) if isinstance(obj, Mapping) else None
    if info is None or not isinstance(obj, dict):
        return []
    ref = object_ref(info.kind, obj, namespaced=info.scope == "Namespaced")
    return [
        FieldError(
            path=path,
            rule="unknownField",
            message=f'unknown field "{path}": not in the {info.kind} schema, '
            "so the API server would drop it",
            ref=ref,
        )
        for path in [*_unknown_metadata(obj), *unknown_fields(obj, _schema(info))]
    ]


@click.command("validate")
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--queues",
    "queues_file",
    default=None,
    metavar="FILE",
    help="YAML with the cluster's Queue (and Namespace) objects; default: every queue exists.",
)
@click.option("-q", "--quiet", is_flag=True, help="Do not print the defaulted objects.")
@limit_options
def validate(
    files: tuple[str, ...], queues_file: str | None, quiet: bool, limits: AdmissionLimits
) -> None:
    """Default and validate Volcano/Tephra objects offline, as admission would."""
    failures = 0
    loaded = [_load(f) for f in manifest_paths(files)]
    for item in loaded:
        for problem in item.problems:
            click.echo(problem, err=True)
            failures += 1
    docs = [d for item in loaded for d in item.docs]
    in_files = [
        d.obj
        for d in docs
        if isinstance(d.obj, Mapping) and (k := kind_for_object(d.obj)) and k.kind == "Queue"
    ]
    lookup = _lookup_from(queues_file, in_files)
    if isinstance(lookup, str):
        click.echo(f"--queues: {lookup}", err=True)
        raise SystemExit(1)
    valid = invalid = skipped = 0
    printed = 0
    for doc in docs:
        where = f"{doc.source}:{doc.index}"
        kind = _served_kind(doc.obj)
        if kind is None:
            skipped += 1
            click.echo(f"{where} skipped: {_describe(doc.obj)} (not served by Tephra)", err=True)
            continue
        result = admit(
            kind=kind, operation="CREATE", obj=doc.obj, old=None, lookup=lookup, limits=limits
        )
        errors = [*_unknown_field_errors(doc.obj), *result.errors]
        if errors:
            invalid += 1
            for err in errors:
                click.echo(f"{where} {err}", err=True)
            continue
        valid += 1
        if not quiet:
            if printed:
                click.echo("---")
            click.echo(f"# {where}")
            click.echo(dump_yaml(result.object), nl=False)
            printed += 1
    click.echo(
        f"{valid} valid, {invalid} invalid, {skipped} skipped"
        + (f", {failures} unreadable" if failures else ""),
        err=True,
    )
    if invalid or failures:
        raise SystemExit(1)
