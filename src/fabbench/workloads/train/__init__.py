"""The training workload: a model from fabbench.networks, trained data-parallel on synthetic data.

  engines.py     the three data-parallel engines (ddp, horovod, mpi), chosen by the primitive's
                 registry entry, and the settings a library reads at start (prepare_env);
  protocol.py    the measurement protocol, the same for every engine (Trainer, run_train);
  buckets.py     the one bucket planner (the mpi engine's buckets, DDP's and Horovod's fusion
                 estimated);
  netsampler.py  interface utilisation sampled during the timed steps;
  record.py      the train record (its console line: fabbench.results.lines).
"""

from fabbench.workloads.train.buckets import bucket_plan
from fabbench.workloads.train.engines import prepare_env
from fabbench.workloads.train.protocol import Trainer, run_train

__all__ = ["Trainer", "bucket_plan", "prepare_env", "run_train"]
