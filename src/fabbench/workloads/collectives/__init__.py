"""The collectives sweep (each operation at each size and dtype, timed and optionally checked),
declared as a package: its options and the sweep a plan holds decided (section.py), its spec
(spec.py, which fabbench.catalog registers by this package's name), its record, the results
contract's ``collective`` kind (record.py, registered by loading this package), its console
lines (line.py), what ``--resume`` skips (resume.py) and the rank's sweep (run.py: the
communicator, numpy; imported only when a rank runs it, the spec's ``entry``)."""

from __future__ import annotations

from fabbench.workloads.collectives.record import Collective
from fabbench.workloads.collectives.section import CollectivesConfig, Sweep
from fabbench.workloads.collectives.spec import SPEC

__all__ = ["SPEC", "Collective", "CollectivesConfig", "Sweep"]
