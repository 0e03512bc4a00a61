"""`tephra gang FILE...`: show the gang (PodGroup) Tephra derives for framework workloads.

Offline and read-only: every document of every file is handed to the adapters published under
the `tephra.integrations` entry points (PyTorchJob, MPIJob, RayCluster/RayJob, SparkApplication,
...), and the PodGroup the controller would create is printed (YAML, stdout), preceded by a
comment naming the adapter and, where it applies, the operator PodGroup Tephra would adopt and
the leader role. Documents no adapter handles are listed on stderr as skipped; a workload the
user got wrong is one line on stderr (`FILE:DOC Kind ns/name: field.path: rule`) and makes the
exit status 1. A directory stands for its *.yaml, *.yml and *.json files, as for `validate`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from batch.api.integration import (
    GangError,
    GangSpec,
    adapter_for_workload,
    load_adapters,
)
from batch.api.yamlio import FileInputError, dump_yaml, load_yaml_file, manifest_paths
from batch.controllers.gang import podgroup_manifest

# Kinds whose gangs belong to the objects their operator creates from them.
_INDIRECT = {
    "RayService": "its gangs are those of the RayClusters KubeRay creates from rayClusterConfig",
    "ScheduledSparkApplication": "each run is a SparkApplication made from spec.template",
}


def _describe(gang: GangSpec) -> list[str]:
    lines = [
        f"# {gang.workload.kind} {gang.namespace}/{gang.workload.name}: adapter {gang.adapter}"
    ]
    if gang.adopt_existing:
        lines.append(
            f"# the operator creates PodGroup {gang.existing_podgroup_name}: Tephra adopts it and "
            f"creates this one only if it is missing after {gang.adopt_grace_seconds:g}s"
        )
    if gang.leader_role is not None:
        lines.append(
            f"# leader {gang.leader_role}: minMember {gang.min_member} once a {gang.leader_role} "
            "pod runs (minResources covers the whole gang from the start)"
        )
    return lines


@click.command("gang")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--leader-running",
    is_flag=True,
    help="Show gangs with a leader role as they are once the leader runs.",
)
def gang(files: tuple[Path, ...], leader_running: bool) -> None:
    """Show the PodGroup Tephra derives for each framework workload in FILES."""
    adapters = load_adapters()
    failed = False
    out: list[str] = []
    for path in manifest_paths(str(f) for f in files):
        try:
            docs = load_yaml_file(path)
        except FileInputError as exc:
            click.echo(str(exc), err=True)
            failed = True
            continue
        for index, doc in enumerate(docs, start=1):
            if not isinstance(doc, dict):
                continue
            where = f"{path}:{index}"
            kind = f"{doc.get('apiVersion', '?')} {doc.get('kind', '?')}"
            adapter = adapter_for_workload(doc, adapters)
            if adapter is None or str(doc.get("kind")) in _INDIRECT:
                note = _INDIRECT.get(str(doc.get("kind")), "no adapter handles it")
                click.echo(f"{where}: skipped {kind} ({note})", err=True)
                continue
            try:
                found = adapter.gang_for_workload(_named(doc))
            except GangError as exc:
                click.echo(f"{where}: {exc}", err=True)
                failed = True
                continue
            if found is None:
                click.echo(
                    f"{where}: {kind}: no gang (suspended, another batch scheduler chosen, "
                    "or no pods to gang)",
                    err=True,
                )
                continue
            body = podgroup_manifest(found, leader_running=leader_running)
            out.append("\n".join([*_describe(found), dump_yaml(body).rstrip()]))
    if out:
        sys.stdout.write("---\n".join(text + "\n" for text in out))
    if failed:
        raise SystemExit(1)


def _named(doc: dict[str, Any]) -> dict[str, Any]:
    """A manifest with only generateName gets a placeholder name, as the API server would."""
    meta = doc.get("metadata")
    if isinstance(meta, dict) and not meta.get("name") and meta.get("generateName"):
        return {**doc, "metadata": {**meta, "name": f"{meta['generateName']}xxxxx"}}
    return doc
