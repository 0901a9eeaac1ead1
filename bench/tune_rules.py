"""Is a tune's coll_tuned rules file real? The tuned profile run by `fabbench run`, against a
bare program given the same settings on its own mpirun line (`--mca
coll_tuned_dynamic_rules_filename FILE` and the profile's other MCA parameters): the C reference
loop of the fidelity check (fabbench.fidelity.loops.mpi_loop.c), on local ranks.

The loop runs fabbench's protocol with fabbench's batch (FABBENCH_LOOP_BATCH_S: the budget over
the engine's samples target, as the fidelity check gives it): with the loop's own 5 ms batch
against fabbench's 25 ms at --budget 0.5, the two timed different numbers of back-to-back
operations per sample. For each round both run once, the order reversed every other round; per
size the verdict takes the median of the rounds' ratios (fabbench's p50 over the loop's), within
1 +- 0.03 as the fidelity band; the quartiles of the ratios show the rounds' spread. Beside it
the same loop without the rules file (`--mca` of the profile as it was before the tune): when
the rules changed the algorithm, that one differs, so agreement with the tuned run is the file
at work, not the library's default.

Usage: python bench/tune_rules.py TUNE_DIR [--rounds 20] [--ranks 2] [--budget 1]
(5 rounds are too few for a ±3 % verdict on a 2-core host: docs/tuning.md)
Exit 0 when every size is within the band, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

import tomllib

from fabbench.fidelity import check
from fabbench.timing.engine import TimingPolicy

BAND = 0.03


def mpirun(ranks: int, mca: dict[str, str], sizes: list[int], budget_s: float) -> list[str]:
    """The C loop's command line; its batch of operations lasts what fabbench's does at
    ``budget_s`` (the budget over the engine's samples target), as the fidelity check's."""
    batch_s = budget_s / TimingPolicy().samples_target
    argv = [shutil.which("mpirun") or "mpirun", "--allow-run-as-root", "--oversubscribe",
            "--bind-to", "none", "-np", str(ranks), "--mca", "mpi_yield_when_idle", "1",
            "-x", f"FABBENCH_LOOP_BATCH_S={batch_s!r}"]
    for key, value in mca.items():
        argv += ["--mca", key, value.replace("{iface}", "lo")]
    return [*argv, str(check.build_c_loop()), "allreduce", *map(str, sizes)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tune_dir", type=Path)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--budget", type=float, default=1.0)
    args = ap.parse_args()
    state = json.loads((args.tune_dir / "tune.json").read_text())
    tuned_path = next(args.tune_dir.glob("*-tuned.toml"), None)
    if tuned_path is None:
        print(f"{args.tune_dir}: no tuned profile (nothing was faster than the default, or the "
              "tuned settings did not hold against it)")
        return 2
    tuned = tomllib.loads(tuned_path.read_text())["primitive"]["mpi"]["mca"]
    before = tomllib.loads(Path(state["profile_source"]).read_text())["primitive"]["mpi"]["mca"]
    sizes = sorted({int(p["bytes"]) for s in state["stages"] for c in s["candidates"]
                    for p in c["points"]})
    path = check.FidelityPath(label="tuned", fabric=str(tuned_path), primitive="mpi",
                              references=("c",))
    ratios: dict[int, list[float]] = {n: [] for n in sizes}
    untuned: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(args.rounds):
        sides = ["fabbench", "loop", "untuned"]
        got: dict[str, dict[int, float]] = {}
        for side in sides if r % 2 == 0 else sides[::-1]:
            if side == "fabbench":
                got[side] = check.run_fabbench(path, "allreduce", sizes, args.ranks,
                                               args.budget, 600)
            else:
                out = check.run_commands([(mpirun(args.ranks, tuned if side == "loop" else
                                                  before, sizes, args.budget), dict(os.environ))],
                                         600, side)
                got[side] = check.parse_loop_output(out[0])
        for n in sizes:
            ratios[n].append(got["fabbench"][n] / got["loop"][n])
            untuned[n].append(got["untuned"][n] / got["loop"][n])
        print(f"round {r + 1}: " + ", ".join(
            f"{n}: fabbench {got['fabbench'][n]:.1f} us, loop {got['loop'][n]:.1f} us, "
            f"untuned loop {got['untuned'][n]:.1f} us" for n in sizes), flush=True)
    ok = True
    print(f"{'bytes':>10} {'fabbench/loop':>14} {'quartiles':>13} {'untuned/loop':>13}  "
          f"verdict (band ±{BAND:.0%})")
    for n in sizes:
        ratio = statistics.median(ratios[n])
        q1, _, q3 = statistics.quantiles(ratios[n], n=4) if len(ratios[n]) > 1 else [ratio] * 3
        within = abs(ratio - 1) <= BAND
        ok &= within
        print(f"{n:>10} {ratio:>14.3f} {q1:>6.3f}-{q3:<6.3f} "
              f"{statistics.median(untuned[n]):>13.3f}  {'within' if within else 'OUT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
