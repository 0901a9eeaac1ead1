"""Kubernetes manifests for a K8sJob: an Indexed Job and a headless Service for torch primitives
(the rendezvous at index 0's pod, <name>-0.<name>; torchrun in a pod of several ranks), an MPIJob
(kubeflow.org/v2beta1, mpirun with the operator's hostfile; the workers run the image's sshd,
containers/sshd.sh, as root) for MPI and Horovod, each launch composed by launch.launchers, each
template its scheduler's (launch.schedulers: indexed_job, mpijob). Every pod is told its
Kubernetes node (FABBENCH_NODE_NAME). The chart (charts/fabbench) renders the same jobs."""

from __future__ import annotations

from typing import Any

from fabbench import __version__
from fabbench.launch import schedulers
from fabbench.launch.launchers.pod import HOSTFILE, Pod
from fabbench.launch.words import Shell
from fabbench.render.context import PREFLIGHT_FLOORS, Benchmark, K8sJob
from fabbench.render.fabric import FabricEnv, fabric_env
from fabbench.render.jinja_env import k8s_arg, render


def labels(job: K8sJob, managed_by: str = "fabbench-render") -> dict[str, str]:
    return {"app.kubernetes.io/name": "fabbench", "app.kubernetes.io/instance": job.name,
            "app.kubernetes.io/version": __version__,
            "app.kubernetes.io/component": "benchmark",
            "app.kubernetes.io/managed-by": managed_by}


# What the chart's values default to (charts/fabbench/values.yaml): each rank container's CPU and
# memory, those of the containers that hold no rank (the MPIJob's launcher), the user of the
# Indexed Job's pods (the image's fabbench), the Job's deadline (docs/security.md).
RESOURCES = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "16Gi"}}
HELPER_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "2Gi"}}
SECURITY = {"user": 1000, "group": 1000, "fs_group": 1000}
DEADLINE_S = 3600


def rank_resources(job: K8sJob, registers_memory: bool) -> dict[str, Any]:
    """A rank container's requests and limits (its GPUs and RDMA devices among the limits), and
    whether it adds IPC_LOCK: only where the fabric registers memory with the NIC (RDMA)."""
    limits: dict[str, Any] = dict(RESOURCES["limits"])
    if job.gpus_per_node:
        limits[job.gpu_resource] = job.gpus_per_node
    if job.rdma_resource:
        limits[job.rdma_resource] = job.rdma_per_node
    return {"requests": dict(sorted(RESOURCES["requests"].items())),
            "limits": dict(sorted(limits.items())), "ipc_lock": registers_memory}


def render_k8s(job: K8sJob) -> str:
    bench = job.benchmark
    fab = _fabric(job)
    devices = fab.profile.device_files(bench.config.wire)
    env = dict(sorted({**fab.env, **job.run_env}.items()))  # every rank's: the chart's too
    context = {"job": job, "bench": bench, "fabric": fab, "env": env,
               "resources": rank_resources(job, bool(devices)),
               "helper_resources": HELPER_RESOURCES, "security": SECURITY,
               "deadline_s": DEADLINE_S, "labels": labels(job),
               "selector": {k: v for k, v in labels(job).items()
                            if k in ("app.kubernetes.io/name", "app.kubernetes.io/instance")},
               "hostfile": HOSTFILE, "devices": devices}
    context["preflight"] = None if job.preflight is None else {
        "floors": job.preflight, "script": k8s_arg(PREFLIGHT_SCRIPT),
        "args": pod_argv(job, fab, job.preflight_benchmark, "--floors", PREFLIGHT_FLOORS)}
    words = pod_argv(job, fab)
    job_of = schedulers.rendered("k8s", bench.launch)  # an MPIJob, an Indexed Job
    assert job_of.template is not None  # every scheduler of `render k8s` has one
    return render(job_of.template, folder=job_of.templates, **context, command=words[:1],
                  args=words[1:])


# The check before the job: its init container's script, run by /bin/sh -c with the launch of
# the short allreduce ("$@", whose `fabbench run --floors` ends every rank with rank 0's verdict).
# The output goes to the log as it comes; on a failure the FAIL line (else fabbench's error, or
# the line naming rank 0) is the container's termination message. The chart's
# fabbench.preflightScript is the same text.
PREFLIGHT_SCRIPT = "\n".join((
    "set -u",
    '{ "$@"; echo "$?" > /tmp/preflight.code; } 2>&1 | tee /tmp/preflight.log',
    "code=$(cat /tmp/preflight.code)",
    '[ "$code" = 0 ] && exit 0',
    r"{ grep '^FAIL' /tmp/preflight.log || grep 'fabbench: error\|missed the floors' "
    "/tmp/preflight.log; } | head -c 4096 > /dev/termination-log",
    'exit "$code"'))


def _fabric(job: K8sJob) -> FabricEnv:
    bench = job.benchmark
    cfg = bench.config
    return fabric_env(cfg.fabric, bench.backend, cfg.wire, gpudirect=cfg.gpudirect,
                      iface=cfg.iface, rdma_device=cfg.rdma_device)


def pod_argv(job: K8sJob, fab: FabricEnv | None = None, bench: Benchmark | None = None,
             *more: str) -> list[str]:
    """The command line of the pod that starts the ranks (launch.launchers.pod.Pod.launch: an
    MPIJob's launcher, an Indexed Job's pods) of ``bench`` (default: the job's), then ``more``, in
    Kubernetes' syntax: literal words escaped ($ as $$), the launcher's $(VAR) references kept;
    mpirun passes the ranks the fabric's variables and the image's. The chart's
    fabbench.podLaunch writes the same."""
    bench = bench or job.benchmark
    fab = fab or _fabric(job)
    out = f"{job.results_path.rstrip('/')}/{job.name}-{bench.label}.jsonl"
    argv = Pod.launch(bench.launch, nodes=job.nodes, per_node=job.ranks_per_node,
                      program=[job.fabbench_command, *bench.run_args(), "--out", out, *more],
                      mca=fab.mca,
                      exports=[*(k for k in fab.env if not k.startswith("OMPI_MCA_")),
                               *job.run_env])
    return [w if isinstance(w, Shell) else k8s_arg(w) for w in argv]
