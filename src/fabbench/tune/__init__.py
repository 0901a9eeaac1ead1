"""`fabbench tune`: find the library settings that bring a primitive closer to the wire, judged
with statistics, and write them where every tool reads them (docs/tuning.md).

  library  what Open MPI accepts (ompi_info), a search space checked before anything runs
  search   the coordinate search: alternating launches of `fabbench run`, compare's rule,
           refusal of a changed transport, resumable
  outputs  the formats the libraries read: coll_tuned rules, NCCL's tuner CSV
  publish  the tuned site profile and the table of gains
"""

from __future__ import annotations

from pathlib import Path

# a tune's state file: every stage, value, point and choice; its presence marks a tune's
# directory (what `fabbench report DIR` looks for, without importing the search)
STATE = "tune.json"


def is_tune_dir(path: Path) -> bool:
    return (path / STATE).is_file()
