"""A Kubernetes Indexed Job and a headless Service: `fabbench render k8s` writes them for
spawned ranks (k8s-job.yaml.j2: the rendezvous at index 0's pod, <name>-0.<name>; each pod a
rank, or torchrun in a pod of several, as launch.launchers.pod says). Its pods are ranks (launch
.discover places them), so no study runs in it."""

from __future__ import annotations

from fabbench.launch.schedulers.scheduler import Scheduler, register


@register
class IndexedJob(Scheduler):
    name = "indexed-job"
    renders = "k8s"
    families = frozenset({"rendezvous"})
    template = "k8s-job.yaml.j2"
    studies = False
