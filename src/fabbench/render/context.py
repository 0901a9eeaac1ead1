"""The typed contexts templates render from: frozen, keyword-only, validated once here.

A ``Benchmark`` is one ``fabbench run`` (validated through the same Plan ``fabbench run`` builds);
a ``SlurmJob`` or ``K8sJob`` is the shape of the job that runs benchmarks on several nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabbench.comm import registry
from fabbench.errors import UsageError
from fabbench.render import names

RUNTIMES = ("apptainer", "charliecloud", "pyxis", "none")
MAX_BENCHMARKS = 10  # rendezvous ports: ten per job (see slurm.sbatch.j2)


def rendered_over(spec: registry.Primitive, over: str | None = None) -> str | None:
    """The controller a rendered job runs a primitive over: the one asked for, else the first a
    scheduler can start; None for a primitive that runs alone."""
    if not spec.controllers:
        return None
    return over or next(c for c in spec.controllers if spec.render_family(c))


def _fmt(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True, kw_only=True)
class Benchmark:
    """One `fabbench run`: what it measures and over which fabric and primitive."""

    label: str = "collectives"  # names its results file: <job id>-<label>.jsonl
    fabric: str
    primitive: str
    horovod_over: str | None = None
    wire: str = "native"
    ops: str | None = None
    sizes: str | None = None
    dtypes: str = "float32"
    check: bool = False
    device: str = "cpu"
    gpudirect: str = "auto"
    timeout_s: float = 30.0
    budget_s: float = 0.2
    iface: str | None = None
    rdma_device: str | None = None
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from fabbench.plan import DEFAULT_SIZES, Plan
        from fabbench.timing.engine import TimingPolicy
        from fabbench.units import parse_sizes

        names.dns1123(self.label, "the benchmark label")
        if self.fabric == "auto":
            raise UsageError("--fabric auto detects the fabric of the host it runs on: name the "
                             "fabric of the nodes the job will run on")
        spec = registry.get(self.primitive)
        if self.horovod_over in spec.controllers and spec.render_family(self.horovod_over) is None:
            raise UsageError(f"rendered jobs run {self.primitive} over "
                             f"{' or '.join(c for c in spec.controllers if spec.render_family(c))}"
                             f" only ({self.primitive} over {self.horovod_over} needs "
                             f"{spec.launcher(self.horovod_over)}'s own rendezvous)")
        if not isinstance(self.extra_args, tuple) or not all(
                isinstance(a, str) for a in self.extra_args):
            raise UsageError("extra arguments must be strings")
        if not self.budget_s > 0:
            raise UsageError(f"--budget must be positive, not {self.budget_s}")
        ops = tuple(p.strip() for p in self.ops.split(",") if p.strip()) if self.ops else None
        # the same validation `fabbench run` applies, so a rendered job cannot fail on its options
        Plan(fabric=self.fabric, primitive=self.primitive, horovod_over=self.horovod_over,
             wire=self.wire, ops=ops or spec.ops,
             sizes=parse_sizes(self.sizes or DEFAULT_SIZES.get(self.device, "8")),
             dtypes=tuple(p.strip() for p in self.dtypes.split(",") if p.strip()),
             check=self.check, device=self.device, gpudirect=self.gpudirect,
             timeout_s=self.timeout_s,
             policy=TimingPolicy(budget_s=self.budget_s), out="-", run_id="render")

    @property
    def _over(self) -> str | None:
        return rendered_over(registry.get(self.primitive), self.horovod_over)

    @property
    def backend(self) -> str:
        """The profile section the primitive uses (Horovod: its controller's)."""
        return registry.get(self.primitive).backend(self._over)

    @property
    def launch(self) -> str:
        """"mpi": the scheduler's MPI launch (srun --mpi=pmix, an MPIJob); "rendezvous": a TCP
        rendezvous at the first node (MASTER_ADDR/MASTER_PORT). From comm.registry."""
        family = registry.get(self.primitive).render_family(self._over)
        assert family is not None  # refused in __post_init__
        return family

    def run_args(self) -> list[str]:
        """The arguments of `fabbench run`, less --out (the job names the results file)."""
        args = ["run", "--fabric", self.fabric, "--primitive", self.primitive]
        if self._over is not None:
            args += ["--horovod-over", self._over]
        if self.wire != "native":
            args += ["--wire", self.wire]
        args += ["--device", self.device]
        if self.gpudirect != "auto":
            args += ["--gpudirect", self.gpudirect]
        if self.ops:
            args += ["--ops", self.ops]
        if self.sizes:
            args += ["--sizes", self.sizes]
        args += ["--dtypes", self.dtypes, "--budget", _fmt(self.budget_s),
                 "--timeout", _fmt(self.timeout_s)]
        if self.check:
            args.append("--check")
        if self.iface:
            args += ["--iface", self.iface]
        if self.rdma_device:
            args += ["--rdma-device", self.rdma_device]
        return [*args, *self.extra_args]


def _check_fabric_nodes(benchmarks: tuple[Benchmark, ...], nodes: int) -> None:
    from fabbench.fabrics.profile import load_profile

    for bench in benchmarks:
        if nodes > 1 and load_profile(bench.fabric).single_host:
            raise UsageError(f"fabric {bench.fabric!r} works within one host only, not across "
                             f"{nodes} nodes")


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
            raise UsageError(f"--runtime {self.runtime} needs --image")
        if self.runtime == "none" and self.image:
            raise UsageError("--image needs --runtime apptainer, charliecloud or pyxis")
        if not self.fabbench_command.strip():
            raise UsageError("--fabbench-command must not be empty")
        if self.time is not None:
            names.slurm_time(self.time)
        if self.partition is not None:
            names.slurm_token(self.partition, "--partition")
        if self.account is not None:
            names.slurm_token(self.account, "--account")
        if not self.results_dir or "\0" in self.results_dir:
            raise UsageError("--results-dir must be a directory path")
        for bind in self.binds:
            if not bind or "," in bind or "\n" in bind:
                raise UsageError(f"--bind takes one SRC[:DST] path without ',', not {bind!r}")
        if not 1 <= len(self.benchmarks) <= MAX_BENCHMARKS:
            raise UsageError(f"a job runs 1 to {MAX_BENCHMARKS} benchmarks")
        labels = [b.label for b in self.benchmarks]
        if len(set(labels)) != len(labels):
            raise UsageError("each benchmark of a job needs its own label")
        for bench in self.benchmarks:
            if bench.device == "cuda" and not self.gpus_per_node:
                raise UsageError(f"{bench.primitive} on GPUs needs --gpus-per-node")
        _check_fabric_nodes(self.benchmarks, self.nodes)

    @property
    def ntasks_per_node(self) -> int:
        return self.tasks_per_node or self.gpus_per_node or 1

    @property
    def rendezvous(self) -> bool:
        return any(b.launch == "rendezvous" for b in self.benchmarks)


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
    image: str = "fabbench:latest"
    image_pull_policy: str = "IfNotPresent"
    fabbench_command: str = "fabbench"
    node_selector: tuple[tuple[str, str], ...] = ()
    results_claim: str | None = None  # a PersistentVolumeClaim; else an emptyDir
    results_path: str = "/results"
    shm_size: str = "1Gi"
    master_port: int = 29500
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
        if not self.image or any(c.isspace() for c in self.image):
            raise UsageError(f"--image must be an image reference, not {self.image!r}")
        for key, value in self.node_selector:
            names.resource_name(key, "--node-selector key")
            if len(value) > 63 or not names.RESOURCE_NAME.match(value or "x"):
                raise UsageError(f"--node-selector value {value!r} is not a label value")
        if self.results_claim is not None:
            names.dns1123(self.results_claim, "--results-claim", max_len=253)
        if not self.results_path.startswith("/"):
            raise UsageError("--results-path must be an absolute path in the container")
        if not 1024 <= self.master_port <= 65535:
            raise UsageError("--master-port must be between 1024 and 65535")
        if self.benchmark.device == "cuda" and not self.gpus_per_node:
            raise UsageError(f"{self.benchmark.primitive} on GPUs needs --gpus-per-node")
        _check_fabric_nodes((self.benchmark,), self.nodes)

    @property
    def ranks_per_node(self) -> int:
        return self.gpus_per_node or 1

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node
