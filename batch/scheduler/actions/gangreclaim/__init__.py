"""gangreclaim: whole-gang reclamation across queues — Volcano's gangreclaim action.

For each starving job of a queue that is not Overused and is entitled to more (Preemptive for
all of the job's pending tasks at once): victims are Running tasks of jobs in *other*,
reclaimable queues, grouped per victim job in a safe bundle (surplus above the gang minimum) and
a whole bundle (the rest), taken safe first and then in victim-queue order, so a victim job
either keeps its gang minimum or loses every candidate task it has in the domain. The whole
reclaiming gang must fit in one domain; the plan is committed only if the job is then pipelined.
See framework/gang_eviction.py and docs/volcano-semantics.md#gang-eviction.

Arguments (``configurations: - name: gangreclaim``): ``maxDomains`` (8) and
``allowWholeBundle`` (true). Evictions carry reason ``gangreclaim``.
"""

from __future__ import annotations

from batch.scheduler.framework.arguments import Arguments
from batch.scheduler.framework.gang_eviction import GangEviction, parse_gang_arguments
from batch.scheduler.framework.registry import Action
from batch.scheduler.framework.session import Session


class GangReclaim(Action):
    name = "gangreclaim"

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.args = parse_gang_arguments(arguments)

    def execute(self, ssn: Session) -> None:
        GangEviction(ssn, self.args, reclaim=True).run()
