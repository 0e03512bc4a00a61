"""The scheduler's cluster model: resource vectors, node arrays, tasks, jobs, queues and the incremental cache."""
