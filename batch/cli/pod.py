"""`tephra pod list`: vcctl's pod list, the pods of Volcano jobs.

Which pods, as vcctl chooses them: by default every pod a VCJob created (label
`volcano.sh/job-name`); `-j JOB` those of one job (and with `-q`, an error if they are not in
that queue); `-q QUEUE` those of the queue's jobs (label `volcano.sh/queue-name`) and any other
pod annotated `scheduling.volcano.sh/queue-name: QUEUE` (framework pods Tephra gangs). The
columns are the API server's own printing of pods (`as=Table`, what kubectl shows), under
vcctl's names: Name Ready Status Restart Age; `-o wide` adds the columns kubectl's wide adds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from batch.cli.kube import Kube, all_namespaces_option, fail, kube_options, namespace_option
from batch.cli.output import (
    Columns,
    by_namespace_name,
    output_option,
    print_listing,
    print_watched,
    watch_options,
)
from batch.kube.resource import RESOURCES

JOB_LABEL = "volcano.sh/job-name"
QUEUE_LABEL = "volcano.sh/queue-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
_TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
_VCCTL_NAMES = {"Restarts": "Restart"}


def _get(kube: Kube, namespace: str | None, selector: str, *, as_table: bool) -> dict[str, Any]:
    path = RESOURCES["Pod"].path(namespace=namespace)
    params = {"labelSelector": selector} if selector else {}
    accept = _TABLE if as_table else "application/json"
    body: dict[str, Any] = kube.call(
        "list pods", lambda: kube.rest.request("GET", path, params=params, accept=accept)
    )
    return body


def _meta(entry: Mapping[str, Any], as_table: bool) -> Mapping[str, Any]:
    obj = entry.get("object") if as_table else entry
    return (obj or {}).get("metadata") or {}


def _in_queue(meta: Mapping[str, Any], queue: str) -> bool:
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    return bool(labels.get(QUEUE_LABEL) == queue or annotations.get(QUEUE_ANNOTATION) == queue)


def _select(
    kube: Kube, namespace: str | None, job: str, queue: str, *, as_table: bool
) -> tuple[dict[str, Any], list[Any]]:
    """The listing and its entries (Table rows or pods) that vcctl's rules keep."""
    body = _get(kube, namespace, _selector(job, queue), as_table=as_table)
    entries = sorted(
        body.get("rows" if as_table else "items") or [],
        key=lambda e: by_namespace_name((e.get("object") or {}) if as_table else e),
    )
    if job and queue:
        for entry in entries:
            found = (_meta(entry, as_table).get("labels") or {}).get(QUEUE_LABEL)
            if found is not None and found != queue:
                fail(f"vcjob {job} does not match the queue {queue} (its pods are in {found})")
    return body, [e for e in entries if _kept(e, queue, as_table=as_table)]


def _selector(job: str, queue: str) -> str:
    return f"{JOB_LABEL}={job}" if job else ("" if queue else JOB_LABEL)


def _kept(entry: Mapping[str, Any], queue: str, *, as_table: bool) -> bool:
    return not queue or _in_queue(_meta(entry, as_table), queue)


class _PodTable:
    """The server's Table columns as vcctl names them (Namespace first with -A)."""

    def __init__(self, body: Mapping[str, Any], *, wide: bool, all_ns: bool) -> None:
        defs = body.get("columnDefinitions") or []
        self.keep = [i for i, d in enumerate(defs) if wide or int(d.get("priority") or 0) == 0]
        names = [str(defs[i].get("name")) for i in self.keep]
        self.headers = [
            *(["Namespace"] if all_ns else []),
            *(_VCCTL_NAMES.get(n, n) for n in names),
        ]
        self.all_ns = all_ns

    def cells(self, row: Mapping[str, Any]) -> list[Any]:
        values = [row["cells"][i] for i in self.keep]
        if self.all_ns:
            values.insert(0, _meta(row, True).get("namespace") or "")
        return ["<none>" if v in (None, "") else v for v in values]


@click.group("pod")
def pod() -> None:
    """List the pods of Volcano jobs (vcctl pod)."""


@pod.command("list")
@kube_options
@click.option("-j", "--job", default="", help="Only the pods of this job.")
@click.option("-q", "--queue", default="", help="Only the pods of this queue.")
@namespace_option
@all_namespaces_option
@output_option()
@watch_options
def pod_list(
    kubeconfig: Path | None,
    job: str,
    queue: str,
    namespace: str | None,
    all_namespaces: bool,
    output: str,
    watch: bool,
    request_timeout: int | None,
) -> None:
    """List the pods of Volcano jobs with vcctl's columns."""
    kube = Kube(kubeconfig)
    ns = None if all_namespaces else (namespace or kube.namespace)
    as_table = output in ("table", "wide")
    body, entries = _select(kube, ns, job, queue, as_table=as_table)
    shape = _PodTable(body, wide=output == "wide", all_ns=all_namespaces)
    columns = Columns(shape.headers, [shape.cells(r) for r in entries] if as_table else [])
    pods = [] if as_table else [{"apiVersion": "v1", "kind": "Pod", **p} for p in entries]
    print_listing(entries if as_table else pods, output, "pod", columns)
    if not watch:
        return
    version = str((body.get("metadata") or {}).get("resourceVersion") or "0")
    accept = _TABLE if as_table else "application/json"
    selector = {"labelSelector": _selector(job, queue)} if _selector(job, queue) else {}
    for _kind, obj in kube.watch(
        RESOURCES["Pod"], ns, version, request_timeout, accept=accept, **selector
    ):
        for entry in obj.get("rows") or [] if as_table else [{"kind": "Pod", **obj}]:
            if _kept(entry, queue, as_table=as_table):
                line = columns.line(shape.cells(entry)) if as_table else ""
                print_watched(entry, output, "pod", line, columns)
