"""The collectives sweep (each operation at each size and dtype, timed and optionally checked),
one module per part, as every workload package has them:

  workload.py  the workload (``CollectivesWorkload``): what it declares, its console lines and
               the acceptance floors' figures; registered by name, which fabbench.catalog loads;
  section.py   its options (``RunConfig.collectives``) and the sweep a plan holds decided
               (``plan.collectives``), which the pairs run by too;
  record.py    its record, the results contract's ``collective`` kind;
  line.py      the run's header and a point's nccl-tests-style line, as the run measures;
  floors.py    the acceptance floors' figures, by operation, size and dtype;
  resume.py    what ``--resume`` skips: the points the resumed run measured already;
  run.py       the sweep the ranks run (the communicator, numpy), imported by the workload's
               ``run`` only.
"""

from __future__ import annotations

from fabbench.workloads.collectives.record import Collective
from fabbench.workloads.collectives.section import CollectivesConfig, Sweep

__all__ = ["Collective", "CollectivesConfig", "Sweep"]
