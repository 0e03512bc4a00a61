"""Small SVG charts drawn on the server: grouped bars, one group per category.

Why hand-written: the page must work offline and the lock holds no chart library for Python or
JavaScript; the charts here are bars of a handful of series, which take fifty lines of SVG. The
page needs no script to show them, and a test can count the bars in the DOM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["PALETTE", "bars"]

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1")
_W, _H, _LEFT, _BOTTOM, _TOP = 640, 240, 48, 40, 16


def _ticks(top: float) -> list[float]:
    return [top * i / 4 for i in range(5)]


def _label(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def bars(
    title: str, categories: Sequence[str], series: Mapping[str, Sequence[float]], unit: str = ""
) -> str:
    """A grouped bar chart: for each category, one bar per series (same order as `series`)."""
    names = list(series)
    top = max([v for vals in series.values() for v in vals] + [0.0]) or 1.0
    plot_w, plot_h = _W - _LEFT - 8, _H - _BOTTOM - _TOP
    group_w = plot_w / max(1, len(categories))
    bar_w = max(1.0, group_w * 0.8 / max(1, len(names)))
    out = [
        f'<svg class="chart" viewBox="0 0 {_W} {_H}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for tick in _ticks(top):
        y = _TOP + plot_h * (1 - tick / top)
        out.append(f'<line class="grid" x1="{_LEFT}" x2="{_W - 8}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(f'<text class="tick" x="{_LEFT - 4}" y="{y + 4:.1f}">{_label(tick)}</text>')
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
