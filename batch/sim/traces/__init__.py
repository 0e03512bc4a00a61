"""Trace readers: real GPU-cluster job traces and Tephra's ledger, reduced to a `Workload`.

`load_trace(name_or_path, fmt=...)` is the one entry point. Names: `philly`, `elasticflow`,
`openb` (the copies in `shared/traces/`); a path picks its format from `fmt` or from its name.
The ledger format is read by `batch.sim.traces.ledger.load_ledger` (it needs a database URL).
"""

from __future__ import annotations

from pathlib import Path

from batch.sim.errors import SimInputError
from batch.sim.traces.common import traces_root
from batch.sim.traces.elasticflow import read_elasticflow
from batch.sim.traces.openb import read_openb
from batch.sim.traces.philly import read_philly
from batch.sim.workload import Workload

__all__ = ["FORMATS", "load_trace", "traces_root"]

FORMATS = ("philly", "elasticflow", "openb", "ledger")


def _guess_format(path: Path) -> str:
    text = str(path).lower()
    if "philly" in text:
        return "philly"
    if "openb" in text or "alibaba" in text:
        return "openb"
    if "elasticflow" in text or "itp" in text or path.name.startswith("cluster"):
        return "elasticflow"
    raise SimInputError(f"{path}: cannot tell the trace format from the name; pass --format")


def load_trace(name_or_path: str, *, fmt: str | None = None, limit: int | None = None) -> Workload:
    """Read a named trace or a file/folder into a workload sorted by submit time."""
    if fmt is not None and fmt not in FORMATS:
        raise SimInputError(f"--format: must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "ledger":
        raise SimInputError("--format ledger: give a database URL with --db (see tephra whatif)")
    named = {
        "philly": "philly",
        "elasticflow": "msft-itp-elasticflow",
        "openb": "alibaba-openb-2023",
    }
    if name_or_path in named and not Path(name_or_path).exists():
        path = traces_root() / named[name_or_path]
        fmt = fmt or name_or_path
    else:
        path = Path(name_or_path)
        if not path.exists():
            raise SimInputError(
                f"--trace {name_or_path}: no such file or folder (named traces: {', '.join(named)})"
            )
        fmt = fmt or _guess_format(path)
    if fmt == "philly":
        workload = read_philly(path)
    elif fmt == "elasticflow":
        workload = read_elasticflow(path)
    else:
        workload = read_openb(path)
    return workload.limited(limit)
