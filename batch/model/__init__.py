"""The scheduler's cluster model: node arrays, tasks, jobs, queues and the incremental cache."""
