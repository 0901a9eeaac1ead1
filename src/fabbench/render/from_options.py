"""From the options of `fabbench render` to the typed contexts (the CLI holds no logic)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabbench.comm.primitives import default_primitive
from fabbench.comm.primitives import get as get_primitive
from fabbench.config import from_parameters
from fabbench.errors import UsageError
from fabbench.render.context import REFERENCE_FLOORS, Benchmark, K8sJob, SlurmJob, rendered_over


def benchmark(*, gpus_per_node: int, extra_args: Sequence[str] = (),
              label: str | None = None, **options: Any) -> Benchmark:
    """The benchmark of `fabbench render`'s run options, by parameter name (``fabric``,
    ``budget``, ...: those of fabbench.config.typer_parameters; comma lists as text), read as
    `fabbench run` reads them; an option not given keeps its default. What they leave open
    is decided as `fabbench run` decides it, but from the job's GPUs, not this host's: the
    primitive (its default), the device (cuda with GPUs) and Horovod's controller (the first a
    scheduler starts)."""
    config = from_parameters(options)
    primitive = config.primitive or default_primitive(gpus_per_node > 0)[0]
    spec = get_primitive(primitive)
    if spec.gpu_only and not gpus_per_node:  # rendered where the GPUs are not
        raise UsageError(f"{primitive} moves GPU buffers only: pass --gpus-per-node N, the GPUs "
                         "of each node (one rank per GPU)")
    config = config.replace(primitive=primitive,
                            horovod_over=rendered_over(spec, config.horovod_over),
                            device=config.device or ("cuda" if gpus_per_node else "cpu"))
    # the results file is named after what it holds: <job id>-pairs.jsonl for the pairs
    return Benchmark(label=label or "", config=config, extra_args=tuple(extra_args))


def node_selector(pairs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"--node-selector takes KEY=VALUE, not {pair!r}")
        out.append((key, value))
    return tuple(out)


def slurm_job(bench: Benchmark, *, verify: str | None = None, **job: Any) -> SlurmJob:
    """``verify``: a floors file as the user named it, made absolute (the job reads it on its
    first node); ``reference``, the shipped floors, as it is."""
    if verify and verify != REFERENCE_FLOORS:
        verify = os.path.abspath(verify)
    return SlurmJob(benchmarks=(bench,), verify=verify, **job)


def k8s_job(bench: Benchmark, *, node_selector_pairs: Sequence[str] = (),
            master_port: int | None = None, preflight: str | None = None,
            **job: Any) -> K8sJob:
    """``master_port`` None: the job's default (launch.ports.RENDEZVOUS_PORT); ``preflight``:
    a floors file, read and checked here (the job carries its text)."""
    if master_port is not None:
        job["master_port"] = master_port
    if preflight is not None:
        from fabbench.floors.rules import load

        load(preflight)  # a bad floors file is refused now, not in the job
        job["preflight"] = Path(preflight).read_text()
    return K8sJob(benchmark=bench, node_selector=node_selector(node_selector_pairs), **job)
