"""From the flat options of `fabbench render` to the typed contexts (the CLI holds no logic)."""

from __future__ import annotations

from collections.abc import Sequence

from fabbench.comm.registry import default_primitive
from fabbench.comm.registry import get as get_primitive
from fabbench.config import STUDY_KEYS, build
from fabbench.errors import UsageError
from fabbench.render.context import Benchmark, K8sJob, SlurmJob, rendered_over


def benchmark(*, fabric: str, primitive: str | None, gpus_per_node: int, wire: str = "native",
              gpudirect: str = "auto",
              ops: str | None = None, sizes: str | None = None, dtypes: str = "float32",
              check: bool = False, budget_s: float = 0.2, timeout_s: float = 30.0,
              iface: str | None = None, rdma_device: str | None = None,
              extra_args: Sequence[str] = (), label: str = "collectives") -> Benchmark:
    """The primitive defaults as `fabbench run`'s does, but from the job's GPUs, not this host's;
    the device is the job's (cuda with GPUs) and Horovod's controller the one a scheduler
    starts."""
    primitive = primitive or default_primitive(gpus_per_node > 0)[0]
    spec = get_primitive(primitive)
    if spec.gpu_only and not gpus_per_node:  # rendered where the GPUs are not
        raise UsageError(f"{primitive} moves GPU buffers only: pass --gpus-per-node N, the GPUs "
                         "of each node (one rank per GPU)")
    config = build({
        "fabric": fabric, "primitive": primitive, "horovod_over": rendered_over(spec),
        "wire": wire, "device": "cuda" if gpus_per_node else "cpu", "gpudirect": gpudirect,
        "timeout_s": timeout_s, "iface": iface, "rdma_device": rdma_device,
        "collectives.ops": _csv(ops, "--ops"), "collectives.sizes": sizes,
        "collectives.dtypes": _csv(dtypes, "--dtypes"), "collectives.check": check,
        "collectives.budget_s": budget_s})
    return Benchmark(label=label, config=config, extra_args=tuple(extra_args))


def _csv(text: str | None, flag: str) -> tuple[str, ...] | None:
    return None if not text else STUDY_KEYS[flag.removeprefix("--")].option.kind.read(text, flag)


def node_selector(pairs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"--node-selector takes KEY=VALUE, not {pair!r}")
        out.append((key, value))
    return tuple(out)


def slurm_job(bench: Benchmark, **job) -> SlurmJob:
    return SlurmJob(benchmarks=(bench,), **job)


def k8s_job(bench: Benchmark, *, node_selector_pairs: Sequence[str] = (), **job) -> K8sJob:
    return K8sJob(benchmark=bench, node_selector=node_selector(node_selector_pairs), **job)
