"""Simulation outputs: summary table, `summary.json`, per-job CSVs and a self-contained HTML report.

Why this exists: results people would rather look at are plotted. The report is one HTML file
with inline SVG (no scripts, no CDN, no network): a queueing-delay CDF per policy, allocation
utilization over time, and per-queue allocated share against deserved share over time.
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

from batch.sim.runner import PolicyRun
from batch.sim.workload import Workload

__all__ = ["format_table", "write_outputs"]

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]

Series = tuple[str, Sequence[float], Sequence[float], str, bool]  # label, xs, ys, color, dashed


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
    ("wall_s", "wall", "h"),
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


# -- SVG ---------------------------------------------------------------------------------------


def _svg_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    y_max: float | None = None,
    width: int = 720,
    height: int = 320,
) -> str:
    left, right, top, bottom = 60, 170, 30, 45
    pw, ph = width - left - right, height - top - bottom

    def tx(x: float) -> float:
        return math.log10(max(x, 1.0)) if log_x else x

    xs_all = [tx(x) for _l, xs, _y, _c, _d in series for x in xs]
    ys_all = [y for _l, _x, ys, _c, _d in series for y in ys]
    x0, x1 = (min(xs_all), max(xs_all)) if xs_all else (0.0, 1.0)
    if x1 <= x0:
        x1 = x0 + 1.0
    y0 = 0.0
    y1 = y_max if y_max is not None else (max(ys_all) if ys_all else 1.0)
    if y1 <= y0:
        y1 = y0 + 1.0

    def px(x: float) -> float:
        return left + (tx(x) - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + ph - (y - y0) / (y1 - y0) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="18" font-size="13" font-weight="bold">{html.escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>',
    ]
    for k in range(6):
        yv = y0 + (y1 - y0) * k / 5
        yy = py(yv)
        out.append(
            f'<line x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{left - 5}" y="{yy + 4:.1f}" text-anchor="end">{yv:.3g}</text>')
    for k in range(6):
        xv = x0 + (x1 - x0) * k / 5
        xx = left + pw * k / 5
        label = f"{10**xv:.3g}" if log_x else f"{xv:.3g}"
        out.append(f'<text x="{xx:.1f}" y="{top + ph + 15}" text-anchor="middle">{label}</text>')
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 8}" text-anchor="middle">'
        f"{html.escape(x_label)}</text>"
    )
    out.append(
        f'<text x="14" y="{top + ph / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + ph / 2})">{html.escape(y_label)}</text>'
    )
    for i, (label, xs, ys, color, dashed) in enumerate(series):
        if len(xs):
            pts = " ".join(f"{px(x):.1f},{py(min(y, y1)):.1f}" for x, y in zip(xs, ys, strict=True))
            dash = ' stroke-dasharray="5,3"' if dashed else ""
            out.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="1.5"{dash} points="{pts}"/>'
            )
        ly = top + 12 + i * 15
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        out.append(
            f'<line x1="{left + pw + 10}" y1="{ly - 4}" x2="{left + pw + 30}" y2="{ly - 4}" '
            f'stroke="{color}" stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{left + pw + 35}" y="{ly}">{html.escape(label[:22])}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _cdf(values: Sequence[float], points: int = 200) -> tuple[list[float], list[float]]:
    arr = np.sort(np.asarray(values, dtype=np.float64))
    if arr.size == 0:
        return [], []
    qs = np.linspace(0.0, 1.0, points)
    xs = np.quantile(arr, qs)
    return [float(x) for x in xs], [float(q) for q in qs]


def _time_axis(t: Any) -> tuple[list[float], str]:
    end = float(t[-1]) if len(t) else 0.0
    if end >= 3 * 86_400:
        return [float(x) / 86_400 for x in t], "virtual time (days)"
    if end >= 3 * 3600:
        return [float(x) / 3600 for x in t], "virtual time (hours)"
    return [float(x) for x in t], "virtual time (s)"


def render_html(workload: Workload, runs: Mapping[str, PolicyRun]) -> str:
    summaries = {name: run.summary for name, run in runs.items()}
    charts: list[str] = []
    cdf_series: list[Series] = []
    for i, (name, run) in enumerate(runs.items()):
        delays = [r.queue_delay for r in run.result.jobs if r.queue_delay is not None]
        xs, ys = _cdf(delays)
        cdf_series.append((name, xs, ys, COLORS[i % len(COLORS)], False))
    charts.append(
        _svg_chart(
            cdf_series,
            title="Queueing delay CDF (first start - submit)",
            x_label="queueing delay (s, log scale; 0 shown at 1 s)",
            y_label="fraction of jobs",
            log_x=True,
            y_max=1.0,
        )
    )
    util_series: list[Series] = []
    for i, (name, run) in enumerate(runs.items()):
        xs, x_label = _time_axis(run.series["t"])
        util_series.append(
            (
                name,
                xs,
                [float(u) for u in run.series["utilization"]],
                COLORS[i % len(COLORS)],
                False,
            )
        )
    x_label = _time_axis(next(iter(runs.values())).series["t"])[1] if runs else "time"
    charts.append(
        _svg_chart(
            util_series,
            title="GPU allocation utilization over time",
            x_label=x_label,
            y_label="allocated GPUs / total",
            y_max=1.0,
        )
    )
    for name, run in runs.items():
        s = run.series
        total = s["total_gpus"] or 1.0
        demand_rank = np.argsort(-s["demand"].sum(axis=1))[:5]
        xs, x_label = _time_axis(s["t"])
        share_series: list[Series] = []
        names = run.result.metrics.queue_names
        for k, qi in enumerate(demand_rank):
            color = COLORS[k % len(COLORS)]
            share_series.append(
                (f"{names[qi]} alloc", xs, [float(v) / total for v in s["alloc"][qi]], color, False)
            )
            share_series.append(
                (
                    f"{names[qi]} deserved",
                    xs,
                    [float(v) / total for v in s["deserved"][qi]],
                    color,
                    True,
                )
            )
        charts.append(
            _svg_chart(
                share_series,
                title=f"{name}: allocated (solid) vs deserved (dashed) GPU share, top queues",
                x_label=x_label,
                y_label="share of cluster GPUs",
                y_max=1.0,
                height=360,
            )
        )
    table = html.escape(format_table(summaries))
    queue_rows = []
    for name, s in summaries.items():
        for q, qs in s.get("queues", {}).items():
            queue_rows.append(
                "<tr>"
                + "".join(
                    f"<td>{html.escape(str(c))}</td>"
                    for c in (
                        name,
                        q,
                        qs.get("jobs"),
                        _fmt(qs.get("queue_delay_mean_s")),
                        _fmt(qs.get("jct_mean_s")),
                        _fmt(qs.get("allocated_share"), "%"),
                        _fmt(qs.get("deserved_share"), "%"),
                        _fmt(qs.get("ratio"), "f"),
                    )
                )
                + "</tr>"
            )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in workload.notes)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>tephra sim: {html.escape(workload.name)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}
pre{{background:#f6f6f6;padding:1em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:12px}}</style>
</head><body>
<h1>Simulation report: {html.escape(workload.name)}</h1>
<p>{len(workload.jobs)} jobs, {workload.cluster.node_count} nodes,
{workload.cluster.gpu_milli_total / 1000:g} GPUs; capacity scale {workload.capacity_scale:g},
time compression {workload.time_compress:g}.</p>
<ul>{notes}</ul>
<h2>Summary</h2><pre>{table}</pre>
{"".join(f"<div>{c}</div>" for c in charts)}
<h2>Per queue</h2>
<table><tr><th>policy</th><th>queue</th><th>jobs</th><th>wait mean</th><th>JCT mean</th>
<th>allocated share</th><th>deserved share</th><th>ratio</th></tr>{"".join(queue_rows)}</table>
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
