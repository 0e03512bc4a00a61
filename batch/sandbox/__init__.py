"""The embedded Kubernetes API server and node emulator: the local cluster for tests and demos."""
