"""Small SVG charts drawn on the server: grouped bars, one group per category.

Why hand-written: the page must work offline and the lock holds no chart library for Python or
JavaScript; the charts here are bars of a handful of series, which take fifty lines of SVG. The
page needs no script to show them, and a test can count the bars in the DOM.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["PALETTE", "bars", "nice_ticks", "tick_label", "time_unit"]

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1")
_W, _H, _LEFT, _BOTTOM, _TOP = 640, 240, 62, 40, 16
#: the steps between ticks, times a power of ten
_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)


def nice_ticks(top: float, count: int = 4) -> list[float]:
    """From 0 up to the first tick at or above `top`, about `count` steps of 1, 2, 2.5 or 5
    times a power of ten (so 2.5 gives 0, 0.5 ... 2.5, never 0.629 or 1.26)."""
    top = top if top > 0 else 1.0
    raw = top / count
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in _STEPS if m * magnitude >= raw * (1 - 1e-9))
    n = math.ceil(top / step - 1e-9)
    return [round(step * i, 10) for i in range(n + 1)]


def _decimals(step: float) -> int:
    text = f"{step:.10f}".rstrip("0")
    return len(text.split(".")[1]) if "." in text else 0


def tick_label(value: float, step: float) -> str:
    """`value` with as many decimals as the tick step needs, thousands grouped."""
    return f"{value:,.{_decimals(step)}f}"


def time_unit(longest_seconds: float) -> tuple[float, str]:
    """(seconds per unit, unit) for an axis of durations up to `longest_seconds`."""
    if longest_seconds >= 2 * 3600:
        return 3600.0, "hours"
    if longest_seconds >= 2 * 60:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _label(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def _axis(ticks: list[float], plot_h: float, unit: str) -> list[str]:
    top, step = ticks[-1], ticks[1] - ticks[0]
    out = []
    for tick in ticks:
        y = _TOP + plot_h * (1 - tick / top)
        out.append(f'<line class="grid" x1="{_LEFT}" x2="{_W - 8}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(
            f'<text class="tick" x="{_LEFT - 4}" y="{y + 4:.1f}">{tick_label(tick, step)}</text>'
        )
    if unit:
        y = _TOP + plot_h / 2
        out.append(
            f'<text class="unit" x="12" y="{y:.1f}" transform="rotate(-90 12 {y:.1f})">'
            f"{escape(unit)}</text>"
        )
    return out


def bars(
    title: str, categories: Sequence[str], series: Mapping[str, Sequence[float]], unit: str
) -> str:
    """A grouped bar chart: for each category, one bar per series (same order as `series`);
    the value axis has round ticks and says its `unit`."""
    names = list(series)
    ticks = nice_ticks(max([v for vals in series.values() for v in vals] + [0.0]))
    top = ticks[-1]
    plot_w, plot_h = _W - _LEFT - 8, _H - _BOTTOM - _TOP
    group_w = plot_w / max(1, len(categories))
    bar_w = max(1.0, group_w * 0.8 / max(1, len(names)))
    out = [
        f'<svg class="chart" viewBox="0 0 {_W} {_H}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        *_axis(ticks, plot_h, unit),
    ]
    for i, cat in enumerate(categories):
        x0 = _LEFT + i * group_w + group_w * 0.1
        for j, name in enumerate(names):
            value = float(series[name][i])
            h = plot_h * value / top
            x, y = x0 + j * bar_w, _TOP + plot_h - h
            tip = f"{cat} {name}: {_label(value)} {unit}".strip()
            out.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[j % len(PALETTE)]}"><title>{escape(tip)}</title></rect>'
            )
        cx = _LEFT + (i + 0.5) * group_w
        out.append(f'<text class="cat" x="{cx:.1f}" y="{_H - _BOTTOM + 14}">{escape(cat)}</text>')
    for j, name in enumerate(names):
        x, color = _LEFT + j * 120, PALETTE[j % len(PALETTE)]
        out.append(
            f'<rect x="{x}" y="{_H - 16}" width="10" height="10" fill="{color}"/>'
            f'<text class="legend" x="{x + 14}" y="{_H - 7}">{escape(name)}</text>'
        )
    out.append("</svg>")
    return "".join(out)
