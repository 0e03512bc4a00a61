"""The code, tests and docs cite Volcano's behaviour inside the repository
(docs/volcano-semantics.md), and every cited anchor exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "volcano-semantics.md"
_SKIP = {".venv", ".git", "node_modules", "build", "dist", ".mypy_cache", ".ruff_cache"}
SOURCES = sorted(
    p
    for pattern in ("*.py", "*.md")
    for p in ROOT.rglob(pattern)
    if not _SKIP & set(p.relative_to(ROOT).parts)
)
CITE = re.compile(r"volcano-semantics\.md((?:#[a-z0-9-]+(?:,\s*)?)+)")


def _anchors() -> set[str]:
    return set(re.findall(r'<a id="([a-z0-9-]+)"></a>', SPEC.read_text()))


def test_no_citation_points_outside_the_repository() -> None:
    outside = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in SOURCES
        if p.name != Path(__file__).name
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"volcano\.md\s*§", line)
    ]
    assert outside == []


def test_every_cited_section_exists() -> None:
    anchors = _anchors()
    cited: dict[str, str] = {}
    for p in SOURCES:
        text = p.read_text()
        for m in CITE.finditer(text):
            for a in re.findall(r"#([a-z0-9-]+)", m.group(1)):
                cited.setdefault(a, str(p.relative_to(ROOT)))
    assert cited, "no citations found"
    missing = {a: where for a, where in cited.items() if a not in anchors}
    assert missing == {}
