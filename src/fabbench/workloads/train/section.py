"""The train workload's options: ``RunConfig.train`` and ``plan.train``, the "Train workload"
panel of ``fabbench run --help`` and a study's keys for a train cell."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabbench.errors import UsageError
from fabbench.networks.models import MODELS
from fabbench.option_fields import COUNTS, FLOAT, INT, TEXT, Bounds, at_least, option, validate
from fabbench.value_rules import MAX_LOCAL_RANKS

__all__ = ["PRECISIONS", "TrainConfig"]

PRECISIONS = ("fp32", "bf16", "fp16")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """``--workload train``: data-parallel training of a synthetic-data model."""

    model: str = option("resnet50", TEXT, "--model", "A model of `fabbench models`.",
                        choices=tuple(MODELS))
    batch_size: int = option(32, INT, "--batch-size", "Samples per rank per step.",
                             check=at_least(1, "batch size"))
    image_size: int | None = option(
        None, INT, "--image-size", "Image side in pixels (multiple of 32), or tokens per "
        "sequence for a transformer. Default: the model's (224; the context).",
        check=at_least(1, "--image-size"))
    steps: int = option(20, INT, "--steps", "Timed steps.", check=at_least(2, "steps"))
    warmup_steps: int = option(5, INT, "--warmup-steps", "Untimed steps first.",
                               check=at_least(1, "warm-up steps"))
    scaling: tuple[int, ...] | None = option(
        None, COUNTS, "--scaling", "Rank counts run one after another, e.g. 1,2,4 (1 is "
        "added); efficiency T_n/(n*T_1).",
        check=lambda v: None if all(1 <= n <= MAX_LOCAL_RANKS for n in v) else
        f"scaling rank counts must be between 1 and {MAX_LOCAL_RANKS}")
    bucket_mb: float = option(25.0, FLOAT, "--bucket-mb", "DDP bucket size "
                              "(bucket_cap_mb), also the mpi engine's, MiB.",
                              check=Bounds("bucket size must be > 0 MiB", 0, low_open=True))
    fusion_mb: float | None = option(
        None, FLOAT, "--fusion-mb", "Horovod fusion threshold, MiB. Default: Horovod's.",
        check=Bounds("fusion threshold must be >= 0 MiB", 0))
    precision: str = option("fp32", TEXT, "--precision", "fp32, bf16 (autocast) or fp16 "
                            "(autocast + loss scaling, GPU).", choices=PRECISIONS)

    def __post_init__(self) -> None:
        validate(self)
        if self.scaling == ():  # no series (an older fabbench's plan wrote [] for none)
            object.__setattr__(self, "scaling", None)
        spec = MODELS[self.model]
        spec.check_input(self.input_size)
        if spec.batchnorm and self.batch_size * (self.input_size // spec.input_multiple) ** 2 < 2:
            raise UsageError(f"{self.model} has batch norm: batch size {self.batch_size} at image "
                             f"size {self.input_size} leaves one value per channel; use a batch "
                             "of at least 2 or a larger image")

    @property
    def input_size(self) -> int:
        """The model's input: image side in pixels or sequence length in tokens."""
        return self.image_size or MODELS[self.model].default_input


def of(holder: Any) -> TrainConfig:
    """The train section a plan or a configuration holds (``plan.train``), as its type."""
    found = holder.train
    if not isinstance(found, TrainConfig):
        raise TypeError(f"{type(holder).__name__}'s train section is a {type(found).__name__}")
    return found
