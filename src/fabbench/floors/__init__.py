"""Acceptance floors: rules over measured figures (floors files), baselines made from runs,
and the verdict, node by node."""
