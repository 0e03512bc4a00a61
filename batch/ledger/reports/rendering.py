"""Printing a report: an aligned text table, CSV or JSON (what `tephra report` prints)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.0f}"
    return str(value)


def render(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    fmt: str = "table",
    *,
    at_least: Sequence[frozenset[str]] = (),
) -> str:
    """A report as an aligned text table, CSV or JSON (what `tephra report` prints). In a table,
    the figures `at_least` names (per row) are lower bounds and show as ``>=N``."""
    if fmt == "json":
        return json.dumps([dict(zip(columns, r, strict=True)) for r in rows], indent=2)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(["" if v is None else v for v in r] for r in rows)
        return buf.getvalue().rstrip("\n")
    marks = list(at_least) + [frozenset()] * (len(rows) - len(at_least))
    cells = [
        [
            (">=" if c in m and v is not None else "") + _cell(v)
            for c, v in zip(columns, r, strict=True)
        ]
        for r, m in zip(rows, marks, strict=True)
    ]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = [title, "  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    for r in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    if not rows:
        lines.append("(no data in the window)")
    if any(marks):
        lines.append(
            ">=N: a lower bound; it counts jobs still waiting with their wait so far, "
            "and they are waiting still"
        )
    return "\n".join(lines)
