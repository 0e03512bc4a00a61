"""Inline SVG charts for the simulation report: line charts and stacked bars, no scripts.

Why this exists: the report must open anywhere (a mail attachment, an air-gapped laptop), so its
charts are plain SVG drawn here. Durations are shown the way people read them (s, min, h, d),
on linear time axes and on logarithmic delay axes alike.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "Bar",
    "Series",
    "bar_chart",
    "duration",
    "duration_ticks",
    "line_chart",
    "time_unit",
]

#: one colour per queue, the same in every chart (a queue's index in the workload picks it)
QUEUE_COLORS = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
    "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
]  # fmt: skip
#: policies are told apart by dark colours and dash patterns, never by a queue's colour
POLICY_STYLES = [
    ("#000000", ""),
    ("#b2182b", "6,3"),
    ("#2166ac", "2,2"),
    ("#4d9221", "8,3,2,3"),
    ("#762a83", "4,4"),
    ("#8c510a", "1,3"),
]

_UNITS = ((86_400.0, "d"), (3600.0, "h"), (60.0, "min"), (1.0, "s"))


def queue_color(index: int) -> str:
    return QUEUE_COLORS[index % len(QUEUE_COLORS)]


def policy_style(index: int) -> tuple[str, str]:
    return POLICY_STYLES[index % len(POLICY_STYLES)]


def duration(seconds: float | None) -> str:
    """``seconds`` in the largest unit that keeps it >= 1 (``"90 s"``, ``"2.5 h"``, ``"3.1 d"``)."""
    if seconds is None or math.isnan(seconds):
        return "-"
    if math.isinf(seconds):
        return "never"
    for size, unit in _UNITS:
        if abs(seconds) >= size:
            value = seconds / size
            return f"{value:.0f} {unit}" if unit == "s" or value >= 100 else f"{value:.3g} {unit}"
    return f"{seconds:.0f} s"


def time_unit(end_s: float) -> tuple[float, str]:
    """Unit for a time axis that ends at ``end_s``: (seconds per unit, name)."""
    if end_s >= 2 * 86_400:
        return 86_400.0, "days"
    if end_s >= 2 * 3600:
        return 3600.0, "hours"
    if end_s >= 2 * 60:
        return 60.0, "minutes"
    return 1.0, "seconds"


def duration_ticks(lo_s: float, hi_s: float) -> list[tuple[float, str]]:
    """Readable ticks (1 s, 10 s, 1 min, 10 min, 1 h, 6 h, 1 d, 10 d, ...) within a range."""
    marks = [1, 10, 60, 600, 3600, 6 * 3600, 86_400, 10 * 86_400, 100 * 86_400, 1000 * 86_400]
    out = [(float(m), duration(m)) for m in marks if lo_s <= m <= hi_s]
    return out or [(lo_s, duration(lo_s)), (hi_s, duration(hi_s))]


@dataclass(slots=True)
class Series:
    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: str
    dash: str = ""  # SVG stroke-dasharray, "" = solid


@dataclass(slots=True)
class Bar:
    """One bar: stacked parts (label, value, colour) drawn bottom-up."""

    label: str
    parts: list[tuple[str, float, str]] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(v for _l, v, _c in self.parts)


@dataclass(slots=True)
class _Frame:
    """Plot area geometry and the data-to-pixel mapping."""

    width: int
    height: int
    x0: float
    x1: float
    y1: float
    log_x: bool
    left: int = 64
    right: int = 190
    top: int = 30
    bottom: int = 45

    @property
    def pw(self) -> int:
        return self.width - self.left - self.right

    @property
    def ph(self) -> int:
        return self.height - self.top - self.bottom

    def tx(self, x: float) -> float:
        return math.log10(max(x, 1.0)) if self.log_x else x

    def px(self, x: float) -> float:
        return self.left + (self.tx(x) - self.x0) / (self.x1 - self.x0) * self.pw

    def py(self, y: float) -> float:
        return self.top + self.ph - min(max(y, 0.0), self.y1) / self.y1 * self.ph


def _open(f: _Frame, title: str, x_label: str, y_label: str, css_class: str) -> list[str]:
    mid = f.top + f.ph / 2
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {css_class}" width="{f.width}" '
        f'height="{f.height}" viewBox="0 0 {f.width} {f.height}" font-family="sans-serif" '
        f'font-size="11">',
        f'<text x="{f.left}" y="18" font-size="13" font-weight="bold">{html.escape(title)}</text>',
        f'<rect x="{f.left}" y="{f.top}" width="{f.pw}" height="{f.ph}" fill="none" '
        f'stroke="#999"/>',
        f'<text x="{f.left + f.pw / 2}" y="{f.height - 8}" text-anchor="middle">'
        f"{html.escape(x_label)}</text>",
        f'<text x="14" y="{mid}" text-anchor="middle" transform="rotate(-90 14 {mid})">'
        f"{html.escape(y_label)}</text>",
    ]


def _y_grid(f: _Frame) -> list[str]:
    out = []
    for k in range(6):
        yv = f.y1 * k / 5
        yy = f.py(yv)
        out.append(
            f'<line x1="{f.left}" y1="{yy:.1f}" x2="{f.left + f.pw}" y2="{yy:.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{f.left - 5}" y="{yy + 4:.1f}" text-anchor="end">{yv:.3g}</text>')
    return out


def _legend(f: _Frame, entries: Sequence[tuple[str, str, str, bool]]) -> list[str]:
    """Legend rows right of the plot: (label, colour, dash, filled box instead of a line)."""
    out = []
    x = f.left + f.pw + 10
    for i, (label, color, dash, box) in enumerate(entries[:24]):
        ly = f.top + 12 + i * 15
        if box:
            out.append(f'<rect x="{x}" y="{ly - 9}" width="20" height="10" fill="{color}"/>')
        else:
            da = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(
                f'<line x1="{x}" y1="{ly - 4}" x2="{x + 20}" y2="{ly - 4}" stroke="{color}" '
                f'stroke-width="2"{da}/>'
            )
        out.append(f'<text x="{x + 25}" y="{ly}">{html.escape(label[:28])}</text>')
    return out


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    x_ticks: Sequence[tuple[float, str]] | None = None,
    y_max: float | None = None,
    css_class: str = "line",
    width: int = 760,
    height: int = 320,
) -> str:
    """Polylines over shared axes; ``x_ticks`` (value, label) replace the numeric x ticks."""
    probe = _Frame(width, height, 0.0, 1.0, 1.0, log_x)
    xs_all = [probe.tx(x) for s in series for x in s.xs]
    ys_all = [y for s in series for y in s.ys]
    x0, x1 = (min(xs_all), max(xs_all)) if xs_all else (0.0, 1.0)
    if x1 <= x0:
        x1 = x0 + 1.0
    y1 = y_max if y_max is not None else (max(ys_all) if ys_all else 1.0)
    f = _Frame(width, height, x0, x1, y1 if y1 > 0 else 1.0, log_x)
    out = _open(f, title, x_label, y_label, css_class) + _y_grid(f)
    if x_ticks is None:
        x_ticks = [(x0 + (x1 - x0) * k / 5, f"{x0 + (x1 - x0) * k / 5:.3g}") for k in range(6)]
        x_ticks = [(10**v if log_x else v, label) for v, label in x_ticks]
    for value, label in x_ticks:
        xx = f.px(value)
        out.append(
            f'<text x="{xx:.1f}" y="{f.top + f.ph + 15}" text-anchor="middle">'
            f"{html.escape(label)}</text>"
        )
    for s in series:
        if len(s.xs):
            pts = " ".join(f"{f.px(x):.1f},{f.py(y):.1f}" for x, y in zip(s.xs, s.ys, strict=True))
            da = f' stroke-dasharray="{s.dash}"' if s.dash else ""
            out.append(
                f'<polyline class="series" fill="none" stroke="{s.color}" stroke-width="1.6"{da} '
                f'points="{pts}"/>'
            )
    out += _legend(f, [(s.label, s.color, s.dash, False) for s in series])
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(
    bars: Sequence[Bar],
    *,
    title: str,
    y_label: str,
    value_format: str = "{:.1f}",
    legend: Sequence[tuple[str, str]] = (),
    css_class: str = "bars",
    width: int = 760,
    height: int = 300,
) -> str:
    """Vertical stacked bars, one per ``Bar``, the total written above each."""
    top = max((b.total for b in bars), default=0.0)
    f = _Frame(width, height, 0.0, 1.0, top * 1.15 if top > 0 else 1.0, False)
    out = _open(f, title, "", y_label, css_class) + _y_grid(f)
    slot = f.pw / max(len(bars), 1)
    bw = min(slot * 0.6, 80.0)
    for i, b in enumerate(bars):
        x = f.left + slot * i + (slot - bw) / 2
        base = 0.0
        for label, value, color in b.parts:
            if value <= 0:
                continue
            y_hi, y_lo = f.py(base + value), f.py(base)
            out.append(
                f'<rect class="bar" x="{x:.1f}" y="{y_hi:.1f}" width="{bw:.1f}" '
                f'height="{max(y_lo - y_hi, 0.5):.1f}" fill="{color}">'
                f"<title>{html.escape(label)}: {value_format.format(value)}</title></rect>"
            )
            base += value
        out.append(
            f'<text x="{x + bw / 2:.1f}" y="{f.py(b.total) - 4:.1f}" text-anchor="middle">'
            f"{value_format.format(b.total)}</text>"
        )
        out.append(
            f'<text x="{x + bw / 2:.1f}" y="{f.top + f.ph + 15}" text-anchor="middle">'
            f"{html.escape(b.label)}</text>"
        )
    out += _legend(f, [(label, color, "", True) for label, color in legend])
    out.append("</svg>")
    return "\n".join(out)
