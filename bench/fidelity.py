"""Fidelity benchmark: fabbench's own figures against the bare loops of the libraries it drives.

For every path this host can run (fabbench.fidelity.check.PATHS: mpi over ob1/tcp, ob1/vader,
ucx/tcp and cm/ofi/tcp; gloo over tcp; Horovod over MPI and over Gloo) the same allreduce is
timed by `fabbench run` and by the reference loops (the C MPI loop and an mpi4py loop for MPI,
a torch.distributed loop for Gloo, Horovod's own allreduce_ for Horovod), started by the same
launcher with the same settings, once each per round, the order reversed every other round; the
verdict takes the median of the rounds' paired ratios (each round's reference over its fabbench).
`--again` also runs the first reference twice a round and prints it against itself ("again"): the
spread this host gives two identical programs, the floor under which no verdict can be read.

Verdict per path x size (docs/methods.md, "Fidelity"): at >= 256 KiB the busbw ratio fabbench /
reference within 1 +- 0.03; at <= 64 B at most 2 us added (MPI) or within 5 % (Gloo, Horovod).
Faster than the reference is as wrong as slower. The verdict is against the first reference of
each path (the C loop for MPI); the others are printed beside it.

Run under `fabbench emulate up` (FABBENCH_EMULATION set) the same comparison runs across the
emulated nodes. `--osu DIR` adds OSU's own binaries from DIR (built by the user: OSU's sources
are not downloadable on every host), started with the same mpirun line and interleaved in the same
rounds: osu_allreduce for allreduce, osu_bibw -W 1 for sendrecv (per direction). Beside them runs
the C loop with OSU's protocol ("c-osu": for allreduce one operation between barriers, for
sendrecv osu_bibw's operations back to back; the mean over iterations and ranks): OSU's binary
and c-osu agree, and what sets both apart from fabbench and the C loop is the protocol, not the
host side. `--timing osu` runs fabbench with OSU's protocol too (`fabbench run --timing osu`)
and judges it against c-osu (MPI paths only: the protocol is OSU's, and OSU is an MPI
benchmark): the same protocol on both sides, so the ratio is the host side alone.
With `--osu` every side runs OSU's ladder of sizes (the smallest size asked, doubled up to the
largest), as OSU's binary does, and is judged at the sizes asked: a rank's figure under OSU's
short warm-up depends on the operations the process has done before (docs/methods.md, "Fidelity":
a C loop's 1 MiB allreduce over vader takes 270, then 195, then 165 us in three passes of 110
operations), so the sides must have done the same ones.

Usage: python bench/fidelity.py [--rounds 3] [--sizes 8,256K,1M,4M,16M] [--paths all] [--again]
                               [--osu DIR] [--timing batch|osu]
Exit 0 when every judged point is within the band, 1 otherwise. With --again a miss where the
reference against itself is out of the band too is marked "(A/A out too)": on that host and size
the band is finer than the noise, and the miss says nothing either way (it still counts).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
from pathlib import Path

from fabbench.errors import FabbenchError
from fabbench.fidelity import check
from fabbench.units import parse_sizes

OSU = {"allreduce": "osu_allreduce", "sendrecv": "osu_bibw"}


def osu_times(path: check.FidelityPath, osu_dir: Path, op: str, sizes: list[int],
              timeout_s: float) -> dict[int, float]:
    """OSU's figure per size as microseconds per operation, started with fabbench's mpirun line:
    osu_allreduce's average latency; for sendrecv, osu_bibw's bandwidth with a window of one
    message each way (-W 1: fabbench's sendrecv moves one message each way per operation; both
    directions together, MB/s) as the time to move ``size`` bytes each way, 2 * size / bibw."""
    from fabbench.launch.launchers import launch_spec
    from fabbench.launch.settings import resolve

    exe = osu_dir / OSU[op]
    if not os.access(exe, os.X_OK):
        raise SystemExit(f"bench/fidelity.py: no executable {OSU[op]} in {osu_dir}")
    plan = check.plan_for(path, None, sizes, op)
    lo, hi = min(sizes), max(sizes)
    argv = [str(exe), "-m", f"{lo}:{hi}"] + (["-f"] if op == "allreduce" else ["-W", "1"])
    spec = launch_spec(plan, resolve(plan), argv)
    (out,) = check.run_commands([(spec.commands[0], {**os.environ, **spec.env[0]})], timeout_s,
                                OSU[op])
    times = {}
    for line in out.splitlines():
        m = re.match(r"^\s*(\d+)\s+([\d.]+)", line)
        if m and int(m.group(1)) in sizes:
            size, value = int(m.group(1)), float(m.group(2))
            times[size] = value if op == "allreduce" else 2 * size / value
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="8,256K,1M,4M,16M")
    ap.add_argument("--paths", default="all", help=f"comma list of {', '.join(check.PATHS)}")
    ap.add_argument("--op", default="allreduce", choices=check.OPS)
    ap.add_argument("--ranks", type=int, default=None)
    ap.add_argument("--budget", type=float, default=0.15, help="fabbench's --budget")
    ap.add_argument("--again", action="store_true",
                    help="run the first reference twice a round: its A/A ratio, the noise floor")
    ap.add_argument("--osu", type=Path, default=None,
                    help="folder with OSU's osu_allreduce and osu_bibw, interleaved on MPI paths")
    ap.add_argument("--timing", default="batch", choices=("batch", "osu"),
                    help="fabbench's --timing; osu: judged against c-osu, MPI paths only")
    args = ap.parse_args()
    try:
        sizes = list(parse_sizes(args.sizes))
        chosen = check.paths(args.paths)
    except FabbenchError as exc:
        print(f"bench/fidelity.py: {exc}", file=sys.stderr)
        return 2
    where = "emulated nodes" if os.environ.get("FABBENCH_EMULATION") else "local ranks"
    print(f"# fidelity: fabbench vs bare loops, {args.op}, {where}, median of {args.rounds} "
          f"paired rounds (ABBA); band: ratio 1+-{check.BAND_REL:g} at >= "
          f"{check.BAND_FROM_BYTES >> 10} KiB, +-{check.LATENCY_ADDED_US:g} us (mpi) or "
          f"1+-{check.LATENCY_REL:g} at <= {check.LATENCY_MAX_BYTES} B; fabbench --timing "
          f"{args.timing}")
    print(f"{'path':>12} {'reference':>9} {'bytes':>10} {'ref p50 us':>11} {'fb p50 us':>10} "
          f"{'ratio':>6} {'rounds':>11} {'added us':>9} {'verdict':>16}")
    ok = True
    osu_timing = args.timing == "osu"
    for path in chosen:
        if osu_timing and path.primitive != "mpi":
            print(f"{path.label:>12} skipped: --timing osu is judged against OSU's protocol, "
                  "which only the MPI paths have", flush=True)
            continue
        others = {}
        run_sizes = sizes
        if args.osu is not None and path.primitive == "mpi":
            others["osu"] = functools.partial(osu_times, path, args.osu, args.op, sizes, 900.0)
            run_sizes = check.osu_ladder(sizes)  # every side does the operations OSU's binary does
        try:
            # beside OSU's binary, the C loop with OSU's protocol: what the protocol makes of it
            refs = ("c-osu",) if osu_timing else \
                path.references + (("c-osu",) if others else ())
            points = check.compare(path, args.op, run_sizes, rounds=args.rounds, ranks=args.ranks,
                                   references=refs, timing=args.timing,
                                   budget_s=args.budget, others=others, again=args.again,
                                   progress=lambda s: print(f"# {s}", file=sys.stderr,
                                                            flush=True))
        except FabbenchError as exc:
            print(f"{path.label:>12} failed: {exc}", flush=True)
            ok = False
            continue
        floor = {p.bytes: p for p in points if p.reference == check.AGAIN}
        for p in (p for p in points if p.bytes in sizes):
            judged = p.reference == refs[0]
            met, goal = p.verdict(path.primitive)
            verdict = (f"{goal} {'ok' if met else 'MISS'}" if met is not None else "-") \
                if judged else "(shown)"
            if judged and met is False and p.bytes in floor \
                    and floor[p.bytes].verdict(path.primitive)[0] is False:
                verdict += " (A/A out too)"  # two identical programs differ as much here
            if p.reference == check.AGAIN:  # the reference against itself: not judged
                verdict = "-" if met is None else f"A/A {'within' if met else 'OUT'}"
            ok &= met is not False or not judged
            spread = "{:.3f}-{:.3f}".format(*p.spread)
            print(f"{p.path:>12} {p.reference:>9} {p.bytes:>10} {p.ref_us:>11.2f} "
                  f"{p.fabbench_us:>10.2f} {p.ratio:>6.3f} {spread:>11} {p.added_us:>9.2f} "
                  f"{verdict:>16}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
