"""The VCJob reconciler: a pure function from observed state to intended changes.

`reconcile_job(job, pods, podgroup, now=...)` reproduces Volcano's job controller
(`volcano-semantics.md#job-podgroup-and-pods, #events-and-actions, #policy-matching,
#job-state-machine`): initialisation (phase Pending, plugin objects, PVCs, PodGroup
`<job>-<uid>`), pods only once the PodGroup has left Pending, lifecycle policies (task-level before
job-level, exit codes, timeouts), the job state machine with kill(soft)/kill(all), maxRetry and
retryCount, minSuccess, dependsOn, scale up/down, bus Commands and ttlSecondsAfterFinished.

It is level-triggered: events (PodFailed, PodEvicted, PodPending, TaskCompleted, TaskFailed,
Unknown) are derived from the pods' and PodGroup's current state, and every transition is made
idempotent by what it writes to the job status first:
* a full kill bumps `status.version`; pods of an older version never raise events again and are
  deleted unless the kill keeps finished pods;
* a targeted kill (RestartTask/Pod/Partition) writes a kill token
  (`status.controlledResources["tephra.io/kill-target"]`) naming the target and the retry count
  it was issued at; matching pods created before it are deleted, never re-raise the event;
* a Command's uid is written (`tephra.io/last-command`) in the same status write as its
  transition; a Command whose uid is already recorded is only deleted.
Marks of pods already condemned by the observed status are written before any new status write,
deletions only after the write that counts them as terminating, so a controller killed between
any two writes neither repeats nor loses a transition, nor mistakes its own deletions for evictions.
A pod missing against the last written `taskStatusCount` is an eviction only if it was of the
current version (`tephra.io/retained` counts the older finished pods a kill kept). Plugin objects
that follow the task layout (the svc ConfigMap) are rewritten before the status write that records
the layout (`tephra.io/layout`).

A policy `timeout` runs from the event's own time (pod creation for PodPending, the containers'
finishedAt, or the conditions/startTime of a pod the kubelet rejected, for PodFailed, the last
finishedAt for TaskCompleted, the PodGroup's Unschedulable condition for Unknown, the
deletionTimestamp for PodEvicted), else from when a reconcile first saw the condition; those
first-seen times, and the timed PodEvicted events of pods that are gone, are kept in
`tephra.io/timers` until the action runs (once) or the condition clears.
Bounded work: a reconcile creates at most `pod_batch` pods (the first missing ones, task by task)
and asks to run again at once for the rest, so it never holds more than a batch of new pods and the
work queue, a deletion of the job and shutdown are served between batches. A job over the size
limits (`batch.api.admission.AdmissionLimits`; admission refuses it, so it got here without
admission) is never expanded: a new one fails at once, one scaled over them is left as it is.
No I/O, no wall clock: `now` is passed in (the simulator drives this on a virtual clock).

A reconcile reads as its steps, each a pure function tested on its own
(tests/controllers/test_job_steps.py): `read_job`, the refusals (`refuse_oversized`,
`job_plugins`), `initialise` for a new job; then `decide` (`condemned`, `choose_request`,
`plan_action`, `plan_kills`, `settle_phase`) and `carry_out` (`sync_children`, `_missing_pods`,
`desired_status`, `ordered_actions`, `apply_ttl`).
"""

from __future__ import annotations

from batch.controllers.job.base import (
    JSON as JSON,
    LAYOUT_KEY as LAYOUT_KEY,
    RETAIN_FINISHED as RETAIN_FINISHED,
    RETAIN_NONE as RETAIN_NONE,
    RETAINED_KEY as RETAINED_KEY,
    TIMERS_KEY as TIMERS_KEY,
    TOKEN_RETAIN as TOKEN_RETAIN,
    TOKEN_TARGET as TOKEN_TARGET,
    PodView as PodView,
    Request as Request,
)
from batch.controllers.job.events import (
    evictions_seen as evictions_seen,
    evictions_under_way as evictions_under_way,
    pod_events as pod_events,
    podgroup_events as podgroup_events,
    task_events as task_events,
    vanished_pods as vanished_pods,
)
from batch.controllers.job.facts import (
    JobFacts as JobFacts,
    pending_forbidden as pending_forbidden,
    read_job as read_job,
    refuse_oversized as refuse_oversized,
)
from batch.controllers.job.plugin_objects import (
    FOREIGN_RECHECK_SECONDS as FOREIGN_RECHECK_SECONDS,
    NOT_OWNED as NOT_OWNED,
    guard_plugin_objects as guard_plugin_objects,
    job_plugins as job_plugins,
    plugin_object_keys as plugin_object_keys,
    spare_foreign as spare_foreign,
)
from batch.controllers.job.pods import (
    NO_PRIORITY_CLASS as NO_PRIORITY_CLASS,
)
from batch.controllers.job.policies import (
    Fired as Fired,
    Killer as Killer,
    condemned as condemned,
    fire_policies as fire_policies,
    policy_action as policy_action,
    select_action as select_action,
)
from batch.controllers.job.reconcile import (
    Choice as Choice,
    Decision as Decision,
    announce as announce,
    apply_ttl as apply_ttl,
    carry_out as carry_out,
    choose_request as choose_request,
    decide as decide,
    desired_status as desired_status,
    live_pods as live_pods,
    may_create_pods as may_create_pods,
    ordered_actions as ordered_actions,
    reconcile_job as reconcile_job,
    relayout as relayout,
    release_podgroup as release_podgroup,
    settle_phase as settle_phase,
    sync_children as sync_children,
    waiting_for_claims as waiting_for_claims,
    write_status as write_status,
)
from batch.controllers.job.transitions import (
    initialise as initialise,
    level_phase as level_phase,
    next_state as next_state,
    plan_action as plan_action,
    plan_kills as plan_kills,
    status_patch as status_patch,
    sync_podgroup as sync_podgroup,
    take_command as take_command,
    ttl_due as ttl_due,
)
from batch.controllers.jobspec import owned_by_job as owned_by_job, podgroup_name as podgroup_name
