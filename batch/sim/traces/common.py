"""Helpers shared by the trace readers: where `shared/traces` is, CSV reading with clear errors."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path

from batch.sim.errors import SimInputError

__all__ = ["GIB", "MIB", "read_rows", "traces_root"]

MIB = 1 << 20
GIB = 1 << 30


def traces_root() -> Path:
    """`$TEPHRA_TRACES_DIR`, else the first `shared/traces` beside the repo or a parent of cwd."""
    env = os.environ.get("TEPHRA_TRACES_DIR")
    if env:
        return Path(env)
    starts = [Path.cwd().resolve(), Path(__file__).resolve()]
    for start in starts:
        for parent in [start, *start.parents]:
            candidate = parent / "shared" / "traces"
            if candidate.is_dir():
                return candidate
    raise SimInputError("cannot find shared/traces (set TEPHRA_TRACES_DIR or pass a trace path)")


def read_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) for every non-blank row; a missing column is one clear error."""
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise SimInputError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise SimInputError(f"{path}: missing column(s) {', '.join(missing)}")
        for row in reader:
            if not any(row.values()):
                continue
            yield reader.line_num, row


def bad_row(path: Path, line: int, column: str, value: str, rule: str) -> SimInputError:
    return SimInputError(f"{path}:{line}: column {column}={value!r}: {rule}")
