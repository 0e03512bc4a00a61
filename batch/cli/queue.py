"""`tephra queue`: vcctl's queue commands (create, list, get, operate, delete).

The queue is named as kubectl names objects, `tephra queue get NAME`; vcctl's `--name NAME`
still works, and so does its `-n NAME`, with a deprecation warning: everywhere else `-n` is a
namespace, which queues do not have.

`operate -a open|close` creates an OpenQueue/CloseQueue bus Command that the queue controller
executes (in namespace `default`, as vcctl, or `--command-namespace`: where the controller takes
queue Commands from when it runs with `--queue-command-namespace`); `operate -a update -w W`
patches `spec.weight` (must be > 0). Columns follow vcctl, then Deserved: the cpu and GPUs the
scheduler's fair-share plugin last computed for the queue (the `tephra.io/fair-share`
annotation, `batch.api.fairshare`), `<none>` until it has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from batch.api.fairshare import read_fair_share
from batch.api.resources import CPU, GPU, format_resource_list
from batch.cli.kube import COMMAND, QUEUE, Kube, fail, kube_options, name_argument
from batch.cli.output import (
    Columns,
    by_namespace_name,
    dump,
    output_option,
    print_listing,
    print_watched,
    watch_options,
)

_HEADERS = [
    "Name",
    "Weight",
    "State",
    "Parent",
    "Inqueue",
    "Pending",
    "Running",
    "Unknown",
    "Completed",
    "Deserved",
]


_WIDE = ["EffWeight", "UsageShare", "Reclaimable", "Allocated", "Capability"]

_command_namespace = click.option(
    "--command-namespace",
    envvar="TEPHRA_QUEUE_COMMAND_NAMESPACE",
    default="default",
    show_default=True,
    help="Namespace of the open/close Command (the controller's --queue-command-namespace).",
)


def _resources(amounts: Any) -> str:
    if not isinstance(amounts, dict) or not amounts:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(amounts.items()))


def _deserved(q: dict[str, Any]) -> str:
    """The cpu and GPUs the scheduler says the queue deserves, in Kubernetes form."""
    published = read_fair_share(q)
    if published is None:
        return "<none>"
    shown = {k: v for k, v in published.deserved.items() if k in (CPU, GPU)}
    return _resources(format_resource_list(shown))


def _usage(q: dict[str, Any]) -> list[str]:
    """The usage-decayed weight and usage share the scheduler published (usageHalfLife)."""
    published = read_fair_share(q)
    got = (published.effective_weight, published.usage_share) if published else (None, None)
    return ["<none>" if v is None else f"{v:.3g}" for v in got]


def _row(q: dict[str, Any], *, wide: bool = False) -> list[Any]:
    spec, st = q.get("spec") or {}, q.get("status") or {}
    name = q["metadata"]["name"]
    parent = spec.get("parent") or ("" if name == "root" else "root")
    extra = [
        *_usage(q),
        str(spec.get("reclaimable", True)).lower(),
        _resources(st.get("allocated")),
        _resources(spec.get("capability")),
    ]
    return [
        name,
        spec.get("weight", 1),
        st.get("state", ""),
        parent,
        st.get("inqueue", 0),
        st.get("pending", 0),
        st.get("running", 0),
        st.get("unknown", 0),
        st.get("completed", 0),
        _deserved(q),
        *(extra if wide else []),
    ]


#: `kubectl get -o name`'s spelling of a Queue
QUEUE_RESOURCE = "queue.scheduling.volcano.sh"


def _columns(items: list[dict[str, Any]], output: str) -> Columns:
    wide = output == "wide"
    headers = [*_HEADERS, *(_WIDE if wide else [])]
    return Columns(headers, [_row(q, wide=wide) for q in items])


@click.group("queue")
def queue() -> None:
    """Create and manage queues (vcctl queue)."""


@queue.command("create")
@kube_options
@name_argument(QUEUE, vcctl_n=True)
@click.option("-w", "--weight", type=int, default=1, show_default=True)
@click.option(
    "-S", "--state", type=click.Choice(["Open", "Closed"]), default="Open", show_default=True
)
@click.option("-p", "--parent", default="", help="Parent queue (default root).")
@_command_namespace
def queue_create(
    kubeconfig: Path | None, name: str, weight: int, state: str, parent: str, command_namespace: str
) -> None:
    """Create queue NAME."""
    if weight < 1:
        fail(f"queue {name}: spec.weight: must be >= 1 (got {weight})")
    kube = Kube(kubeconfig)
    spec: dict[str, Any] = {"weight": weight}
    if parent:
        spec["parent"] = parent
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"state": state},
    }
    kube.call(f"create queue {name}", lambda: kube.rest.create(QUEUE, body))
    if state == "Closed":
        _command(kube, name, "CloseQueue", command_namespace)
    click.echo(f"create queue {name} successfully")


@queue.command("delete")
@kube_options
@name_argument(QUEUE, vcctl_n=True)
def queue_delete(kubeconfig: Path | None, name: str) -> None:
    """Delete queue NAME."""
    if name in ("root", "default"):
        fail(f"queue {name} cannot be deleted")
    kube = Kube(kubeconfig)
    kube.call(f"delete queue {name}", lambda: kube.rest.delete(QUEUE, name))
    click.echo(f"delete queue {name} successfully")


def _command(kube: Kube, name: str, action: str, namespace: str) -> None:
    q = kube.get(QUEUE, name)
    if q is None:
        fail(f"queue {name} not found")
    target = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "name": name,
        "uid": q["metadata"].get("uid"),
    }
    body = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"generateName": f"{name}-{action.lower()}-", "namespace": namespace},
        "action": action,
        "target": target,
    }
    kube.call(
        f"create {action} command",
        lambda: kube.rest.create(COMMAND, body, namespace),
    )


@queue.command("operate")
@kube_options
@name_argument(QUEUE, vcctl_n=True)
@click.option("-a", "--action", type=click.Choice(["open", "close", "update"]), required=True)
@click.option("-w", "--weight", type=int, default=0)
@_command_namespace
def queue_operate(
    kubeconfig: Path | None, name: str, action: str, weight: int, command_namespace: str
) -> None:
    """Open, close or update (weight) queue NAME."""
    kube = Kube(kubeconfig)
    if action == "update":
        if weight <= 0:
            fail(f"queue {name}: --weight must be > 0 for update")
        kube.call(
            f"update queue {name}",
            lambda: kube.rest.patch(QUEUE, name, {"spec": {"weight": weight}}),
        )
    else:
        _command(kube, name, "OpenQueue" if action == "open" else "CloseQueue", command_namespace)
    click.echo(f"{action} queue {name} successfully")


@queue.command("list")
@kube_options
@output_option()
@watch_options
def queue_list(
    kubeconfig: Path | None, output: str, watch: bool, request_timeout: int | None
) -> None:
    """List queues with vcctl's columns (-o wide adds Reclaimable, Allocated, Capability)."""
    kube = Kube(kubeconfig)
    listing = kube.items(QUEUE)
    items = sorted(listing["items"], key=by_namespace_name)
    columns = print_listing(items, output, QUEUE_RESOURCE, _columns(items, output))
    if not watch:
        return
    version = str((listing.get("metadata") or {}).get("resourceVersion") or "0")
    for _kind, q in kube.watch(QUEUE, None, version, request_timeout):
        line = columns.line(_row(q, wide=output == "wide"))
        print_watched(q, output, QUEUE_RESOURCE, line, columns)


@queue.command("get")
@kube_options
@name_argument(QUEUE, vcctl_n=True)
@output_option()
def queue_get(kubeconfig: Path | None, name: str, output: str) -> None:
    """Show queue NAME (-o json|yaml: the Queue object, -o name: its name)."""
    kube = Kube(kubeconfig)
    q = kube.get(QUEUE, name)
    if q is None:
        fail(f"queue {name} not found")
    if output in ("json", "yaml"):
        click.echo(dump(q, output))
        return
    print_listing([q], output, QUEUE_RESOURCE, _columns([q], output))
