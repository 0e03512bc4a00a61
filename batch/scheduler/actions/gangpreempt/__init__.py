"""gangpreempt: whole-gang preemption inside a queue — Volcano's gangpreempt action.

For each starving job, queue by queue: victims are running tasks of *lower-priority* jobs of the
*same queue*, grouped per victim job in a safe bundle (the job's surplus above its gang minimum)
and a whole bundle (the rest); safe bundles are used first, whole bundles only when the safe ones
do not free enough, so a victim job either keeps its gang minimum or loses every candidate task
it has in the domain. The whole preemptor gang must fit in one domain (the cluster, or a HyperNode
domain for a job with a networkTopology); the plan is committed only if the job is then
pipelined. See actionlib/gang_victims.py and docs/volcano-semantics.md#gang-eviction.

Arguments (``configurations: - name: gangpreempt``): ``maxDomains`` (8) and
``allowWholeBundle`` (true: whole victim gangs may be evicted; false: only surplus tasks).
Evictions carry reason ``gangpreempt``.
"""

from __future__ import annotations

from batch.scheduler.actionlib.gang_victims import (
    GANG_ARGS,
    GangEviction,
    parse_gang_arguments,
)
from batch.scheduler.framework.arguments import Arguments
from batch.scheduler.framework.registry import Action
from batch.scheduler.framework.session import Session


class GangPreempt(Action):
    name = "gangpreempt"
    ARGUMENTS = GANG_ARGS

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.args = parse_gang_arguments(arguments, "gangpreempt")

    def execute(self, ssn: Session) -> None:
        GangEviction(ssn, self.args, reclaim=False).run()
