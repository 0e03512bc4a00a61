"""Where the sandbox gets Tephra's CRDs: the repository's generated `crds/` directory.

Falls back to generating them in memory with `batch.api.crdgen` when the directory is absent or
empty (e.g. an installed wheel without the repository checkout).
"""

from __future__ import annotations

import copy
import importlib
import logging
from pathlib import Path
from typing import Any

import yaml

import batch

log = logging.getLogger(__name__)


def crds_dir() -> Path | None:
    root = Path(batch.__file__).resolve().parent.parent
    d = root / "crds"
    return d if d.is_dir() else None


_cache: dict[str, list[dict[str, Any]]] = {}
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_crds(directory: Path | None = None) -> list[dict[str, Any]]:
    """The CRD manifests (fresh copies; loaded or generated once per process)."""
    d = directory or crds_dir()
    key = str(d)
    if key not in _cache:
        _cache[key] = _load(d)
    return copy.deepcopy(_cache[key])


def _load(d: Path | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if d is not None:
        for f in sorted(d.rglob("*.y*ml")):
            for doc in yaml.load_all(f.read_text(), Loader=_Loader):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    out.append(doc)
    if out:
        return out
    try:
        crdgen: Any = importlib.import_module("batch.api.crdgen")
    except ImportError:
        log.warning("no crds/ directory and no batch.api.crdgen: Tephra CRDs are not installed")
        return []
    generated = crdgen.generate_crds()
    return list(generated.values()) if isinstance(generated, dict) else list(generated)
