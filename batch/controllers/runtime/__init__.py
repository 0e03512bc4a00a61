"""The parts `batch.controllers.operator.ControllerManager` is composed of, one job each.

* `settings`: what the manager was started with (scheduler names, adapters, batch sizes).
* `keys`: the de-duplicating work queue and the timers that put a key back on it later.
* `leadership`: the Lease, and the fence a reconcile's writes are checked against.
* `watch`: what the watches tell: events turned into keys, and the caches they feed.
* `kopfwiring`: kopf's registry of `on.event` handlers and its settings.
* `ledgerhook`: the ledger hook (object changes recorded, the start's reconcile with the API).
* `writes`: applying a reconcile's actions, with retries, backoff and Forbidden events.
* `jobs`, `queues`, `grouping` (pods not of VCJobs, and their PodGroups): reading what each
  reconciler needs and applying what it decided.
* `adapters`: the framework adapters published as entry points.
"""
