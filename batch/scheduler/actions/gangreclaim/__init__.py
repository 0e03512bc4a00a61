"""gangreclaim: whole-gang reclamation across queues — Volcano's gangreclaim action.

For each starving job of a queue that is not Overused and is entitled to more (Preemptive for
all of the job's pending tasks at once): victims are Running tasks of jobs in *other*,
reclaimable queues, grouped per victim job in a safe bundle (surplus above the gang minimum) and
a whole bundle (the rest), taken safe first and then in victim-queue order, so a victim job
either keeps its gang minimum or loses every candidate task it has in the domain. The whole
reclaiming gang must fit in one domain; the plan is committed only if the job is then pipelined.
See actionlib/gang_victims.py and docs/volcano-semantics.md#gang-eviction.

A bundle of a queue whose allocated (less the bundles already chosen) fits its deserved share is
never taken (Volcano's Reclaimable), unless it is the whole of a gang larger than that share.
Tephra's floors (actionlib/queue_floor.py, as in reclaim): a bundle is never taken when that
would bring its queue below its ``guarantee`` on a guaranteed resource; with
``keepVictimQueueAtDeserved: true`` (Tephra's default configuration) only while the victim
queue's share stays at or above ``1 - reclaimHysteresis``, so gangreclaim takes from queues above
their fair share and never leaves them entitled to reclaim back. A job that fits what is idle
or being released in a domain is pipelined there before any victim is chosen.

Arguments (``configurations: - name: gangreclaim``): ``maxDomains`` (8),
``allowWholeBundle`` (true), ``keepVictimQueueAtDeserved`` (false), ``reclaimHysteresis`` (0.0,
within 0..1). Evictions carry reason ``gangreclaim``.
"""

from __future__ import annotations

from batch.scheduler.actionlib.gang_victims import (
    GANG_ARGS,
    GangEviction,
    parse_gang_arguments,
)
from batch.scheduler.actionlib.queue_floor import FLOOR_ARGS, parse_floor_arguments
from batch.scheduler.framework.arguments import Arguments
from batch.scheduler.framework.registry import Action
from batch.scheduler.framework.session import Session


class GangReclaim(Action):
    name = "gangreclaim"
    ARGUMENTS = (*GANG_ARGS, *FLOOR_ARGS)

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.args = parse_gang_arguments(arguments, "gangreclaim")
        self.floor = parse_floor_arguments(arguments, "gangreclaim")

    def execute(self, ssn: Session) -> None:
        GangEviction(ssn, self.args, reclaim=True, floor=self.floor).run()
