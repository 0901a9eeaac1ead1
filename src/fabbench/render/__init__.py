"""Render: turn a benchmark and a job's shape into files the schedulers run (an sbatch script,
Kubernetes manifests). Render never runs a benchmark and never imports a communication library.

    from fabbench.config import RunConfig
    from fabbench.render import Benchmark, SlurmJob, render_slurm
    run = RunConfig(fabric="ethernet", primitive="gloo", device="cpu")
    print(render_slurm(SlurmJob(name="fb", nodes=2, benchmarks=(Benchmark(config=run),))))
"""

from fabbench.render.context import Benchmark, K8sJob, SlurmJob
from fabbench.render.k8s import render_k8s
from fabbench.render.slurm import render_slurm

__all__ = ["Benchmark", "K8sJob", "SlurmJob", "render_k8s", "render_slurm"]
