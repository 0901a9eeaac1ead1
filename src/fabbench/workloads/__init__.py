"""Workloads: what the ranks do (collectives sweep, training step, halo exchange)."""
