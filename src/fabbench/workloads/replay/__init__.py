"""The replay workload: a recorded job's communication (a fabbench-trace/1 document,
fabbench.trace.document) replayed on the fabric and primitive under test, one module per part,
as every workload package has them:

  workload.py  the workload (``ReplayWorkload``): what it declares, its rules against the
               plan (rules.py), a study cell's row and what a run's record says (findings.py);
               registered by name, which fabbench.catalog loads;
  section.py   its options (``RunConfig.replay``);
  record.py    its record, the results contract's ``replay`` kind, one per operation of the
               trace inside it (``ReplayOp``);
  line.py      its record as the console and `fabbench report` show it;
  rules.py     the trace read and checked against the plan (ranks, primitive, groups, the
               ranks' sequences matching), before any rank starts;
  run.py       the replay the ranks run (torch.distributed), imported by the workload's ``run``
               only;
  findings.py  what the fabric costs the job's step, for `fabbench report`.
"""
