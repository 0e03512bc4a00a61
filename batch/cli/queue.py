"""`tephra queue`: vcctl's queue commands (create, list, get, operate, delete).

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
from batch.cli.job import BUS, SCHED, Kube, fail, kube_options, table
from batch.cli.output import dump, output_option, print_list

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


def _print(items: list[dict[str, Any]], output: str) -> None:
    if output in ("json", "yaml"):
        print_list(items, output)
        return
    wide = output == "wide"
    headers = [*_HEADERS, *(_WIDE if wide else [])]
    click.echo(table(headers, [_row(q, wide=wide) for q in items]))


@click.group("queue")
def queue() -> None:
    """Create and manage queues (vcctl queue)."""


@queue.command("create")
@kube_options
@click.option("-n", "--name", required=True)
@click.option("-w", "--weight", type=int, default=1, show_default=True)
@click.option(
    "-S", "--state", type=click.Choice(["Open", "Closed"]), default="Open", show_default=True
)
@click.option("-p", "--parent", default="", help="Parent queue (default root).")
@_command_namespace
def queue_create(
    kubeconfig: Path | None, name: str, weight: int, state: str, parent: str, command_namespace: str
) -> None:
    """Create a queue."""
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
    kube.call(
        f"create queue {name}", lambda: kube.co.create_cluster_custom_object(*SCHED, "queues", body)
    )
    if state == "Closed":
        _command(kube, name, "CloseQueue", command_namespace)
    click.echo(f"create queue {name} successfully")


@queue.command("delete")
@kube_options
@click.option("-n", "--name", required=True)
def queue_delete(kubeconfig: Path | None, name: str) -> None:
    """Delete a queue."""
    if name in ("root", "default"):
        fail(f"queue {name} cannot be deleted")
    kube = Kube(kubeconfig)
    kube.call(
        f"delete queue {name}", lambda: kube.co.delete_cluster_custom_object(*SCHED, "queues", name)
    )
    click.echo(f"delete queue {name} successfully")


def _command(kube: Kube, name: str, action: str, namespace: str) -> None:
    q = kube.get_or_none(lambda: kube.co.get_cluster_custom_object(*SCHED, "queues", name))
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
        lambda: kube.co.create_namespaced_custom_object(*BUS, namespace, "commands", body),
    )


@queue.command("operate")
@kube_options
@click.option("-n", "--name", required=True)
@click.option("-a", "--action", type=click.Choice(["open", "close", "update"]), required=True)
@click.option("-w", "--weight", type=int, default=0)
@_command_namespace
def queue_operate(
    kubeconfig: Path | None, name: str, action: str, weight: int, command_namespace: str
) -> None:
    """Open, close or update (weight) a queue."""
    kube = Kube(kubeconfig)
    if action == "update":
        if weight <= 0:
            fail(f"queue {name}: --weight must be > 0 for update")
        kube.call(
            f"update queue {name}",
            lambda: kube.co.patch_cluster_custom_object(
                *SCHED, "queues", name, {"spec": {"weight": weight}}
            ),
        )
    else:
        _command(kube, name, "OpenQueue" if action == "open" else "CloseQueue", command_namespace)
    click.echo(f"{action} queue {name} successfully")


@queue.command("list")
@kube_options
@output_option()
def queue_list(kubeconfig: Path | None, output: str) -> None:
    """List queues with vcctl's columns (-o wide adds Reclaimable, Allocated, Capability)."""
    kube = Kube(kubeconfig)
    items = kube.call("list queues", lambda: kube.co.list_cluster_custom_object(*SCHED, "queues"))[
        "items"
    ]
    items = sorted(items, key=lambda q: q["metadata"]["name"])
    if not items and output in ("table", "wide"):
        click.echo("No resources found")
        return
    _print(items, output)


@queue.command("get")
@kube_options
@click.option("-n", "--name", required=True)
@output_option()
def queue_get(kubeconfig: Path | None, name: str, output: str) -> None:
    """Show one queue (-o json|yaml: the Queue object)."""
    kube = Kube(kubeconfig)
    q = kube.get_or_none(lambda: kube.co.get_cluster_custom_object(*SCHED, "queues", name))
    if q is None:
        fail(f"queue {name} not found")
    if output in ("json", "yaml"):
        click.echo(dump(q, output))
        return
    _print([q], output)
