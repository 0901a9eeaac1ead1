"""Kubernetes manifests for a K8sJob (filled in below)."""
from __future__ import annotations

from fabbench.render.context import K8sJob


def render_k8s(job: K8sJob) -> str:
    raise NotImplementedError
