"""The train workload's rules between its options and the decided plan (the workload's ``check``):
each a UsageError in one line, before any rank starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fabbench.comm import primitives
from fabbench.errors import UsageError
from fabbench.workloads.train import section

if TYPE_CHECKING:
    from fabbench.plan import Plan


def check(plan: Plan) -> None:
    """Horovod's fusion threshold only with Horovod; fp16 (loss scaling) only on a GPU."""
    train = section.of(plan)
    if train.fusion_mb is not None and not primitives.get(plan.primitive).fusion:
        raise UsageError("--fusion-mb is Horovod's fusion threshold: use it with "
                         "--primitive horovod (DDP and mpi take --bucket-mb)")
    if train.precision == "fp16" and plan.device != "cuda":
        raise UsageError("fp16 mixed precision needs --device cuda (on CPU use bf16)")
