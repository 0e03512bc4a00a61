"""All Kubernetes I/O: clients, the watch-fed cache, binder, evictor, status writer and leases."""
