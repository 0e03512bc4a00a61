"""kopf handlers over pure reconcilers: jobs, queues, podgroups, commands and garbage collection."""
