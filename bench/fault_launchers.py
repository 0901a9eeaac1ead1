"""The fault matrix under other launchers (issue 36, docs/faults-launchers.md), measured: every
row of tests/integration/faults_on_launchers.py — srun on a 4-node emulated Slurm cluster (a
rank killed, the slurmd of rank 1's node killed, scancel), torchrun (a rank killed, torchrun
sent SIGTERM), the study runner (sent SIGTERM, sent SIGKILL) — run ``--repeats`` times, the rows
and their right outcomes as the test (tests/integration/test_fault_launchers.py) defines them.

Prints the same markdown table as bench/fault_matrix.py (the launcher in the primitive's
column). Needs root. Exits 1 when a repeat did not end as its row expects.

Usage: python bench/fault_launchers.py [--repeats 3] [--launchers srun,torchrun,study]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_matrix import repeat  # noqa: E402 - each row repeated as the emulated matrix does

from integration.faults_on_launchers import (  # noqa: E402 - the rows live beside their test
    LAUNCHERS,
    ROWS,
    Row,
    run_row,
    slurm_four,
)
from integration.faults_on_wire import SETTLE_S, Outcome  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--launchers", default=",".join(LAUNCHERS))
    args = ap.parse_args()
    launchers = args.launchers.split(",")
    table, missed = [], 0
    with tempfile.TemporaryDirectory(prefix="fault-launchers-") as tmp, \
            contextlib.ExitStack() as stack:
        slurm = stack.enter_context(slurm_four()) if "srun" in launchers else None
        for row in (r for r in ROWS if r.launcher in launchers):
            def once(i: int, row: Row = row) -> Outcome:
                o, _ = run_row(row, Path(tmp) / f"{row.launcher}-{row.name}-{i}", slurm)
                if row.name == "slurmd-kill" and slurm is not None \
                        and slurm.slurmd_pid("node1") is None:
                    slurm.start_slurmd("node1")  # the cluster stays usable for the next row
                return o

            text, wrong = repeat(row.name, row.launcher, args.repeats, row.expect, once)
            missed += wrong
            table.append(text)
    print(f"\n{args.repeats} repeat(s) per row; left running: at the exit / {SETTLE_S:.0f} s "
          "after it\n")
    print("| fault | launcher | fault→exit s (median / max) | exit code | headline | summary "
          "| left running | gone s (max) | 16 MiB busbw GB/s | as expected |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(table))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
