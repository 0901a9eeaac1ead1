"""From the flat options of `fabbench render` to the typed contexts (the CLI holds no logic)."""

from __future__ import annotations

from collections.abc import Sequence

from fabbench.comm.registry import default_primitive
from fabbench.comm.registry import get as get_primitive
from fabbench.errors import UsageError
from fabbench.render.context import Benchmark, K8sJob, SlurmJob


def benchmark(*, fabric: str, primitive: str | None, gpus_per_node: int, wire: str = "native",
              gpudirect: str = "auto",
              ops: str | None = None, sizes: str | None = None, dtypes: str = "float32",
              check: bool = False, budget_s: float = 0.2, timeout_s: float = 30.0,
              iface: str | None = None, rdma_device: str | None = None,
              extra_args: Sequence[str] = (), label: str = "collectives") -> Benchmark:
    """The primitive defaults as `fabbench run`'s does, but from the job's GPUs, not this host's."""
    primitive = primitive or default_primitive(gpus_per_node > 0)[0]
    if get_primitive(primitive).gpu_only and not gpus_per_node:  # rendered where the GPUs are not
        raise UsageError(f"{primitive} moves GPU buffers only: pass --gpus-per-node N, the GPUs "
                         "of each node (one rank per GPU)")
    return Benchmark(label=label, fabric=fabric, primitive=primitive, wire=wire, ops=ops,
                     sizes=sizes, dtypes=dtypes, check=check,
                     device="cuda" if gpus_per_node else "cpu", gpudirect=gpudirect,
                     timeout_s=timeout_s,
                     budget_s=budget_s, iface=iface, rdma_device=rdma_device,
                     extra_args=tuple(extra_args))


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
