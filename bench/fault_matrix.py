"""The fault matrix (issue 36, docs/faults.md), measured: every row of
tests/integration/faults_on_wire.py — mpi, gloo, horovod (over MPI) and horovod-gloo (Horovod
over Gloo, started by horovodrun --gloo) on a standing cluster of 2 emulated nodes at 1 Gbit/s,
one fault each (none: the control; a link down for good, a 5 s flap, 5 % loss on node 1, node
1's rank killed, node 1's orted (horovodrun: the rank's ssh session shell) killed, --out's disk
full, `fabbench run` sent
SIGTERM, sent SIGKILL), injected once the results file shows the first point — run ``--repeats``
times, the rows and their right outcomes as the test (tests/integration/test_fault_matrix.py)
defines them.

Prints a markdown table, a row per (fault, primitive): seconds from the fault to the run's exit
(median and max), the exit codes, fabbench's headline, the summary, what was left running at
the exit and SETTLE_S later, the seconds until nothing of the run was left (max), the 16 MiB
point's bus bandwidth where it was measured, and whether every repeat ended as the row expects
(else what differed). Needs root (network namespaces). Exits 1 when a repeat did not.

Usage: python bench/fault_matrix.py [--repeats 3] [--primitives mpi,gloo,horovod,horovod-gloo]
                                    [--faults link-down,flap,...]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from integration.faults_on_wire import (  # noqa: E402 - the rows live beside their test
    FAULTS,
    PRIMITIVES,
    SETTLE_S,
    Expect,
    Outcome,
    problems,
    run_row,
    standing,
)

SIXTEEN_MIB = 16 << 20


def cell(text: str, width: int = 140) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    # what every launch failure's line starts with: the table's row says it
    text = re.sub(r"^fabbench: error: (\S+ on fabric \S+ \(asked for transport \S+\) "
                  r"failed: )?", "", text)
    text = re.sub(r"\[/\S+:\d+\] ", "", text)  # a library's source file and line
    return text if len(text) <= width else text[:width - 1] + "…"


def summary_of(o: Outcome) -> str:
    s = o.summary
    if s is None:
        return "none"
    return "ok" if s.get("ok") else f"ok:false, {s.get('error')}"


def busbw(o: Outcome) -> float | None:
    return next((r["busbw_gbyte_s"] for r in o.records
                 if r.get("kind") == "collective" and r.get("bytes") == SIXTEEN_MIB), None)


def line(fault: str, primitive: str, outcomes: list[Outcome], wrong: list[str]) -> str:
    times = [o.fault_to_exit_s for o in outcomes if o.fault_to_exit_s is not None]
    gone = [o.gone_s for o in outcomes]
    bws = [b for b in map(busbw, outcomes) if b is not None]
    codes = "/".join(str(c) for c in sorted({o.code for o in outcomes}, key=str))
    heads = Counter(o.headline for o in outcomes).most_common(1)[0][0] or "(none)"
    summ = Counter(summary_of(o) for o in outcomes).most_common(1)[0][0]
    at_exit = max(len(o.left_at_exit) for o in outcomes)
    after = max(len(o.left_after) for o in outcomes)
    return " | ".join([
        "", fault, primitive,
        f"{statistics.median(times):.1f} / {max(times):.1f}" if times else "-", codes,
        cell(heads), cell(summ), f"{at_exit} / {after}",
        f"{max(gone):.1f}" if gone and None not in gone else "not gone",
        f"{statistics.median(bws):.3f}" if bws else "-",
        "yes" if not wrong else cell("; ".join(wrong), 200), ""]).strip()


def repeat(fault: str, column: str, repeats: int, expect: Expect,
           once: Callable[[int], Outcome]) -> tuple[str, bool]:
    """Run a row ``repeats`` times (``once(i)``, the i-th), each repeat's outcome said on stderr
    as it ends; its table line, and whether a repeat did not end as ``expect`` says."""
    outcomes, wrong = [], []
    for i in range(repeats):
        o = once(i)
        outcomes.append(o)
        found = problems(o, expect)
        wrong += [f"#{i + 1}: {p}" for p in found]
        print(f"{fault} {column} #{i + 1}: exit {o.code}, {o.fault_to_exit_s or 0:.1f} s; "
              + ("as expected" if not found else "; ".join(found)), file=sys.stderr, flush=True)
    return line(fault, column, outcomes, wrong), bool(wrong)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--primitives", default=",".join(PRIMITIVES))
    ap.add_argument("--faults", default=",".join(f.name for f in FAULTS))
    args = ap.parse_args()
    primitives, names = args.primitives.split(","), args.faults.split(",")
    table, absent, missed = [], [], 0
    with tempfile.TemporaryDirectory(prefix="fault-matrix-") as tmp:
        for fault in (f for f in FAULTS if f.name in names):
            with standing(*fault.cluster) as cluster:
                for primitive in primitives:
                    if primitive not in fault.expect:
                        absent.append(f"| {fault.name} | {primitive} | "
                                      f"{fault.absent.get(primitive, 'not a row')} |")
                        continue
                    row, wrong = repeat(
                        fault.name, primitive, args.repeats, fault.expect[primitive],
                        lambda i, f=fault, p=primitive: run_row(
                            cluster, p, f, Path(tmp) / f"{f.name}-{p}-{i}.jsonl"))
                    missed += wrong
                    table.append(row)
    print(f"\n{args.repeats} repeat(s) per row; left running: at the exit / {SETTLE_S:.0f} s "
          "after it\n")
    print("| fault | primitive | fault→exit s (median / max) | exit code | headline | summary "
          "| left running | gone s (max) | 16 MiB busbw GB/s | as expected |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(table))
    if absent:
        print("\n| fault | primitive | not a row |\n|---|---|---|")
        print("\n".join(absent))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
