"""Simulation outputs: summary table, `summary.json`, per-job CSVs and a self-contained HTML report.

Why this exists: results people would rather look at are plotted. The report is one HTML file
with inline SVG (no scripts, no CDN, no network, charts in ``report_svg``): the summary with units,
what each policy is and its configuration, queueing-delay and gang-start-spread CDFs per policy,
wasted GPU-hours per policy and queue, allocation utilization over time, per-queue allocated
against deserved share over time, and a queue x policy table. A queue has one colour in every
chart; policies are told apart by dark colours and dash patterns.
"""

from __future__ import annotations

import csv
import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from batch.sim.report_svg import (
    Bar,
    Series,
    bar_chart,
    duration,
    duration_ticks,
    line_chart,
    policy_style,
    queue_color,
    time_unit,
)
from batch.sim.runner import PolicyRun
from batch.sim.workload import Workload

__all__ = ["format_table", "render_html", "write_outputs"]


def _fmt(value: Any, kind: str = "s") -> str:
    if value is None:
        return "-"
    if kind == "s":
        v = float(value)
        if v >= 86_400:
            return f"{v / 86_400:.1f}d"
        if v >= 3600:
            return f"{v / 3600:.1f}h"
        return f"{v:.0f}s"
    if kind == "%":
        return f"{float(value) * 100:.1f}%"
    if kind == "f":
        return f"{float(value):.3f}"
    if kind == "h":
        return f"{float(value):.1f}"
    return str(value)


COLUMNS: list[tuple[str, str, str]] = [
    ("policy", "policy", ""),
    ("jobs", "jobs", "i"),
    ("completed", "done", "i"),
    ("unfinished", "stuck", "i"),
    ("jct_mean_s", "JCT mean", "s"),
    ("jct_p50_s", "JCT p50", "s"),
    ("jct_p99_s", "JCT p99", "s"),
    ("queue_delay_mean_s", "wait mean", "s"),
    ("queue_delay_p99_s", "wait p99", "s"),
    ("utilization", "util", "%"),
    ("wasted_gpu_hours", "waste GPU-h", "h"),
    ("preemptions", "preempt", "i"),
    ("jain_index", "Jain", "f"),
    ("wall_s", "wall s", "h"),
]
#: the unit of each column of the HTML summary (same order as COLUMNS, then the extra columns)
UNITS = [
    "",
    "jobs",
    "jobs",
    "jobs",
    "time",
    "time",
    "time",
    "time",
    "time",
    "% of GPU time",
    "GPU-hours",
    "victim jobs",
    "0..1 (1 = fair)",
    "seconds",
]
EXTRA_COLUMNS: list[tuple[str, str, str, str]] = [
    ("gang_spread_mean_s", "gang spread mean", "s", "time"),
    ("gang_spread_p99_s", "gang spread p99", "s", "time"),
    ("gangs_never_whole", "gangs never whole", "i", "jobs"),
]


def format_table(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    rows = [[title for _k, title, _f in COLUMNS]]
    for name, s in summaries.items():
        row = []
        for key, _title, kind in COLUMNS:
            value = name if key == "policy" else s.get(key)
            row.append(_fmt(value, kind) if kind not in ("", "i") else str(value))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cdf(values: Sequence[float], points: int = 200) -> tuple[list[float], list[float]]:
    arr = np.sort(np.asarray(values, dtype=np.float64))
    if arr.size == 0:
        return [], []
    qs = np.linspace(0.0, 1.0, points)
    xs = np.quantile(arr, qs)
    return [float(x) for x in xs], [float(q) for q in qs]


# -- HTML report -------------------------------------------------------------------------------

#: what each built-in policy stands for (others show their configuration only)
ABOUT = {
    "tephra": "Tephra's scheduler with the configuration it ships (or --scheduler-conf): gang "
    "admission (enqueue), fair share between the trace's queues by weight, preemption and "
    "reclaim.",
    "kube-default": "A cluster without a batch scheduler: pods are created at submission and "
    "each pod is placed on its own (no gang), least-allocated spreading, one queue. A "
    "distributed job can hold GPUs with part of its pods while it waits for the rest.",
    "fifo": "Gang scheduling in submission order, one queue, no fair share; a later job that "
    "fits may start ahead of a blocked one (FIFO with skipping).",
    "tiresias": "Tephra's default with the opt-in tiresias job order: least attained GPU "
    "service first, in levels, preempting by service quantum.",
    "sjf": "Tephra's default with the opt-in sjf job order: shortest runningEstimate x GPUs "
    "first, with aging (the trace's run time is given as the estimate: an oracle).",
}


def _policy_rows(runs: Mapping[str, PolicyRun]) -> str:
    rows = []
    for name, run in runs.items():
        o = run.policy.options
        switches = (
            f"gang: {'yes' if o.gang else 'no (PodGroup minMember 1)'}; pods created: "
            f"{'after enqueue admits the PodGroup' if o.gate_pods else 'at submission'}; "
            f"queues: {'one' if o.single_queue else 'the trace queues'}; "
            f"lifecycle {o.lifecycle}; period {o.period:g} s"
        )
        about = ABOUT.get(name, "Configuration below.")
        rows.append(
            f"<tr><td>{html.escape(name)}</td><td>{html.escape(about)}<br><small>"
            f"{html.escape(switches)}</small></td><td><details><summary>volcano-scheduler.conf"
            f"</summary><pre>{html.escape(run.policy.conf)}</pre></details></td></tr>"
        )
    return (
        "<table><tr><th>policy</th><th>what it is</th><th>configuration</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _summary_table(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    cols = [(k, t, f, u) for (k, t, f), u in zip(COLUMNS, UNITS, strict=True)]
    cols[-1:-1] = EXTRA_COLUMNS  # before wall time
    head = "".join(f"<th>{html.escape(title)}</th>" for _k, title, _f, _u in cols)
    units = "".join(f"<th><small>{html.escape(u)}</small></th>" for _k, _t, _f, u in cols)
    body = []
    for name, s in summaries.items():
        cells = []
        for key, _title, kind, _u in cols:
            value = name if key == "policy" else s.get(key)
            if kind == "s":
                cells.append(duration(None if value is None else float(value)))
            else:
                cells.append(_fmt(value, kind) if kind not in ("", "i") else str(value))
        body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    rows = "".join(body)
    return f"<table class='summary'><tr>{head}</tr><tr>{units}</tr>{rows}</table>"


def _queue_table(runs: Mapping[str, PolicyRun], queue_names: Sequence[str]) -> str:
    """Rows: queues (in their colour); per policy: jobs, mean wait, mean JCT, share ratio."""
    names = list(runs)
    head1 = "<th rowspan='2'>queue</th>" + "".join(
        f"<th colspan='4'>{html.escape(n)}</th>" for n in names
    )
    head2 = "".join(
        "<th>jobs</th><th>wait mean</th><th>JCT mean</th><th>GPU share / deserved</th>"
        for _ in names
    )
    rows = []
    for qi, q in enumerate(queue_names):
        per = [runs[n].summary.get("queues", {}).get(q) for n in names]
        if not any(per):
            continue
        swatch = f"<span class='sw' style='background:{queue_color(qi)}'></span>"
        cells = [f"<td>{swatch}{html.escape(q)}</td>"]
        for found in per:
            qs = found or {}
            share = (
                f"{_fmt(qs.get('allocated_share'), '%')} / {_fmt(qs.get('deserved_share'), '%')}"
            )
            cells += [
                f"<td>{qs.get('jobs', 0)}</td>",
                f"<td>{duration(qs.get('queue_delay_mean_s'))}</td>",
                f"<td>{duration(qs.get('jct_mean_s'))}</td>",
                f"<td>{share}</td>",
            ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f"<table class='queues'><tr>{head1}</tr><tr>{head2}</tr>{''.join(rows)}</table>"
        "<p><small>wait = first start - submit; JCT = finish - submit (completed jobs); GPU "
        "share = time-averaged share of the cluster's GPUs over the steady window, against the "
        "deserved share of the trace's queue weights.</small></p>"
    )


def _cdf_chart(
    runs: Mapping[str, PolicyRun],
    values: Mapping[str, Sequence[float]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    css_class: str,
) -> str:
    """One CDF per policy over all its jobs; infinite values (never) keep the curve below 1."""
    series = []
    lo, hi = 1.0, 10.0
    for i, name in enumerate(runs):
        vals = values[name]
        finite = [v for v in vals if math.isfinite(v)]
        xs, ys = _cdf(finite)
        scale = len(finite) / len(vals) if vals else 0.0
        color, dash = policy_style(i)
        series.append(Series(name, xs, [y * scale for y in ys], color, dash))
        if finite:
            hi = max(hi, *finite)
    return line_chart(
        series,
        title=title,
        x_label=x_label,
        y_label=y_label,
        log_x=True,
        x_ticks=duration_ticks(lo, hi),
        y_max=1.0,
        css_class=css_class,
    )


def _waste_chart(runs: Mapping[str, PolicyRun], queue_names: Sequence[str]) -> str:
    index = {q: i for i, q in enumerate(queue_names)}
    bars = []
    used: set[str] = set()
    for name, run in runs.items():
        per: dict[str, float] = {}
        for r in run.result.jobs:
            if r.wasted_gpu_s:
                per[r.queue] = per.get(r.queue, 0.0) + r.wasted_gpu_s / 3600.0
        used.update(per)
        parts = [(q, per[q], queue_color(index.get(q, 0))) for q in queue_names if q in per]
        bars.append(Bar(name, parts))
    legend = [(q, queue_color(i)) for i, q in enumerate(queue_names) if q in used]
    return bar_chart(
        bars,
        title="Wasted GPU-hours: GPUs held by pods of gangs not yet complete, by queue",
        y_label="GPU-hours",
        legend=legend,
        css_class="waste",
    )


def _time_charts(runs: Mapping[str, PolicyRun]) -> list[str]:
    first = next(iter(runs.values()), None)
    end = float(first.series["t"][-1]) if first is not None and len(first.series["t"]) else 0.0
    unit, unit_name = time_unit(end)
    x_label = f"virtual time ({unit_name})"
    util = []
    for i, (name, run) in enumerate(runs.items()):
        color, dash = policy_style(i)
        xs = [float(x) / unit for x in run.series["t"]]
        util.append(Series(name, xs, [float(u) for u in run.series["utilization"]], color, dash))
    charts = [
        line_chart(
            util,
            title="GPU allocation utilization over time",
            x_label=x_label,
            y_label="allocated GPUs / total",
            y_max=1.0,
            css_class="utilization",
        )
    ]
    for name, run in runs.items():
        s = run.series
        total = s["total_gpus"] or 1.0
        xs = [float(x) / unit for x in s["t"]]
        names = run.result.metrics.queue_names
        shares = []
        for qi in sorted(np.argsort(-s["demand"].sum(axis=1))[:6]):
            color = queue_color(int(qi))
            alloc = [float(v) / total for v in s["alloc"][qi]]
            deserved = [float(v) / total for v in s["deserved"][qi]]
            shares.append(Series(f"{names[qi]} allocated", xs, alloc, color))
            shares.append(Series(f"{names[qi]} deserved", xs, deserved, color, "5,3"))
        charts.append(
            line_chart(
                shares,
                title=f"{name}: GPU share per queue, allocated (solid) vs deserved (dashed)",
                x_label=x_label,
                y_label="share of cluster GPUs",
                y_max=1.0,
                height=360,
                css_class="shares",
            )
        )
    return charts


def render_html(workload: Workload, runs: Mapping[str, PolicyRun]) -> str:
    summaries = {name: run.summary for name, run in runs.items()}
    first = next(iter(runs.values()), None)
    queue_names = list(first.result.metrics.queue_names) if first is not None else []
    delays = {
        n: [r.queue_delay for r in run.result.jobs if r.queue_delay is not None]
        + [math.inf for r in run.result.jobs if r.queue_delay is None]
        for n, run in runs.items()
    }
    spreads = {
        n: [r.gang_spread for r in run.result.jobs if r.gang_spread is not None]
        for n, run in runs.items()
    }
    charts = [
        _cdf_chart(
            runs,
            delays,
            title="Queueing delay CDF: submit -> whole gang running",
            x_label="queueing delay (log scale; 0 shown at 1 s)",
            y_label="fraction of jobs started",
            css_class="delay",
        ),
        _cdf_chart(
            runs,
            spreads,
            title="Gang start spread CDF: first pod bound -> whole gang running (multi-pod jobs)",
            x_label="spread (log scale; 0 shown at 1 s)",
            y_label="fraction of gangs that bound a pod",
            css_class="spread",
        ),
        _waste_chart(runs, queue_names),
        *_time_charts(runs),
    ]
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in (*workload.notes, *workload.assumptions))
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>tephra sim: {html.escape(workload.name)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}}
pre{{background:#f6f6f6;padding:1em}} table{{border-collapse:collapse;margin:0.5em 0}}
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:12px}}
.sw{{display:inline-block;width:10px;height:10px;margin-right:4px}}</style>
</head><body>
<h1>Simulation report: {html.escape(workload.name)}</h1>
<p>{len(workload.jobs)} jobs, {workload.cluster.node_count} nodes,
{workload.cluster.gpu_milli_total / 1000:g} GPUs; capacity scale {workload.capacity_scale:g},
time compression {workload.time_compress:g}.</p>
<ul>{notes}</ul>
<h2>Summary</h2>{_summary_table(summaries)}
<p><small>A gang's wait ends when all its pods run: a policy that binds part of a gang at once
(kube-default) is not credited for it; the spread chart shows how long such gangs held GPUs
before they ran, and gangs that never became whole keep its curve below 1.</small></p>
<h2>Policies</h2>{_policy_rows(runs)}
{"".join(f"<div>{c}</div>" for c in charts)}
<h2>Per queue and policy</h2>{_queue_table(runs, queue_names)}
</body></html>
"""


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def write_job_csv(path: Path, run: PolicyRun) -> None:
    with path.open("w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(
            [
                "name",
                "queue",
                "gpus",
                "pods",
                "run_time_s",
                "submit_s",
                "start_s",
                "finish_s",
                "phase",
                "queue_delay_s",
                "jct_s",
                "restarts",
                "evictions",
                "wasted_gpu_s",
            ]
        )
        for r in run.result.jobs:
            w.writerow(
                [
                    r.name,
                    r.queue,
                    f"{r.gpus:g}",
                    r.pods,
                    f"{r.run_time:g}",
                    f"{r.submit:g}",
                    "" if r.start is None else f"{r.start:g}",
                    "" if r.finish is None else f"{r.finish:g}",
                    r.phase,
                    "" if r.queue_delay is None else f"{r.queue_delay:g}",
                    "" if r.jct is None else f"{r.jct:g}",
                    r.restarts,
                    r.evictions,
                    f"{r.wasted_gpu_s:.1f}",
                ]
            )


def write_outputs(out: Path, workload: Workload, runs: Mapping[str, PolicyRun]) -> dict[str, Path]:
    """Write summary.json, jobs-<policy>.csv and report.html into `out`; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    summary = {name: _jsonable(run.summary) for name, run in runs.items()}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")
    paths["summary"] = out / "summary.json"
    meta = {
        "trace": workload.name,
        "jobs": len(workload.jobs),
        "nodes": workload.cluster.node_count,
        "gpus": workload.cluster.gpu_milli_total / 1000,
        "capacity_scale": workload.capacity_scale,
        "time_compress": workload.time_compress,
        "notes": list(workload.notes),
        "assumptions": list(workload.assumptions),
        "policies": {name: run.policy.conf for name, run in runs.items()},
    }
    (out / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
    for name, run in runs.items():
        p = out / f"jobs-{name}.csv"
        write_job_csv(p, run)
        paths[f"jobs-{name}"] = p
    (out / "report.html").write_text(render_html(workload, runs))
    paths["report"] = out / "report.html"
    return paths
