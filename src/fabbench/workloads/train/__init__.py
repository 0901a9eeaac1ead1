"""The training workload: a model from fabbench.networks, trained data-parallel on synthetic data,
one module per part, as every workload package has them. Light (no torch, no communicator):
what runs is imported only by a rank.

  workload.py    the workload (``TrainWorkload``): what it declares, its methods made by the
                 modules below; registered by name, which fabbench.catalog loads;
  section.py     its options (TrainConfig: ``RunConfig.train``, ``plan.train``);
  rules.py       its rules against the decided plan (the workload's ``check``);
  record.py      its record, the results contract's ``train`` kind (registered by loading
                 this package), and the record made from what a run measured;
  line.py        the record's console line;
  scaling.py     the scaling series (``--scaling``): the plan's rank counts, the baseline;
  study.py       a study cell's row; floors.py, the acceptance floors' figures;
  run.py         the training a rank runs (imported by the workload's ``run`` only) and the
                 measurement protocol, the same for every engine (Trainer, run_train);
  engines.py     the three data-parallel engines (ddp, horovod, mpi), chosen by the primitive's
                 registry entry, and the settings a library reads at start (prepare_env);
  buckets.py     the one bucket planner (the mpi engine's buckets, DDP's and Horovod's fusion
                 estimated);
  netsampler.py  interface utilisation sampled during the timed steps.
"""

from __future__ import annotations

from fabbench.workloads.train.section import TrainConfig

__all__ = ["TrainConfig"]
