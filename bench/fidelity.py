"""Fidelity benchmark: fabbench's own figures against the bare loops of the libraries it drives.

For every path this host can run (fabbench.fidelity.check.PATHS: mpi over ob1/tcp, ob1/vader,
ucx/tcp and cm/ofi/tcp; gloo over tcp; Horovod over MPI and over Gloo) the same allreduce is
timed by `fabbench run` and by the reference loops (the C MPI loop and an mpi4py loop for MPI,
a torch.distributed loop for Gloo, Horovod's own allreduce_ for Horovod), started by the same
launcher with the same settings, alternating round by round; the best of each side is kept.

Verdict per path x size (docs/methods.md, "Fidelity"): at >= 256 KiB the busbw ratio fabbench /
reference within 1 +- 0.03; at <= 64 B at most 2 us added (MPI) or within 5 % (Gloo, Horovod).
Faster than the reference is as wrong as slower. The verdict is against the first reference of
each path (the C loop for MPI); the others are printed beside it.

Run under `fabbench emulate up` (FABBENCH_EMULATION set) the same comparison runs across the
emulated nodes. `--osu DIR` adds OSU's own osu_allreduce from DIR (built by the user: OSU's
sources are not downloadable on every host), started with the same mpirun line.

Usage: python bench/fidelity.py [--rounds 3] [--sizes 8,256K,1M,4M,16M] [--paths all]
Exit 0 when every judged point is within the band, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from fabbench.errors import FabbenchError
from fabbench.fidelity import check
from fabbench.units import parse_sizes


def osu_allreduce(path: check.FidelityPath, osu_dir: Path, sizes: list[int],
                  timeout_s: float) -> dict[int, float]:
    """OSU's osu_allreduce (its average latency per size), started like fabbench's ranks."""
    from fabbench.launch.settings import resolve
    from fabbench.launch.table import launch_spec

    exe = osu_dir / "osu_allreduce"
    if not os.access(exe, os.X_OK):
        raise SystemExit(f"bench/fidelity.py: no executable osu_allreduce in {osu_dir}")
    plan = check.plan_for(path, None, sizes, "allreduce")
    lo, hi = min(sizes), max(sizes)
    spec = launch_spec(plan, resolve(plan), [str(exe), "-m", f"{lo}:{hi}", "-f"])
    (out,) = check.run_commands([(spec.commands[0], {**os.environ, **spec.env[0]})], timeout_s,
                                "osu_allreduce")
    times = {}
    for line in out.splitlines():
        m = re.match(r"^\s*(\d+)\s+([\d.]+)", line)
        if m and int(m.group(1)) in sizes:
            times[int(m.group(1))] = float(m.group(2))
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="8,256K,1M,4M,16M")
    ap.add_argument("--paths", default="all", help=f"comma list of {', '.join(check.PATHS)}")
    ap.add_argument("--op", default="allreduce", choices=check.OPS)
    ap.add_argument("--ranks", type=int, default=None)
    ap.add_argument("--budget", type=float, default=0.15, help="fabbench's --budget")
    ap.add_argument("--osu", type=Path, default=None,
                    help="folder with OSU's osu_allreduce, compared on the MPI paths")
    args = ap.parse_args()
    try:
        sizes = list(parse_sizes(args.sizes))
        chosen = check.paths(args.paths)
    except FabbenchError as exc:
        print(f"bench/fidelity.py: {exc}", file=sys.stderr)
        return 2
    where = "emulated nodes" if os.environ.get("FABBENCH_EMULATION") else "local ranks"
    print(f"# fidelity: fabbench vs bare loops, {args.op}, {where}, best of {args.rounds} "
          f"alternating rounds; band: ratio 1+-{check.BAND_REL:g} at >= "
          f"{check.BAND_FROM_BYTES >> 10} KiB, +-{check.LATENCY_ADDED_US:g} us (mpi) or "
          f"1+-{check.LATENCY_REL:g} at <= {check.LATENCY_MAX_BYTES} B")
    print(f"{'path':>12} {'reference':>9} {'bytes':>10} {'ref p50 us':>11} {'fb p50 us':>10} "
          f"{'ratio':>6} {'added us':>9} {'verdict':>16}")
    ok = True
    for path in chosen:
        try:
            points = check.compare(path, args.op, sizes, rounds=args.rounds, ranks=args.ranks,
                                   budget_s=args.budget,
                                   progress=lambda s: print(f"# {s}", file=sys.stderr,
                                                            flush=True))
        except FabbenchError as exc:
            print(f"{path.label:>12} failed: {exc}", flush=True)
            ok = False
            continue
        if args.osu is not None and path.primitive == "mpi" and args.op == "allreduce":
            osu = osu_allreduce(path, args.osu, sizes, 600.0)
            fb = {p.bytes: p.fabbench_us for p in points}
            points += [check.Point(path.label, args.op, s, "osu", t, fb[s])
                       for s, t in sorted(osu.items()) if s in fb]
        for p in points:
            judged = p.reference == path.references[0]
            met, goal = p.verdict(path.primitive)
            verdict = (f"{goal} {'ok' if met else 'MISS'}" if met is not None else "-") \
                if judged else "(shown)"
            ok &= met is not False or not judged
            print(f"{p.path:>12} {p.reference:>9} {p.bytes:>10} {p.ref_us:>11.2f} "
                  f"{p.fabbench_us:>10.2f} {p.ratio:>6.3f} {p.added_us:>9.2f} {verdict:>16}",
                  flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
