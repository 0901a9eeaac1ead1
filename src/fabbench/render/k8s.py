"""Kubernetes manifests for a K8sJob: an Indexed Job and a headless Service for torch primitives
(the rendezvous at index 0's pod, <name>-0.<name>; torchrun in a pod of several ranks), an MPIJob
(kubeflow.org/v2beta1, mpirun with the operator's hostfile) for MPI and Horovod, each launch
composed by launch.table. The chart (charts/fabbench) renders the same jobs."""

from __future__ import annotations

from fabbench import __version__
from fabbench.launch import table
from fabbench.render.context import K8sJob
from fabbench.render.engine import k8s_arg, render
from fabbench.render.fabric import fabric_env


def labels(job: K8sJob, managed_by: str = "fabbench-render") -> dict[str, str]:
    return {"app.kubernetes.io/name": "fabbench", "app.kubernetes.io/instance": job.name,
            "app.kubernetes.io/version": __version__,
            "app.kubernetes.io/component": "benchmark",
            "app.kubernetes.io/managed-by": managed_by}


def render_k8s(job: K8sJob) -> str:
    bench = job.benchmark
    cfg = bench.config
    fab = fabric_env(cfg.fabric, bench.backend, cfg.wire, gpudirect=cfg.gpudirect,
                     iface=cfg.iface, rdma_device=cfg.rdma_device)
    out = f"{job.results_path.rstrip('/')}/{job.name}-{bench.label}.jsonl"
    run = [*bench.run_args(), "--out", out]
    resources = {}
    if job.gpus_per_node:
        resources[job.gpu_resource] = job.gpus_per_node
    if job.rdma_resource:
        resources[job.rdma_resource] = job.rdma_per_node
    env = dict(sorted(fab.env.items()))
    context = {"job": job, "bench": bench, "fabric": fab, "env": env, "run": run,
               "resources": resources, "labels": labels(job),
               "selector": {k: v for k, v in labels(job).items()
                            if k in ("app.kubernetes.io/name", "app.kubernetes.io/instance")},
               "hostfile": table.HOSTFILE_K8S,
               "devices": fab.profile.device_files(cfg.wire)}
    if bench.launch == "mpi":
        argv = [*table.mpirun_over_hostfile(
            table.HOSTFILE_K8S, job.ranks, mca=dict(sorted(fab.mca.items())),
            exports=sorted(k for k in env if not k.startswith("OMPI_MCA_"))),
            job.fabbench_command, *run]
        return render("k8s-mpijob.yaml.j2", **context, **_container(argv))
    pod = table.torchrun(job.nodes, job.ranks_per_node) if job.ranks_per_node > 1 else []
    return render("k8s-job.yaml.j2", **context,
                  **_container([*pod, job.fabbench_command, *run]))


def _container(argv: list[str]) -> dict[str, list[str]]:
    """A container's command and args: literal words escaped ($ as $$), the table's
    $(VAR) references kept."""
    words = [w if isinstance(w, table.Shell) else k8s_arg(w) for w in argv]
    return {"command": words[:1], "args": words[1:]}
