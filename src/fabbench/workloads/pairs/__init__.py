"""The pairs workload: node pairs in rounds, to find the slow node (docs/methods.md, "Which node
is slow, which rank is late"), one module per part, as every workload package has them:

  workload.py    the workload (``PairsWorkload``): what it declares, the schedule it decides,
                 its rule against the decided plan, its point count, its findings; registered
                 by name, which fabbench.catalog loads;
  section.py     its options (``RunConfig.pairs``);
  record.py      its record, the results contract's ``pairs`` kind, and the better figure of a
                 rechecked pair;
  line.py        its record as the console shows it while the run measures;
  floors.py      the acceptance floors' figures, node by node;
  tournament.py  the tournament the ranks run (the communicator, the timing engine), imported
                 by the workload's ``run`` only;
  frame.py       a run's pairs records as arrays (numpy), for the rule and the floors;
  slow_node.py   which node is slow: the rule over a run's pairs.
"""
