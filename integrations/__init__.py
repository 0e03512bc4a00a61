"""Framework adapters (PyTorchJob, MPIJob, Ray, Spark): workload -> gang PodGroup.

Adapters depend on `batch.api` only and plug into the PodGroup controller through the
`tephra.integrations` entry-point group.
"""
