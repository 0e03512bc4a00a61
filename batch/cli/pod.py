"""`tephra pod list`: vcctl's pod list, the pods of Volcano jobs.

Which pods, as vcctl chooses them: by default every pod a VCJob created (label
`volcano.sh/job-name`); `-j JOB` those of one job (and with `-q`, an error if they are not in
that queue); `-q QUEUE` those of the queue's jobs (label `volcano.sh/queue-name`) and any other
pod annotated `scheduling.volcano.sh/queue-name: QUEUE` (framework pods Tephra gangs). The
columns are the API server's own printing of pods (`as=Table`, what kubectl shows), under
vcctl's names: Name Ready Status Restart Age; `-o wide` adds the columns kubectl's wide adds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from batch.cli.kube import Kube, fail, kube_options, namespace_option, table
from batch.cli.output import output_option, print_list
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
    selector = f"{JOB_LABEL}={job}" if job else ("" if queue else JOB_LABEL)
    body = _get(kube, namespace, selector, as_table=as_table)
    entries = sorted(
        body.get("rows" if as_table else "items") or [],
        key=lambda e: (
            str(_meta(e, as_table).get("namespace")),
            str(_meta(e, as_table).get("name")),
        ),
    )
    if job and queue:
        for entry in entries:
            found = (_meta(entry, as_table).get("labels") or {}).get(QUEUE_LABEL)
            if found is not None and found != queue:
                fail(f"vcjob {job} does not match the queue {queue} (its pods are in {found})")
    elif queue:
        entries = [e for e in entries if _in_queue(_meta(e, as_table), queue)]
    return body, entries


def _columns(body: Mapping[str, Any], wide: bool) -> list[int]:
    defs = body.get("columnDefinitions") or []
    return [i for i, d in enumerate(defs) if wide or int(d.get("priority") or 0) == 0]


def _print_table(body: Mapping[str, Any], rows: Sequence[Any], *, wide: bool, all_ns: bool) -> None:
    defs = body.get("columnDefinitions") or []
    keep = _columns(body, wide)
    headers = [_VCCTL_NAMES.get(str(defs[i].get("name")), str(defs[i].get("name"))) for i in keep]
    cells = [[row["cells"][i] for i in keep] for row in rows]
    if all_ns:
        headers.insert(0, "Namespace")
        for line, row in zip(cells, rows, strict=True):
            line.insert(0, _meta(row, True).get("namespace") or "")
    click.echo(table(headers, [["<none>" if v in (None, "") else v for v in r] for r in cells]))


@click.group("pod")
def pod() -> None:
    """List the pods of Volcano jobs (vcctl pod)."""


@pod.command("list")
@kube_options
@click.option("-j", "--job", default="", help="Only the pods of this job.")
@click.option("-q", "--queue", default="", help="Only the pods of this queue.")
@namespace_option
@click.option("--all-namespaces", is_flag=True, help="List pods in every namespace.")
@output_option()
def pod_list(
    kubeconfig: Path | None,
    job: str,
    queue: str,
    namespace: str | None,
    all_namespaces: bool,
    output: str,
) -> None:
    """List the pods of Volcano jobs with vcctl's columns."""
    kube = Kube(kubeconfig)
    ns = None if all_namespaces else (namespace or kube.namespace)
    as_table = output in ("table", "wide")
    body, entries = _select(kube, ns, job, queue, as_table=as_table)
    if not as_table:
        print_list([{"apiVersion": "v1", "kind": "Pod", **p} for p in entries], output)
        return
    if not entries:
        click.echo("No resources found")
        return
    _print_table(body, entries, wide=output == "wide", all_ns=all_namespaces)
