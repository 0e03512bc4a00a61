"""The chart's CRDs are the generated ones (a byte-for-byte copy of crds/) and cover every kind.

Helm reads only files inside the chart, so charts/tephra/crds/ holds a copy of the repository's
crds/ (generated from batch.api by `make crds`); `scripts/sync-chart-crds.sh` refreshes it.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.charts.helmtools import CHART_DIR, REPO_ROOT

EXPECTED = {
    ("batch.volcano.sh", "Job", "v1alpha1", "Namespaced"),
    ("batch.volcano.sh", "CronJob", "v1alpha1", "Namespaced"),
    ("bus.volcano.sh", "Command", "v1alpha1", "Namespaced"),
    ("scheduling.volcano.sh", "PodGroup", "v1beta1", "Namespaced"),
    ("scheduling.volcano.sh", "Queue", "v1beta1", "Cluster"),
    ("topology.volcano.sh", "HyperNode", "v1alpha1", "Cluster"),
}


def _yaml_files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.suffix in (".yaml", ".yml")}


def test_chart_crds_are_a_copy_of_the_generated_crds() -> None:
    generated = _yaml_files(REPO_ROOT / "crds")
    shipped = _yaml_files(CHART_DIR / "crds")
    assert generated, "crds/ is empty: run `make crds`"
    assert sorted(shipped) == sorted(generated), "run scripts/sync-chart-crds.sh"
    stale = [name for name in generated if shipped[name] != generated[name]]
    assert not stale, (
        f"charts/tephra/crds/ differs from crds/ for {stale}: run scripts/sync-chart-crds.sh"
    )


def test_chart_crds_cover_every_kind() -> None:
    found = set()
    for content in _yaml_files(CHART_DIR / "crds").values():
        for doc in yaml.safe_load_all(content):
            if not doc:
                continue
            assert doc["kind"] == "CustomResourceDefinition"
            spec = doc["spec"]
            assert doc["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
            served = [v for v in spec["versions"] if v["served"]]
            (storage,) = [v for v in spec["versions"] if v["storage"]]
            assert storage in served
            for v in served:
                found.add((spec["group"], spec["names"]["kind"], v["name"], spec["scope"]))
    assert found >= EXPECTED
