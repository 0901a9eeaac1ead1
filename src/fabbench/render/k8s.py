"""Kubernetes manifests for a K8sJob: an Indexed Job and a headless Service for torch primitives
(the rendezvous at index 0's pod, <name>-0.<name>), an MPIJob (kubeflow.org/v2beta1, mpirun with
the operator's hostfile) for MPI and Horovod. The chart (charts/fabbench) renders the same jobs."""

from __future__ import annotations

from fabbench import __version__
from fabbench.render.context import K8sJob
from fabbench.render.engine import render
from fabbench.render.fabric import fabric_env

HOSTFILE = "/etc/mpi/hostfile"  # where the MPI operator mounts the hostfile it writes


def labels(job: K8sJob, managed_by: str = "fabbench-render") -> dict[str, str]:
    return {"app.kubernetes.io/name": "fabbench", "app.kubernetes.io/instance": job.name,
            "app.kubernetes.io/version": __version__,
            "app.kubernetes.io/component": "benchmark",
            "app.kubernetes.io/managed-by": managed_by}


def render_k8s(job: K8sJob) -> str:
    bench = job.benchmark
    fab = fabric_env(bench.fabric, bench.backend, bench.wire, gpudirect=bench.gpudirect,
                     iface=bench.iface,
                     rdma_device=bench.rdma_device)
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
               "hostfile": HOSTFILE, "devices": fab.profile.device_files(bench.wire)}
    if bench.launch == "mpi":
        mpirun = ["--hostfile", HOSTFILE, "-np", str(job.ranks), "--bind-to", "none"]
        for key, value in sorted(fab.mca.items()):
            mpirun += ["--mca", key, value]
        for key in sorted(k for k in env if not k.startswith("OMPI_MCA_")):
            mpirun += ["-x", key]
        context["mpirun"] = [*mpirun, job.fabbench_command, *run]
        return render("k8s-mpijob.yaml.j2", **context)
    return render("k8s-job.yaml.j2", **context)
