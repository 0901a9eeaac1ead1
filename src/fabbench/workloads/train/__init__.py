"""The training workload: a model from fabbench.networks, trained data-parallel on synthetic data.

  engines.py     the three data-parallel engines (ddp, horovod, mpi), chosen by the primitive's
                 registry entry, and the settings a library reads at start (prepare_env);
  protocol.py    the measurement protocol, the same for every engine (Trainer, run_train);
  buckets.py     the one bucket planner (the mpi engine's buckets, DDP's and Horovod's fusion
                 estimated);
  netsampler.py  interface utilisation sampled during the timed steps;
  record.py      the train record (its console line: fabbench.results.lines).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from fabbench.results import lines, records
from fabbench.workloads.train.buckets import bucket_plan
from fabbench.workloads.train.engines import prepare_env
from fabbench.workloads.train.protocol import Trainer, run_train

if TYPE_CHECKING:
    from fabbench.plan import Plan
    from fabbench.workloads.interface import RankContext


class _Train:
    """Training as a workload (workloads.interface): one record, wrong when the ranks ended with
    different gradients or parameters, or gradients that are all zero or not finite."""

    name = "train"

    def prepare(self, plan: Plan) -> None:
        prepare_env(plan)  # settings read when the library starts (Horovod's)

    def run(self, ctx: RankContext) -> Iterator[records.Record]:
        yield run_train(ctx.comm, ctx.plan, ctx.transport, ctx.arm,
                        baseline_samples_per_s=ctx.state.baseline_samples_per_s)

    def header(self, run: records.Run) -> str:
        return lines.TRAIN.header

    def line(self, record: records.Record) -> str:
        assert isinstance(record, records.Train)
        return lines.TRAIN.line(record)

    def wrong(self, record: records.Record) -> bool:
        assert isinstance(record, records.Train)
        return not (record.grads_identical and record.params_identical
                    and record.grads_finite_nonzero)


WORKLOAD = _Train()

__all__ = ["WORKLOAD", "Trainer", "bucket_plan", "prepare_env", "run_train"]
