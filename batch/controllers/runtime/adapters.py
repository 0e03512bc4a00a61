"""The framework adapters published under the `tephra.integrations` entry points."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)


def load_workload_adapters() -> list[Any]:
    """Framework adapters published under the `tephra.integrations` entry points."""
    try:
        from batch.api.integration import load_adapters

        return list(load_adapters())
    except Exception:  # an adapter that fails to load must not stop the controllers
        log.exception("loading tephra.integrations adapters failed")
        return []


def workload_finished(workload: Mapping[str, Any], adapter: object) -> bool:
    """Whether ``adapter`` observes ``workload`` as finished (no pod of it starts again)."""
    from batch.api.integration import observe_workload

    seen = observe_workload(workload, [adapter])
    return seen is not None and seen.finished
