"""Fidelity of the replay (issue 62): a recorded job's communication per step against the
replay's, and the replay's operations alone against a bare torch.distributed loop.

    .venv/bin/python bench/replay_fidelity.py [--job ddp|fsdp|groups] [--ranks 2] [--rounds 3]
        [--steps 12] [--repeat 10] [--pairs 6] [--warmup 2] [--model gpt-tiny] [--out DIR]
        [--json]

Each round, in turn:

1. the job: examples/replay/<job>.py under `fabbench trace` (torchrun, gloo on CPU), its trace
   the round's; the job's own communication per step is the trace's ``comm_us`` (the time at
   least one of its operations was in flight), the slowest rank's, median over its steps after
   the first;
2. the replay of that trace with its gaps (`fabbench run --workload replay`): its ``comm_us``
   per step, by the same rule (goal: within 10 % of the job's);
3. the replay back to back and bench/replay_bare.py, a bare torch.distributed loop of the same
   operations written without fabbench (its buffers page-aligned mappings, as the replay's and
   every bare loop's here), --pairs times, alternating which runs first; each after a warm-up of
   --warmup passes over the trace's steps (connections made, buffers and caches warm: a short
   run's first steps carry the start of whichever process runs them). The round's figure is the
   median of the pairs' ratios (goal: within the fidelity band of fabbench.fidelity, 1 +- BAND).

The job and its replay alternate round after round, so that drift on a shared machine hits
both alike. Prints a table per round and the medians; --json one object."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BARE = Path(__file__).with_name("replay_bare.py")
BIN = Path(sys.executable).parent
GOAL_GAPS = 0.10
# the jobs and the bare loop keep Gloo to the loopback interface, as the replay's fabric
# profile (ethernet, one host) does; else Gloo takes the host name's address
LOOPBACK = {"GLOO_SOCKET_IFNAME": "lo"}


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> str:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                       env={**os.environ, **LOOPBACK, **(env or {})})
    if p.returncode:
        raise SystemExit(f"replay_fidelity: {' '.join(argv[:6])} ... exited {p.returncode}:\n"
                         f"{p.stderr[-2000:]}")
    return p.stdout


def _torchrun(ranks: int) -> list[str]:
    return [str(BIN / "torchrun"), "--nproc-per-node", str(ranks), "--standalone"]


def job_comm_us(trace: Path) -> tuple[float, int]:
    """The job's communication per step: the slowest rank's comm_us, median over the steps
    after the first two (DDP's first two carry its start: the parameters' broadcast, the
    buffers', the first step's whole-model allreduce). And the steps."""
    doc = json.loads(trace.read_text())
    steps = len(doc["ranks"][0]["steps"])
    per_step = [max(r["steps"][i]["comm_us"] for r in doc["ranks"])
                for i in range(min(2, steps - 1), steps)]
    return statistics.median(per_step), steps


def replay(trace: Path, out: Path, mode: str, ranks: int, steps: int,
           warmup: int) -> dict[str, object]:
    _run([str(BIN / "fabbench"), "run", "--workload", "replay", "--trace", str(trace),
          "--replay-mode", mode, "--replay-steps", str(steps), "--replay-warmup", str(warmup),
          "--primitive", "gloo", "--ranks", str(ranks), "--out", str(out)], 900)
    rec: dict[str, object] = next(r for r in map(json.loads, out.read_text().splitlines())
                                  if r["kind"] == "replay")
    return rec


def bare_step_us(trace: Path, ranks: int, steps: int, warmup: int) -> float:
    out = _run([*_torchrun(ranks), str(BARE), str(trace), str(steps), str(warmup)], 900,
               env={"OMP_NUM_THREADS": "1"})
    return float(json.loads(out.strip().splitlines()[-1])["step_us_p50"])


def back_to_back_pair(trace: Path, out: Path, ranks: int, steps: int, warmup: int,
                      bare_first: bool) -> tuple[float, float]:
    """(the back-to-back replay's step, the bare loop's), µs, the one or the other run first."""
    def alone() -> float:
        rec = replay(trace, out, "back-to-back", ranks, steps, warmup)
        return float(rec["step_us"]["p50"])  # type: ignore[index]

    if bare_first:
        b = bare_step_us(trace, ranks, steps, warmup)
        return alone(), b
    a = alone()
    return a, bare_step_us(trace, ranks, steps, warmup)


def main() -> int:
    from fabbench.fidelity.check import BAND_REL

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", choices=("ddp", "fsdp", "groups"), default="ddp")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12, help="the job's steps, all recorded")
    ap.add_argument("--repeat", type=int, default=10,
                    help="the replays and the bare loop time every recorded step this often")
    ap.add_argument("--pairs", type=int, default=6,
                    help="back-to-back replays and bare loops per round, alternating")
    ap.add_argument("--warmup", type=int, default=2,
                    help="passes over the trace's steps before the timed ones")
    ap.add_argument("--model", default="gpt-tiny")
    ap.add_argument("--out", type=Path, default=None, help="keep every trace and result here")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="replay-fidelity-"))
    rounds = []
    for i in range(args.rounds):
        rec_dir = work / f"round{i}" / "trace"
        _run([str(BIN / "fabbench"), "trace", "--out", str(rec_dir), "--",
              *_torchrun(args.ranks), str(ROOT / "examples" / "replay" / f"{args.job}.py"),
              "--model", args.model, "--steps", str(args.steps)], 900)
        trace = rec_dir / "trace.json"
        job, steps = job_comm_us(trace)
        # every recorded step replayed --repeat times over: the medians see the steps' mix
        timed, warm = args.repeat * steps, args.warmup * steps
        gaps = replay(trace, work / f"round{i}" / "gaps.jsonl", "gaps", args.ranks, timed, 2)
        pairs = [back_to_back_pair(trace, work / f"round{i}" / f"alone{k}.jsonl", args.ranks,
                                   timed, warm, bare_first=k % 2 == 1)
                 for k in range(args.pairs)]
        replayed = gaps["comm_us"]["p50"]  # type: ignore[index]
        rounds.append({"round": i + 1, "job_comm_us": job, "replay_comm_us": replayed,
                       "gaps_ratio": replayed / job,
                       "back_to_back_us": statistics.median(a for a, _ in pairs),
                       "bare_us": statistics.median(b for _, b in pairs),
                       "pair_ratios": [a / b for a, b in pairs],
                       "bare_ratio": statistics.median(a / b for a, b in pairs)})
    gaps_ratio = statistics.median(r["gaps_ratio"] for r in rounds)
    bare_ratio = statistics.median(x for r in rounds for x in r["pair_ratios"])
    verdict = {"gaps": abs(gaps_ratio - 1) <= GOAL_GAPS, "bare": abs(bare_ratio - 1) <= BAND_REL}
    if args.json:
        print(json.dumps({"job": args.job, "ranks": args.ranks, "model": args.model,
                          "rounds": rounds, "gaps_ratio": gaps_ratio, "bare_ratio": bare_ratio,
                          "goal_gaps": GOAL_GAPS, "band": BAND_REL, "verdict": verdict}))
    else:
        print(f"# {args.job} of {args.model}, {args.ranks} ranks, gloo on CPU; files in {work}")
        print(f"{'round':>5} {'job comm us':>12} {'replay comm us':>15} {'ratio':>7} "
              f"{'back-to-back us':>16} {'bare us':>10} {'ratio':>7}")
        for r in rounds:
            print(f"{r['round']:>5} {r['job_comm_us']:>12.1f} {r['replay_comm_us']:>15.1f} "
                  f"{r['gaps_ratio']:>7.3f} {r['back_to_back_us']:>16.1f} {r['bare_us']:>10.1f} "
                  f"{r['bare_ratio']:>7.3f}")
        print(f"median: replay/job {gaps_ratio:.3f} (goal within {GOAL_GAPS:.0%}: "
              f"{'met' if verdict['gaps'] else 'MISSED'}); back-to-back/bare {bare_ratio:.3f} "
              f"(band 1 +- {BAND_REL:g}: {'met' if verdict['bare'] else 'MISSED'})")
    return 0 if all(verdict.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
