"""`fabbench render slurm|k8s`: print what a scheduler runs. Parsing only; the library renders."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fabbench.cli.options import run_options
from fabbench.config import RENDERED_DEFAULTS

if TYPE_CHECKING:
    from fabbench.render.context import Benchmark

render_app = typer.Typer(name="render", no_args_is_help=True, help=(
    "Print the job files a scheduler runs: an sbatch script or Kubernetes manifests.\n\n"
    "Examples:\n"
    "    fabbench render slurm --nodes 2 --fabric ethernet --primitive mpi > job.sbatch\n"
    "    fabbench render k8s --nodes 2 --primitive gloo > job.yaml"))

# `fabbench run`'s options are render's too (fabbench.config), less --ranks and --out (the job
# places its ranks and names its results file), with a rendered job's defaults.
Run = run_options(placed=False, defaults=RENDERED_DEFAULTS)
Nodes = Annotated[int, typer.Option("--nodes", "-N", help="Nodes of the job.")]
Gpus = Annotated[int, typer.Option(help="GPUs per node (one rank per GPU; 0: CPU ranks). "
                                        "Decides --device and --primitive when not given.")]
Name = Annotated[str, typer.Option(help="Job name (a DNS-1123 label).")]
Extra = Annotated[list[str] | None, typer.Option(
    "--extra-arg", help="One more argument for `fabbench run` (repeatable), passed verbatim: "
    "for what fabbench does not declare (its own options are render's).")]
Command = Annotated[str, typer.Option(help="How the nodes (or the image) start fabbench, e.g. "
                                           "/opt/venv/bin/fabbench.")]


def _bench(options: dict[str, Any], gpus_per_node: int,
           extra_arg: list[str] | None) -> Benchmark:
    from fabbench.render.from_options import benchmark

    return benchmark(gpus_per_node=gpus_per_node, extra_args=extra_arg or (), **options)


@render_app.command("slurm")
@Run
def slurm(
    nodes: Nodes = 1, gpus_per_node: Gpus = 0,
    tasks_per_node: Annotated[int | None, typer.Option(
        help="Ranks per node. Default: --gpus-per-node, else 1.")] = None,
    runtime: Annotated[str, typer.Option(help="apptainer, charliecloud, pyxis or none (fabbench "
                                              "installed on the nodes).")] = "none",
    image: Annotated[str | None, typer.Option(
        help="The image: a .sif or docker:// reference (apptainer), a directory or .sqfs "
        "(charliecloud), a pyxis image. Every rank gets it as FABBENCH_IMAGE_REF, which its "
        "results record (with the digest, for a reference @sha256:...).")] = None,
    time: Annotated[str | None, typer.Option(help="Time limit (Slurm format).")] = None,
    partition: Annotated[str | None, typer.Option(help="Partition.")] = None,
    account: Annotated[str | None, typer.Option(help="Account.")] = None,
    results_dir: Annotated[str, typer.Option(help="Shared directory for the results.")] =
    "results",
    bind: Annotated[list[str] | None, typer.Option(help="More container binds SRC[:DST].")] =
    None,
    name: Name = "fabbench", fabbench_command: Command = "fabbench", extra_arg: Extra = None,
    study: Annotated[str | None, typer.Option(
        help="Render a whole study (`fabbench study list`, or a .toml file) in one "
        "allocation instead of one benchmark; --nodes defaults to the study's largest.")] =
    None,
    verify: Annotated[str | None, typer.Option(
        metavar="FILE", help="After the run, judge its results against this floors file "
        "(`fabbench floors verify`, docs/floors.md; 'reference': the shipped floors) and exit "
        "with verify's code: 0 every floor met, 1 a floor failed (the failing nodes named in "
        "the job's output), 2 bad input. A health-check job, or a prolog's gate. The path is "
        "made absolute and must be readable on the job's nodes: the job copies it beside the "
        "results at its start.")] = None,
    **options: object,
) -> None:
    """Print an sbatch script that runs the benchmark on --nodes nodes.

    Examples:
        fabbench render slurm --nodes 4 --gpus-per-node 8 --fabric omnipath --primitive mpi
            --runtime apptainer --image fabbench.sif > job.sbatch
        fabbench render slurm --nodes 8 --workload pairs --verify /shared/floors.toml
            > check.sbatch  # a health check: the job fails when a node is below its floor
        fabbench render slurm --study quick > study.sbatch  # a study in one allocation
    """
    if study is not None and verify is not None:
        from fabbench.errors import UsageError

        raise UsageError("--verify judges one benchmark's results: not with --study")
    if study is not None:
        from fabbench.render.study_sbatch import render_study_slurm, study_job

        sys.stdout.write(render_study_slurm(study_job(
            study, nodes=nodes if nodes != 1 else None, tasks_per_node=tasks_per_node,
            runtime=runtime, gpus_per_node=gpus_per_node, time=time, partition=partition,
            account=account, results_dir=results_dir, fabbench_command=fabbench_command,
            name=name if name != "fabbench" else "fabbench-study")))
        return
    from fabbench.render import render_slurm
    from fabbench.render.from_options import slurm_job

    sys.stdout.write(render_slurm(slurm_job(
        _bench(options, gpus_per_node, extra_arg), name=name, nodes=nodes,
        tasks_per_node=tasks_per_node, gpus_per_node=gpus_per_node, runtime=runtime,
        image=image, time=time, partition=partition, account=account, results_dir=results_dir,
        binds=tuple(bind or ()), fabbench_command=fabbench_command, verify=verify)))


@render_app.command("k8s")
@Run
def k8s(
    nodes: Nodes = 2, gpus_per_node: Gpus = 0,
    image: Annotated[str | None, typer.Option(
        help="The fabbench image, e.g. REPO@sha256:... Every rank gets it as FABBENCH_IMAGE_REF, "
        "which its results record. Default: fabbench:<version>-cuda with --gpus-per-node, "
        "else fabbench:<version>-cpu.")] = None,
    image_pull_policy: Annotated[str, typer.Option(help="Always, IfNotPresent or Never.")] =
    "IfNotPresent",
    namespace: Annotated[str | None, typer.Option(help="Namespace of the objects.")] = None,
    gpu_resource: Annotated[str, typer.Option(help="GPU resource name.")] = "nvidia.com/gpu",
    rdma_resource: Annotated[str | None, typer.Option(
        help="RDMA resource name, e.g. rdma/hca_shared_devices_a.")] = None,
    rdma_per_node: Annotated[int, typer.Option(help="RDMA resources per pod.")] = 1,
    host_network: Annotated[bool, typer.Option(help="Pods on the nodes' network.")] = False,
    node_selector: Annotated[list[str] | None, typer.Option(
        help="KEY=VALUE a node must carry (repeatable).")] = None,
    results_claim: Annotated[str | None, typer.Option(
        help="PersistentVolumeClaim for the results. Default (neither this nor "
        "--results-host-path): an emptyDir, and rank 0 writes the file into its log too, for "
        "`fabbench from-log`.")] = None,
    results_host_path: Annotated[str | None, typer.Option(
        help="A directory on the nodes for the results (a hostPath volume).")] = None,
    results_path: Annotated[str, typer.Option(help="Results directory in the pods.")] =
    "/results",
    shm_size: Annotated[str, typer.Option(help="Size of the memory-backed /dev/shm.")] = "1Gi",
    master_port: Annotated[int | None, typer.Option(
        help="Rendezvous port (torch primitives). Default: torch's usual one.",
        show_default=False)] = None,
    preflight: Annotated[str | None, typer.Option(
        help="A check before the job (gloo, nccl): each pod's init container runs a short "
        "allreduce across the job's pods, judged against this floors file (docs/floors.md); a "
        "floor missed stops the job before it starts, the FAIL line its termination message "
        "(the chart's preflight, its sizes, budget and timeout at their defaults: 16M, 0.5, "
        "60).",
        metavar="FLOORS")] = None,
    name: Name = "fabbench", fabbench_command: Command = "fabbench", extra_arg: Extra = None,
    **options: object,
) -> None:
    """Print the Kubernetes manifests that run the benchmark on --nodes nodes.

    An Indexed Job and a headless Service (gloo, nccl), or an MPIJob (mpi, horovod;
    kubeflow.org/v2beta1).

    Examples:
        fabbench render k8s --nodes 4 --gpus-per-node 8 --fabric infiniband --primitive nccl
            --rdma-resource rdma/hca_shared_devices_a > job.yaml
        fabbench render k8s --nodes 4 --primitive gloo --preflight site.toml
            > job.yaml  # the job starts only when a short allreduce meets the floors
    """
    from fabbench.render import render_k8s
    from fabbench.render.from_options import k8s_job

    sys.stdout.write(render_k8s(k8s_job(
        _bench(options, gpus_per_node, extra_arg), name=name, namespace=namespace, nodes=nodes,
        gpus_per_node=gpus_per_node, image=image, image_pull_policy=image_pull_policy,
        gpu_resource=gpu_resource, rdma_resource=rdma_resource, rdma_per_node=rdma_per_node,
        host_network=host_network, node_selector_pairs=node_selector or (),
        results_claim=results_claim, results_host_path=results_host_path,
        results_path=results_path, shm_size=shm_size,
        master_port=master_port, fabbench_command=fabbench_command, preflight=preflight)))


def register(app: typer.Typer) -> None:
    app.add_typer(render_app, name="render")
