"""The halo exchange workload, a 3-D stencil's halo exchange (the communication pattern of CFD
codes), one module per part, as every workload package has them:

  workload.py  the workload (``HaloWorkload``): what it declares, its rule against the decided
               plan, a study cell's row, the acceptance floors' figures; registered by name,
               which fabbench.catalog loads;
  section.py   its options (``RunConfig.halo``);
  record.py    its record, the results contract's ``halo`` kind;
  line.py      its record as the console and `fabbench report` show it;
  exchange.py  the exchange the ranks run (torch, the communicator), imported by the workload's
               ``run`` only;
  grid.py      the process grid and the bytes an iteration sends.
"""
