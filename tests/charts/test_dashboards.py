"""The chart's Grafana dashboard and PrometheusRule alerts (issue 15, item 11): the dashboard
JSON parses, both render only when asked, and every query names only metrics Tephra exports.

"Exports" is read off the real registries (the scheduler's, the controllers', and the process and
Python collectors every /metrics endpoint adds), expanded as Prometheus' text format names the
series: counters `_total`, histograms `_bucket`/`_count`/`_sum`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from batch.cli.metrics import exposition_registry
from batch.controllers.metrics import ControllerMetrics
from batch.kube.metrics import SchedulerMetrics

from .helmtools import CHART_DIR, NAMESPACE, find, one, render

DASHBOARD = CHART_DIR / "dashboards" / "tephra.json"
#: series Prometheus itself makes for every target
SCRAPE_SERIES = {"up"}
_SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"]}
#: PromQL words that are not metric names
_WORDS = {
    "sum", "by", "rate", "increase", "histogram_quantile", "absent", "and", "or", "vector",
    "le", "label_values", "on", "without", "max", "min", "avg", "count", "time",
}  # fmt: skip


def exported() -> set[str]:
    registries = [SchedulerMetrics().registry, ControllerMetrics().registry]
    names: set[str] = set(SCRAPE_SERIES)
    for family in exposition_registry(lambda: registries).collect():
        for suffix in _SUFFIXES.get(family.type, [""]):
            names.add(family.name + suffix)
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads: identifiers outside label matchers, strings,
    durations and grouping clauses."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    text = re.sub(r"label_values\(([^,)]+),[^)]*\)", r"\1", text)  # Grafana: (metric, label)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", "", text)  # grouping labels
    words = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", text))
    return {w for w in words - _WORDS if not w.startswith("$")}


def _dashboard_exprs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        query = node.get("query") if node.get("type") == "query" else None  # a variable's
        for key, value in node.items():
            if (key == "expr" or value is query) and isinstance(value, str):
                yield value
            else:
                yield from _dashboard_exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _dashboard_exprs(item)


def test_metric_name_extraction() -> None:
    expr = 'histogram_quantile(0.99, sum by (le, action) (rate(x_bucket{a="b"}[5m]))) > 3'
    assert metric_names(expr) == {"x_bucket"}
    assert metric_names('(sum(y{n="q"}) or vector(0)) < 1') == {"y"}
    assert metric_names("label_values(z, queue_name)") == {"z"}


def test_every_dashboard_query_names_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = list(_dashboard_exprs(dashboard))
    assert len(exprs) >= 15
    known = exported()
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= known, (
            f"{expr!r} names {sorted(names - known)}, which Tephra does not export"
        )
    titles = {p["title"] for p in dashboard["panels"]}
    assert {"Queues", "Jobs", "Scheduler", "Binds per second"} <= titles


def test_dashboard_and_rules_render_only_when_enabled(helm: Path, tmp_path: Path) -> None:
    docs = render(helm, tmp_path)
    assert not find(docs, "PrometheusRule")
    assert not find(docs, "ConfigMap", "tephra-dashboard")
    values = {
        "metrics": {"grafanaDashboard": {"enabled": True}, "prometheusRule": {"enabled": True}}
    }
    docs = render(helm, tmp_path, values)
    config_map = one(docs, "ConfigMap", "tephra-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["tephra.json"]) == json.loads(DASHBOARD.read_text())
    rule = one(docs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == NAMESPACE


def test_every_alert_names_exported_metrics(helm: Path, tmp_path: Path) -> None:
    values = {"metrics": {"prometheusRule": {"enabled": True, "pendingMinutes": 45}}}
    rule = one(render(helm, tmp_path, values), "PrometheusRule")
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) == {
        "TephraSchedulerDown",
        "TephraSchedulerNoLeader",
        "TephraSchedulingCycleSlow",
        "TephraQueueStarving",
        "TephraGangsPendingLong",
        "TephraStatusWritesFailing",
    }
    assert "> 60 * 45" in alerts["TephraGangsPendingLong"]["expr"]
    assert 'job="tephra-scheduler-metrics"' in alerts["TephraSchedulerDown"]["expr"]
    known = exported()
    for name, alert in alerts.items():
        names = metric_names(alert["expr"])
        assert names and names <= known, f"{name}: {sorted(names - known)} not exported"
        assert "{{" not in alert["annotations"]["summary"].replace("{{ $labels", "")


@pytest.mark.parametrize("bad", [{"starvingFor": "soon"}, {"pendingMinutes": 0}, {"colour": 1}])
def test_rule_values_are_checked(helm: Path, tmp_path: Path, bad: dict[str, Any]) -> None:
    from .helmtools import HelmError

    values = {"metrics": {"prometheusRule": {"enabled": True, **bad}}}
    with pytest.raises(HelmError):
        render(helm, tmp_path, values)


def test_helm_lint_strict_with_both_enabled(helm: Path, tmp_path: Path) -> None:
    from .helmtools import helm_env, run_helm, values_args

    enabled = {"enabled": True}
    values = {"metrics": {"grafanaDashboard": enabled, "prometheusRule": enabled}}
    args = ["lint", "--strict", str(CHART_DIR), "--namespace", NAMESPACE]
    proc = run_helm(helm, [*args, *values_args(values, tmp_path)], env=helm_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
