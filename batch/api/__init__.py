"""Volcano-compatible API types, Kubernetes quantities, admission and CRD generation.

The bottom layer: everything else may import it; it imports nothing of Tephra.
"""
