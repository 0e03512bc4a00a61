"""binpack: Volcano's binpack plugin — prefer fuller nodes (docs/volcano-semantics.md#plugins).

score = Σ_r w_r * (used_r + request_r) / allocatable_r over the requested resources that have a
weight, / Σ those weights, x 100 x ``binpack.weight``; a resource that would overflow zeroes
the node's score (a node without that resource contributes 0 for it, as in Volcano).
Arguments: ``binpack.weight`` (1),
``binpack.cpu`` (1), ``binpack.memory`` (1), ``binpack.resources`` (comma list of extended
resources) with ``binpack.resources.<name>`` weights (default 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from batch.model.info import TaskTemplate
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.nodes import FloatVec, SessionNodes
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session

MAX_SCORE = 100


class BinpackPlugin(Plugin):
    name = "binpack"
    ARGUMENTS = (
        Arg("binpack.weight", "float", 1, "weight of the binpack score", min=0),
        Arg("binpack.cpu", "float", 1, "weight of cpu in the score", min=0),
        Arg("binpack.memory", "float", 1, "weight of memory in the score", min=0),
        Arg("binpack.resources", "list", "", "further resources to score (names)"),
        Arg(
            "binpack.resources.<resource>",
            "float",
            1,
            "weight of a resource named in `binpack.resources`",
            min=0,
        ),
    )

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        a = arguments
        self.weight = a.get_float("binpack.weight", 1)
        self.weights: dict[str, float] = {
            "cpu": a.get_float("binpack.cpu", 1),
            "memory": a.get_float("binpack.memory", 1),
        }
        for raw in a.get_str("binpack.resources", "").split(","):
            name = raw.strip()
            if name:
                self.weights[name] = a.get_float(f"binpack.resources.{name}", 1)
        for w in [self.weight, *self.weights.values()]:
            if w < 0:
                raise ConfigError(f"plugin binpack: weights must be >= 0, got {w}")

    keeps_callbacks = True

    def on_session_open(self, ssn: Session) -> None:
        #: the session's (resource index, weight) pairs the score reads
        self._dims: list[tuple[int, float]] = []
        for name, w in self.weights.items():
            i = ssn.resources.get(name)
            if i is not None and w > 0:
                self._dims.append((i, w))

    def register_kept(self, hooks: Hooks) -> None:
        if not self.weight:
            return
        scale = self.weight * MAX_SCORE

        def score_one(tmpl: TaskTemplate, nd: SessionNodes, idx: int) -> float:
            dims = self._dims
            alloc, used, _ = nd.cols(idx)
            rl = tmpl.req_list
            acc = 0.0
            wsum = 0.0
            for d, w in dims:
                req = rl[d]
                if req <= 0:
                    continue
                a = alloc[d]
                final = used[d] + req
                if a > 0:
                    if final > a:
                        return 0.0
                    acc += final * w / a
                wsum += w
            if wsum == 0:
                return acc
            return acc / wsum * scale

        def score(tmpl: TaskTemplate, nd: SessionNodes, idx: Any) -> Any:
            if isinstance(idx, int):
                return score_one(tmpl, nd, idx)
            dims = self._dims
            shape = nd.alloc[1, idx].shape
            acc: FloatVec = np.zeros(shape)
            wsum = 0.0
            overflow = np.zeros(shape, dtype=np.bool_)
            for d, w in dims:
                req = int(tmpl.req[d])
                if req <= 0:
                    continue
                alloc = nd.alloc[d, idx]
                final = nd.used[d, idx] + req
                overflow |= (alloc > 0) & (final > alloc)
                acc += np.where(alloc > 0, final * w / np.where(alloc > 0, alloc, 1), 0.0)
                wsum += w
            if wsum == 0:
                return acc
            out: FloatVec = np.where(overflow, 0.0, acc / wsum * scale)
            return out

        hooks.add_batch_node_order_fn(score, local=True)
