"""The typed contexts templates render from: frozen, keyword-only, validated once here.

A ``Benchmark`` is one ``fabbench run``: a RunConfig (fabbench.config) and its label;
a ``SlurmJob`` or ``K8sJob`` is the shape of the job that runs benchmarks on several nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabbench import __version__
from fabbench import value_rules as rules
from fabbench.comm import primitives
from fabbench.config import BY_FLAG, RunConfig
from fabbench.errors import UsageError
from fabbench.launch import launchers, ports, results_log, runtimes
from fabbench.render import names
from fabbench.sysinfo.inventory import IMAGE_REF_ENV
from fabbench.workloads.collectives.workload import CollectivesWorkload

RUNTIMES = tuple(runtimes.RUNTIMES)  # the container runtimes (launch.runtimes)
MAX_BENCHMARKS = 10  # rendezvous ports: ten per job (see slurm.sbatch.j2)
IMAGE_REPOSITORY = "fabbench"  # the image's name as .ci/publish.sh tags it
REFERENCE_FLOORS = "reference"  # `fabbench floors verify --floors reference`: the shipped floors
# The check before a Kubernetes job (--preflight; the chart's preflight.sizes, .budget and
# .timeout defaults): what it runs, and what it keeps of the job's configuration
PREFLIGHT = {"kind": CollectivesWorkload.name, "ops": "allreduce", "sizes": "16M", "budget": 0.5,
             "timeout": 60}
PREFLIGHT_KEEPS = ("fabric", "wire", "gpudirect", "iface", "rdma_device", "primitive",
                   "horovod_over", "device")
PREFLIGHT_FLOORS = "/etc/fabbench/preflight.toml"  # where its init container reads the floors


def default_image(gpus: bool) -> str:
    """The image a job runs unless told: this version in the flavour the job needs, as
    .ci/publish.sh tags them: fabbench:<version>-cuda when it asks for GPUs, else
    fabbench:<version>-cpu. The chart's fabbench.image picks the same tag."""
    return f"{IMAGE_REPOSITORY}:{__version__}-{'cuda' if gpus else 'cpu'}"


def image_ref_env(ref: str | None) -> dict[str, str]:
    """What every rank of a job is told of the image it runs: FABBENCH_IMAGE_REF, the reference
    as given, which its results record (sysinfo.inventory: with the digest it was pulled by when
    the reference holds one); nothing without an image."""
    return {IMAGE_REF_ENV: ref} if ref else {}


def render_family(spec: primitives.Primitive, over: str | None = None) -> str | None:
    """"mpi" or "rendezvous": how a scheduler starts ranks of ``spec`` (run over ``over``), as
    its launcher says (launch.launchers); None: schedulers cannot start them."""
    return launchers.get(spec.launcher(over)).render_family


def rendered_over(spec: primitives.Primitive, over: str | None = None) -> str | None:
    """The controller a rendered job runs a primitive over: the one asked for, else the first a
    scheduler can start; None for a primitive that runs alone."""
    if not spec.controllers:
        return None
    return over or next(c for c in spec.controllers if render_family(spec, c))


@dataclass(frozen=True, kw_only=True)
class Benchmark:
    """One rendered ``fabbench run``: its configuration, the label that names its results file
    (<job id>-<label>.jsonl) and arguments passed on verbatim. The configuration names what a
    job cannot leave to the node it lands on: the fabric, the primitive, the device; and it is
    checked by the same Plan ``fabbench run`` builds, so a rendered job cannot fail on it."""

    label: str = ""  # empty: the workload's name (<job id>-pairs.jsonl holds pairs)
    config: RunConfig
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from fabbench.plan import Plan

        if not self.label:
            object.__setattr__(self, "label", self.config.workload)
        names.dns1123(self.label, "the benchmark label")
        c = self.config
        rules.TEXT.check(c.fabric, "--fabric")  # a profile's path: in the job's comments
        if c.fabric == "auto":
            raise UsageError("--fabric auto detects the fabric of the host it runs on: name the "
                             "fabric of the nodes the job will run on")
        if c.primitive is None or c.device is None:
            raise UsageError("a rendered benchmark names its primitive and device")
        spec = primitives.get(c.primitive)
        if spec.controllers and c.horovod_over is None:
            raise UsageError(f"a rendered {c.primitive} benchmark names its controller "
                             f"(rendered_over: {rendered_over(spec)})")
        if c.out is not None or c.ranks is not None:
            raise UsageError("a rendered job places its ranks and names its results file "
                             "itself (no --out, no --ranks)")
        if c.horovod_over in spec.controllers and render_family(spec, c.horovod_over) is None:
            raise UsageError(f"rendered jobs run {c.primitive} over "
                             f"{' or '.join(x for x in spec.controllers if render_family(spec, x))}"
                             f" only ({c.primitive} over {c.horovod_over} needs "
                             f"{spec.launcher(c.horovod_over)}'s own rendezvous)")
        if not isinstance(self.extra_args, tuple) or not all(
                isinstance(a, str) for a in self.extra_args):
            raise UsageError("extra arguments must be strings")
        for arg in self.extra_args:  # what fabbench declares is checked now, not in the job
            f = BY_FLAG.get(arg.partition("=")[0] if arg.startswith("--") else arg)
            if f is not None:
                raise UsageError(
                    f"--extra-arg {arg}: a rendered job places its ranks and names its results "
                    "file itself" if f.option.placed else
                    f"--extra-arg {arg}: {f.option.flag} is an option of fabbench render: give "
                    "it as such, checked before the job runs")
        Plan.of(c, fabric=c.fabric, primitive=c.primitive, device=c.device, ranks=1,
                iface=c.iface, out="-", run_id="render")

    @property
    def backend(self) -> str:
        """The profile section the primitive uses (Horovod: its controller's)."""
        return primitives.get(self.config.primitive or "").backend(self.config.horovod_over)

    @property
    def launch(self) -> str:
        """"mpi": the scheduler's MPI launch (srun --mpi=pmix, an MPIJob); "rendezvous": a TCP
        rendezvous at the first node (MASTER_ADDR/MASTER_PORT). From the primitive's launcher."""
        family = render_family(primitives.get(self.config.primitive or ""),
                               self.config.horovod_over)
        assert family is not None  # refused in __post_init__
        return family

    def run_args(self) -> list[str]:
        """``run``, the configuration's arguments, then the extra ones; less --out (the job
        names the results file)."""
        return ["run", *self.config.to_argv(), *self.extra_args]


def _check_command(command: str) -> None:
    """--fabbench-command: words a shell or a container's command runs, on one line."""
    if not command.strip():
        raise UsageError("--fabbench-command must not be empty")
    rules.TEXT.check(command, "--fabbench-command")


def _check_fabric_nodes(benchmarks: tuple[Benchmark, ...], nodes: int) -> None:
    from fabbench.fabrics.profile import load_profile

    for bench in benchmarks:
        if nodes > 1 and load_profile(bench.config.fabric).single_host:
            raise UsageError(f"fabric {bench.config.fabric!r} works within one host only, not "
                             f"across {nodes} nodes")


@dataclass(frozen=True, kw_only=True)
class SlurmJob:
    """An sbatch script: one allocation, one srun per benchmark."""

    name: str = "fabbench"
    nodes: int = 1
    tasks_per_node: int | None = None  # default: one per GPU, else 1
    gpus_per_node: int = 0
    runtime: str = "none"
    image: str | None = None
    fabbench_command: str = "fabbench"
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    results_dir: str = "results"
    binds: tuple[str, ...] = ()
    benchmarks: tuple[Benchmark, ...] = field(default_factory=tuple)
    verify: str | None = None  # a floors file (absolute) the results are judged against


    def __post_init__(self) -> None:
        names.dns1123(self.name, "--name")
        names.positive(self.nodes, "--nodes")
        names.positive(self.gpus_per_node, "--gpus-per-node", zero=True, most=64)
        if self.tasks_per_node is not None:
            names.positive(self.tasks_per_node, "--tasks-per-node", most=1024)
        if self.runtime not in RUNTIMES:
            raise UsageError(f"--runtime must be one of {', '.join(RUNTIMES)}, "
                             f"not {self.runtime!r}")
        if self.runtime != "none" and not self.image:
            # a site's copy of the image has no name fabbench could know (a .sif path, a
            # directory, a registry of its own); the flavour it needs is said
            raise UsageError(f"--runtime {self.runtime} needs --image: this job's flavour is "
                             f"{default_image(self.gpus_per_node > 0)} (a .sif, directory or "
                             f"registry reference of it)")
        if self.runtime == "none" and self.image:
            raise UsageError("--image needs --runtime apptainer, charliecloud or pyxis")
        _check_command(self.fabbench_command)
        if self.time is not None:
            names.slurm_time(self.time)
        if self.partition is not None:
            names.slurm_token(self.partition, "--partition")
        if self.account is not None:
            names.slurm_token(self.account, "--account")
        rules.text("a directory path (without control characters)").check(
            self.results_dir, "--results-dir")
        if self.image is not None:
            rules.TEXT.check(self.image, "--image")
        for bind in self.binds:
            if not rules.TEXT.ok(bind) or "," in bind:
                raise UsageError(f"--bind takes one SRC[:DST] path without ',', not {bind!r}")
        if self.verify is not None and (self.verify != REFERENCE_FLOORS and not (
                self.verify.startswith("/") and rules.TEXT.ok(self.verify))):
            raise UsageError(f"--verify takes the floors file's absolute path (the job reads it "
                             f"on its first node), not {self.verify!r}")
        if not 1 <= len(self.benchmarks) <= MAX_BENCHMARKS:
            raise UsageError(f"a job runs 1 to {MAX_BENCHMARKS} benchmarks")
        labels = [b.label for b in self.benchmarks]
        if len(set(labels)) != len(labels):
            raise UsageError("each benchmark of a job needs its own label")
        for bench in self.benchmarks:
            if bench.config.device == "cuda" and not self.gpus_per_node:
                raise UsageError(f"{bench.config.primitive} on GPUs needs --gpus-per-node")
        _check_fabric_nodes(self.benchmarks, self.nodes)

    @property
    def ntasks_per_node(self) -> int:
        return self.tasks_per_node or self.gpus_per_node or 1

    @property
    def rendezvous(self) -> bool:
        return any(b.launch == "rendezvous" for b in self.benchmarks)

    @property
    def image_env(self) -> dict[str, str]:
        """The image's variables every rank gets (none with --runtime none)."""
        return image_ref_env(self.image)


@dataclass(frozen=True, kw_only=True)
class K8sJob:
    """Kubernetes manifests for one benchmark: an Indexed Job and a headless Service (torch
    primitives), or an MPIJob (kubeflow.org/v2beta1; MPI and Horovod)."""

    name: str = "fabbench"
    namespace: str | None = None
    nodes: int = 2
    gpus_per_node: int = 0
    gpu_resource: str = "nvidia.com/gpu"
    rdma_resource: str | None = None  # e.g. rdma/hca_shared_devices_a
    rdma_per_node: int = 1
    host_network: bool = False
    image: str | None = None  # None: default_image for the job's GPUs
    image_pull_policy: str = "IfNotPresent"
    fabbench_command: str = "fabbench"
    node_selector: tuple[tuple[str, str], ...] = ()
    results_claim: str | None = None  # a PersistentVolumeClaim
    results_host_path: str | None = None  # a directory on the nodes; neither: an emptyDir
    results_path: str = "/results"
    shm_size: str = "1Gi"
    master_port: int = ports.RENDEZVOUS_PORT
    # a check before the job: a floors file's text, judged by each pod's init container
    preflight: str | None = None
    benchmark: Benchmark

    def __post_init__(self) -> None:
        names.dns1123(self.name, "--name")
        if self.namespace is not None:
            names.dns1123(self.namespace, "--namespace", max_len=63)
        names.positive(self.nodes, "--nodes", most=10000)
        names.positive(self.gpus_per_node, "--gpus-per-node", zero=True, most=64)
        names.resource_name(self.gpu_resource, "--gpu-resource")
        if self.rdma_resource is not None:
            names.resource_name(self.rdma_resource, "--rdma-resource")
            names.positive(self.rdma_per_node, "--rdma-per-node", most=64)
        if self.image_pull_policy not in ("Always", "IfNotPresent", "Never"):
            raise UsageError("--image-pull-policy must be Always, IfNotPresent or Never")
        if self.image is not None:
            names.image_reference(self.image, "--image")
        _check_command(self.fabbench_command)
        for key, value in self.node_selector:
            rules.QUALIFIED_NAME.check(key, "--node-selector's key")
            rules.LABEL_VALUE.check(value, f"--node-selector {key}'s value")
        if self.results_claim is not None:
            rules.SUBDOMAIN.check(self.results_claim, "--results-claim")
        if self.results_host_path is not None:
            rules.HOST_PATH.check(self.results_host_path, "--results-host-path")
        rules.QUANTITY.check(self.shm_size, "--shm-size")
        if self.results_claim is not None and self.results_host_path is not None:
            raise UsageError("--results-claim and --results-host-path name two places for the "
                             "results: give one")
        rules.CONTAINER_PATH.check(self.results_path, "--results-path")
        if not 1024 <= self.master_port <= 65535:
            raise UsageError("--master-port must be between 1024 and 65535")
        if self.benchmark.config.device == "cuda" and not self.gpus_per_node:
            raise UsageError(f"{self.benchmark.config.primitive} on GPUs needs --gpus-per-node")
        _check_fabric_nodes((self.benchmark,), self.nodes)
        if self.preflight is not None and self.benchmark.launch != "rendezvous":
            raise UsageError(f"--preflight runs in the Indexed Job's pods: "
                             f"{self.benchmark.config.primitive} runs as an MPIJob; use "
                             "--primitive gloo (or nccl with --gpus-per-node)")

    @property
    def preflight_benchmark(self) -> Benchmark:
        """The check before the job: a short allreduce (PREFLIGHT) on the job's fabric,
        primitive and device, every other setting its default; results beside the job's."""
        c = self.benchmark.config
        kept = {key: getattr(c, key) for key in PREFLIGHT_KEEPS if getattr(c, key) is not None}
        return Benchmark(label="preflight", config=RunConfig.from_study({**kept, **PREFLIGHT}))

    @property
    def ranks_per_node(self) -> int:
        return self.gpus_per_node or 1

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def image_ref(self) -> str:
        """The image the pods run: the one given, else default_image for the job's GPUs."""
        return self.image or default_image(self.gpus_per_node > 0)

    @property
    def image_env(self) -> dict[str, str]:
        """The image's variables every rank gets."""
        return image_ref_env(self.image_ref)

    @property
    def run_env(self) -> dict[str, str]:
        """What fabbench tells every rank beyond the fabric's settings: the image, and
        FABBENCH_RESULTS_TO_LOG=1 when the results volume is an emptyDir, gone with the pod
        (rank 0 then writes the finished file into its log, for `fabbench from-log`); with a
        claim or a host path the file stays and the log stays short. The chart's
        fabbench.runEnv."""
        env = self.image_env
        if self.results_claim is None and self.results_host_path is None:
            env[results_log.ENV] = "1"
        return env
