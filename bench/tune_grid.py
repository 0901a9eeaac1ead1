"""Issue 35's grid in one run: on emulated nodes (network namespaces, veth, tbf both ways) of
each --nodes count at each --links rate, `fabbench tune` of mpi on the shipped ethernet profile
(its final stage: the default against the tuned settings, alternating, with the wire's ceiling
measured in the same job), then gloo as shipped (torch exposes nothing of Gloo's collectives to
tune: its default is its tuned). Per cluster, primitive and size: allreduce busbw, default and
tuned, as a share of the measured ceiling and of the nominal link; and how busy this host's cores
were in the busiest quarter of the run (bench/wire.py's gauge): on one 2-core host every node's
ranks, TCP, veth and tbf work share the same cores, so a share near 100 % names the CPUs as the
limit, not the emulated wire.

Needs root. Usage: python bench/tune_grid.py [--nodes 2,4] [--links 1gbit,10gbit]
[--sizes 1M,4M,16M,64M] [--budget 0.3] [--repeats 2] [--keep DIR]; the table of a kept grid
again: python bench/tune_grid.py --report DIR. Exit 0 when every tune and run finished (a tune
whose settings did not hold, or that found nothing faster, counts as finished: its rows say so;
with nothing faster, the default's figures are the first stage's base launches and the ceiling
is gloo's run's on the same cluster), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wire import CpuWatch  # noqa: E402

from fabbench.emulate import ENV, make_emulation  # noqa: E402
from fabbench.emulate.session import emulated  # noqa: E402
from fabbench.errors import UsageError  # noqa: E402
from fabbench.results.reader import read_results  # noqa: E402
from fabbench.results.records import Ceiling  # noqa: E402
from fabbench.scaling.costs import coefficients  # noqa: E402
from fabbench.scaling.fit import fit_records  # noqa: E402
from fabbench.tune.publish import final_gains  # noqa: E402
from fabbench.tune.search import final_launches, replayed  # noqa: E402
from fabbench.units import format_size  # noqa: E402
from fabbench.workloads.collectives.record import Collective  # noqa: E402

TIMEOUT_S = 3000
SMALL = (1 << 20, 4 << 20)  # where the α-β limit shows: α's share of the time there


def alpha_beta(files: list[Path]) -> str:
    """The α-β fit of allreduce (fabbench.scaling, T = a·α + b·n·β for the algorithm) over the
    sizes of each launch, the median over launches: α, the asymptotic busbw 1/β, and α's share
    of the fitted time at 1 and 4 MiB (the latency limit of the small sizes)."""
    fits = []
    for path in files:
        try:
            found, _ = fit_records(read_results(path).of_kind(Collective))
        except Exception as exc:  # noqa: BLE001 - the table says why there is no fit
            return f"no fit ({exc})"
        fits += [f for f in found if f.op == "allreduce"]
    if not fits:
        return "no fit"
    fit = sorted(fits, key=lambda f: f.alpha_s)[len(fits) // 2]
    a, _, _ = coefficients(fit.op, fit.algorithm, fit.ranks)
    shares = ", ".join(f"{format_size(n)} {a * fit.alpha_s / fit.predict_s(n):.0%}"
                       for n in SMALL)
    return (f"α {fit.alpha_s * 1e6:.0f} us, 1/β {fit.bandwidth_gbyte_s:.3g} GB/s "
            f"({fit.algorithm}); α's share of the time: {shares}")


def fabbench(args: list[str], state: Path) -> tuple[int, float, float]:
    """One fabbench command inside the cluster, its output passed on; with the CPU gauge:
    (exit code, busy share, softirq share)."""
    with CpuWatch() as cpu:
        p = subprocess.run([sys.executable, "-m", "fabbench", *args], capture_output=True,
                           text=True, timeout=TIMEOUT_S, check=False,
                           env={**os.environ, ENV: str(state)})
    sys.stderr.write(p.stdout[-4000:])
    if p.returncode not in (0, 1) or "error" in p.stderr:
        sys.stderr.write(p.stderr[-3000:])
    return (p.returncode, *cpu.busiest())


def measure(where: Path, nodes: int, link: str, a: argparse.Namespace) -> None:
    """The cluster's tune of mpi and run of gloo, into ``where``; what ran in where/grid.json."""
    emulation = make_emulation(nodes=nodes, link=link)
    common = ["--fabric", "ethernet", "--ranks", str(nodes), "--sizes", a.sizes,
              "--budget", a.budget]
    done: dict = {"nodes": nodes, "link": link, "nominal_gbit_s": emulation.link.rate_bit_s / 1e9}
    with emulated(emulation) as cluster:
        print(f"# {nodes} nodes at {link}: tune of mpi", file=sys.stderr, flush=True)
        done["mpi"] = fabbench(["tune", str(where / "mpi"), *common, "--primitive", "mpi",
                                "--repeats", a.repeats], cluster.state_file)
        print(f"# {nodes} nodes at {link}: gloo as shipped", file=sys.stderr, flush=True)
        done["gloo"] = fabbench(["run", *common, "--primitive", "gloo", "--ops", "allreduce",
                                 "--ceiling", "--out", str(where / "gloo.jsonl")],
                                cluster.state_file)
    (where / "grid.json").write_text(json.dumps(done))


def busbw_of(files: list[Path]) -> dict[int, float]:
    """allreduce busbw per size, the median over ``files`` (launches of one setting)."""
    got: dict[int, list[float]] = {}
    for path in files:
        for r in read_results(path).of_kind(Collective):
            if r.op == "allreduce":
                got.setdefault(r.bytes, []).append(r.busbw_gbyte_s)
    return {n: statistics.median(v) for n, v in sorted(got.items())}


def table(where: Path) -> tuple[list[tuple], list[str], list[str]]:
    """The rows, α-β fits and failures of one cluster's folder (measure's, or kept)."""
    done = json.loads((where / "grid.json").read_text()) if (where / "grid.json").is_file() \
        else {}
    nodes, link = where.name.split("n-", 1)
    nominal = done.get("nominal_gbit_s") or make_emulation(nodes=int(nodes), link=link) \
        .link.rate_bit_s / 1e9
    code, busy, soft = done.get("mpi", (None, math.nan, math.nan))
    gcode, gbusy, gsoft = done.get("gloo", (None, math.nan, math.nan))
    rows, fits, failed = [], [], []
    gloo = where / "gloo.jsonl"
    wire = None
    if gloo.is_file():
        results = read_results(gloo)
        wire = max((c.per_direction_gbit_s for c in results.of_kind(Ceiling)
                    if c.per_direction_gbit_s), default=None)
    tag = f"{nodes}n {link}"
    trials = where / "mpi" / "trials"
    if code not in (0, 1, None):
        failed.append(f"{tag} mpi: the tune exited {code}")
    elif (where / "mpi" / "tune.json").is_file():
        try:
            gains = final_gains(replayed(where / "mpi"))
        except UsageError as exc:
            failed.append(f"{tag} mpi: {exc}")
            return rows, fits, failed
        held = "tuned held" if code == 0 else "tuned did not hold" if code == 1 else "tuned"
        if gains:
            rows += [(nodes, link, "mpi", g.bytes, g.default_gbyte_s, g.tuned_gbyte_s,
                      gains.ceiling_gbit_s, nominal, busy, soft, f"{held}, {g.verdict}")
                     for g in gains.rows]
            fits += [f"{tag} mpi {label}: " + alpha_beta(final_launches(trials, label))
                     for label in ("default", "tuned")]
        else:
            # nothing was faster: no final stage; the default is the first stage's base, and
            # the wire's ceiling the one gloo's run measured on the same cluster
            base = sorted(trials.glob("01-*-base-r*.jsonl"))
            for n, bw in busbw_of(base).items():
                rows.append((nodes, link, "mpi", n, bw, bw, wire, nominal, busy, soft,
                             "nothing was faster than the default (ceiling: gloo's run)"))
            fits.append(f"{tag} mpi default: " + alpha_beta(base))
    if gcode not in (0, None):
        failed.append(f"{tag} gloo: exit {gcode}")
    elif gloo.is_file():
        fits.append(f"{tag} gloo: " + alpha_beta([gloo]))
        for n, bw in busbw_of([gloo]).items():
            rows.append((nodes, link, "gloo", n, bw, bw, wire, nominal, gbusy, gsoft,
                         "nothing to tune"))
    return rows, fits, failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="2,4")
    ap.add_argument("--links", default="1gbit,10gbit")
    ap.add_argument("--sizes", default="1M,4M,16M,64M")
    ap.add_argument("--budget", default="0.3")
    ap.add_argument("--repeats", default="2")
    ap.add_argument("--keep", type=Path, help="keep the tunes and runs here")
    ap.add_argument("--report", type=Path, help="only print the table of a kept grid")
    a = ap.parse_args()
    rows: list[tuple] = []
    fits: list[str] = []
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fabbench-tune-grid-") as tmp:
        if a.report:
            folders = sorted(a.report.glob("*n-*"), key=lambda f: (int(f.name.split("n-")[0]),
                                                                   f.name))
        else:
            if os.geteuid() != 0:
                sys.exit("bench/tune_grid.py: needs root (network namespaces)")
            top = a.keep or Path(tmp)
            folders = []
            for nodes in map(int, a.nodes.split(",")):
                for link in a.links.split(","):
                    where = top / f"{nodes}n-{link}"
                    where.mkdir(parents=True, exist_ok=True)
                    measure(where, nodes, link, a)
                    folders.append(where)
        for where in folders:
            got = table(where)
            rows += got[0]
            fits += got[1]
            failed += got[2]
    print("allreduce busbw; ceiling: the fastest of the wire's rates iperf3 measured in the same "
          "job; CPU: this host's cores in the busiest quarter of the tune or run")
    print(f"{'nodes':>5} {'link':>7} {'prim':<5} {'size':>6} {'default GB/s':>12} "
          f"{'tuned GB/s':>10} {'/ceiling':>8} {'/nominal':>8} {'CPU':>5} {'softirq':>7}  note")
    for nodes, link, prim, size, dflt, tuned, ceil, nom, busy, soft, note in rows:
        share = f"{tuned * 8 / ceil:.2f}" if ceil else "-"
        cpu = "    -       -" if math.isnan(busy) else f"{busy:>5.0%} {soft:>7.0%}"
        print(f"{nodes:>5} {link:>7} {prim:<5} {format_size(size):>6} {dflt:>12.4g} "
              f"{tuned:>10.4g} {share:>8} {tuned * 8 / nom:>8.2f} {cpu}  {note}")
    print("α-β fits of allreduce (median over the launches):")
    for line in fits:
        print(f"  {line}")
    for line in failed:
        print(f"failed: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
