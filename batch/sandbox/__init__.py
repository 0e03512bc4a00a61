"""The embedded Kubernetes API server and node emulator: the local cluster for tries, tests and benchmarks."""
