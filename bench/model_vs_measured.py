"""The model against measurement, on emulated clusters.

1. Allreduce: `fabbench forecast`'s α-β fit of a 2-node emulated run (Open MPI, 8 B to 2 MiB)
   predicts the allreduce at 4 and 8 nodes (its α and bandwidth in the best algorithm's formula,
   as its table does); the same emulated link then measures it at 1 and 2 MiB. Target (issue
   11): within 15 %. The links are slow (10 Mbit/s) because every emulated node's traffic
   crosses one bridge on this host's CPU: 8 nodes at R both ways need 16·R forwarded.
   Open MPI runs its ring allreduce (coll_tuned_allreduce_algorithm 4), the algorithm whose
   cost the model's bandwidth term is; `--algorithm tuned` leaves Open MPI's own choice, which
   for these sizes at 4 and 8 ranks (recursive halving, Rabenseifner) measured 75-93 % slower
   than predicted on this host at 10 Mbit/s (quiet host, one run), while its ring came within
   7 % at 4 nodes and at 8 nodes with 2 MiB: the α-β model has no term for what that pattern
   costs over TCP (each step opens a different connection, idle since its last use; TCP
   restarts slow start after idle — our reading, not measured separately).
   Every allreduce point, the fit's and the measured ones, is the median of at least 15
   samples (`--samples`). A 1 MiB allreduce at 8 nodes varies by ~10 % from one sample to the
   next, and the 2-node fit's 1 MiB point by up to 35 %: with the 5 samples this benchmark took
   before, its 8-node 1 MiB error ranged from +1.7 % to +21.3 % over eight runs (two sessions).
   With 15 samples, ring, default protocol, 10 Mbit/s, five runs on a quiet host, errors at
   4 nodes 1 and 2 MiB / 8 nodes 1 and 2 MiB (each measured median's 95 % interval ±1-7 %):
     -8.8 to -1.8 % / -10.9 to -2.7 % / -2.6 to +15.2 % / -7.8 to +0.5 %
   (the 8-node 1 MiB allreduce 1.90-2.14 s against 1.81-1.96 s predicted: the target missed
   there once, by 0.2 points, and met with under 2 points to spare in two more). That point has
   the least margin: its 14 steps each move 128 KiB, above Open MPI's 64 KiB eager limit, and a
   rendezvous message first waits for the receiver's reply, which on a loaded link queues behind
   the receiver's own outgoing data (the link's 50 ms tbf queue); the α-β model prices a message
   α + S·β, with no round trip, and the 2-node fit folds that wait into its bandwidth, drawn
   mostly from larger steps (its five sizes' steps move 4 B to 1 MiB; one of them 128 KiB).
   That is our reading: the waits were not timed one by one. `--protocol eager` sends every
   message eagerly (btl_tcp_eager_limit 4 MiB; the default keeps Open MPI's rendezvous above
   64 KiB); with 5 samples it measured +12 to +18 % at that point (four runs), no better.
2. Training: the what-if (Zhang et al.) fitted on the 1-node run of `--scaling 1,2` predicts the
   scaling factor at 2 nodes, t_batch / (t_batch + overhead); links 100 Mbit/s and 1 Gbit/s,
   the what-if given the wire's ceiling measured in the same job (iperf3 both ways, per
   direction; the prediction at the nominal rate is printed beside it). Emulated nodes share
   this host's cores, so what is judged is what the network adds: the measured network share,
   the 2-node compute-only step over the same ranks' full step (both from the same job, so the
   host's speed of the moment cancels), against the predicted scaling. Target: within 0.1, on
   the median of `--train-repeats` runs (default 3). The compute drift (the 2-node compute
   step against the 1-node step the what-if was fitted on) is printed beside it with the whole
   scaling factor T_2 / (2·T_1): on this 2-core VM it is 19-41 % (a step waits for the slower
   of two ranks on a host whose speed drifts), which no pair of real nodes shows, and the whole
   factor then misses by 0.12-0.16 at 1 Gbit/s while the network share is within 0.04-0.09.
   On real nodes the whole factor is the figure to judge; docs/methods.md gives every run.

Every figure comes from fabbench's own commands: `fabbench emulate run -- run` writes the records
and fabbench.scaling.predict.build (what `fabbench forecast` prints) makes the predictions. Needs
root.
Exits 1 when a target is missed. ``--json FILE`` writes the rows; ``--quick`` is the smaller
version tests/integration/test_model_vs_measured.py runs (allreduce only: 4 nodes, 1 MiB).

Usage: python bench/model_vs_measured.py [--link 250mbit] [--nodes 4,8] [--samples 15]
       [--train-links 100mbit,1gbit] [--train-repeats 3] [--quick] [--json F]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from fabbench.results.reader import read_results
from fabbench.results.records import Ceiling
from fabbench.scaling import costs
from fabbench.scaling.predict import ModelOptions, build
from fabbench.workloads.collectives.record import Collective
from fabbench.workloads.train.record import Train

ALLREDUCE_TARGET = 0.15
SCALING_TARGET = 0.10
TRAIN = ["--primitive", "gloo", "--workload", "train", "--model", "gpt-tiny", "--batch-size",
         "4", "--steps", "10", "--warmup-steps", "3", "--scaling", "1,2"]


RING = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
        "OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}
# every message of these runs eager: sent at once, no rendezvous round trip (docstring)
EAGER = {f"OMPI_MCA_btl_tcp_{name}": str(4 << 20)
         for name in ("eager_limit", "rndv_eager_limit", "max_send_size")}


def emulated(nodes: int, link: str, run_args: list[str], out: Path, max_time: int = 900,
             ceiling: bool = False, env: dict[str, str] | None = None) -> None:
    cmd = [sys.executable, "-m", "fabbench", "emulate", "run", "--nodes", str(nodes), "--link",
           link, "--max-time", str(max_time), "--", "run", *run_args,
           "--ceiling" if ceiling else "--no-ceiling", "--timeout", "120", "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=max_time + 120, check=False,
                       env={**os.environ, **(env or {})})
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")


def allreduce_rows(link: str, nodes: list[int], fit_sizes: str, sizes: str, tmp: Path,
                   env: dict[str, str], samples: int) -> list[dict]:
    mpi = ["--primitive", "mpi", "--ops", "allreduce", "--budget", "0.5", "--min-samples",
           str(samples)]
    fit_file = tmp / "fit-2.jsonl"
    emulated(2, link, [*mpi, "--sizes", fit_sizes], fit_file, env=env)
    rows = []
    for n in nodes:
        answer = build([fit_file], ModelOptions(nodes=n))
        params = costs.Params(alpha_s=answer.alpha_us * 1e-6,
                              beta_s_per_byte=1 / answer.bandwidth_bytes_per_s)
        measured_file = tmp / f"measured-{n}.jsonl"
        emulated(n, link, [*mpi, "--sizes", sizes], measured_file, env=env)
        for rec in read_results(measured_file).of_kind(Collective):
            algorithm, t = costs.best("allreduce", n, rec.bytes, params)
            ring = costs.time_s("allreduce", "ring", n, rec.bytes, params)
            rows.append({"what": "allreduce", "link": link, "nodes": n, "bytes": rec.bytes,
                         "predicted_us": t * 1e6, "algorithm": algorithm, "ring_us": ring * 1e6,
                         "measured_us": rec.time_us.p50,
                         "measured_ci95_rel": rec.median_ci95_rel, "samples": rec.samples,
                         "error": rec.time_us.p50 / (t * 1e6) - 1,
                         "fit_bandwidth_gbyte_s": answer.bandwidth_bytes_per_s / 1e9,
                         "fit_alpha_us": answer.alpha_us})
    return rows


def training_rows(links: list[str], tmp: Path, repeats: int) -> list[dict]:
    rows = []
    for link, repeat in itertools.product(links, range(repeats)):
        out = tmp / f"train-{link}-{repeat}.jsonl"
        emulated(2, link, TRAIN, out, ceiling=True)
        results = read_results(out)
        measured = next(t for t in results.of_kind(Train) if t.ranks == 2)
        ceiling = min(c.per_direction_gbit_s for c in results.of_kind(Ceiling)
                      if c.mode == "bidir" and c.per_direction_gbit_s)
        at_ceiling, profile = (
            build([out], ModelOptions(nodes=2, bandwidth=rate)).train[0]
            for rate in (f"{ceiling}Gbit", _model_rate(link)))
        predicted, nominal = (next(p for p in answer.by_nodes if p.nodes == 2)
                              for answer in (at_ceiling, profile))
        rows.append({"what": "train", "link": link, "repeat": repeat, "nodes": 2,
                     "model": profile.model,
                     "ceiling_gbit_s": ceiling,
                     "predicted_scaling": predicted.scaling,
                     "predicted_scaling_nominal": nominal.scaling,
                     "measured_scaling": measured.scaling_efficiency,
                     "error": measured.scaling_efficiency - predicted.scaling,
                     "iteration_ms": profile.iteration_ms,
                     "predicted_overhead_ms": predicted.overhead_ms,
                     "measured_step_ms": measured.step_ms,
                     "measured_compute_ms": measured.compute_ms,
                     "network_scaling": measured.compute_ms / measured.step_ms,
                     "network_error": measured.compute_ms / measured.step_ms
                     - predicted.scaling,
                     "compute_drift": measured.compute_ms / profile.iteration_ms - 1,
                     "grad_bytes": profile.grad_bytes, "notes": list(profile.notes)})
    return rows


def _percent(rel: float | None) -> str:
    """The measured median's 95 % interval, ± % of it ("-" below 6 samples)."""
    return "-" if rel is None else f"{100 * rel:.0f}%"


def _model_rate(link: str) -> str:
    """tc's rate ("100mbit", "1gbit") as `fabbench forecast --bandwidth` takes it."""
    number = link.lower().removesuffix("bit")
    return number[:-1] + number[-1].upper() + "bit"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--link", default="10mbit", help="the allreduce runs' link rate")
    ap.add_argument("--algorithm", choices=("ring", "tuned"), default="ring",
                    help="Open MPI's allreduce: its ring, or its own choice")
    ap.add_argument("--protocol", choices=("eager", "default"), default="default",
                    help="Open MPI's TCP messages: all eager (up to 4 MiB), or its default "
                         "(rendezvous above 64 KiB)")
    ap.add_argument("--nodes", default="4,8")
    ap.add_argument("--train-links", default="100mbit,1gbit", help="'' for none")
    ap.add_argument("--sizes", default="1M,2M", help="the allreduce sizes measured at scale")
    ap.add_argument("--samples", type=int,
                    help="allreduce samples per point, at least, in the fit and measured runs "
                         "(default 15; 5 with --quick)")
    ap.add_argument("--train-repeats", type=int, default=3,
                    help="training runs per link; the target is judged on their median")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    nodes = [int(n) for n in args.nodes.split(",")]
    fit_sizes, sizes = "8,64K,256K,1M,2M", args.sizes
    links = [x for x in args.train_links.split(",") if x]
    if args.quick:
        nodes, fit_sizes, sizes, links = [4], "8,64K,1M", "1M", []
    samples = args.samples or (5 if args.quick else 15)
    if samples < 1 or args.train_repeats < 1:
        ap.error("--samples and --train-repeats must be at least 1")
    env = {**(RING if args.algorithm == "ring" else {}),
           **(EAGER if args.protocol == "eager" else {})}
    with tempfile.TemporaryDirectory(prefix="fabbench-model-bench-") as tmp:
        rows = allreduce_rows(args.link, nodes, fit_sizes, sizes, Path(tmp), env, samples)
        rows += training_rows(links, Path(tmp), args.train_repeats)
    ok = True
    print(f"allreduce (Open MPI, {args.algorithm} algorithm, {args.protocol} protocol, link "
          f"{args.link}): fit on 2 nodes, predicted vs measured p50")
    print(f"{'nodes':>5} {'size':>10} {'predicted µs':>13} {'measured µs':>12} {'error':>7} "
          f"{'±CI95':>6} {'n':>3} {'ring µs':>9}  model's best algorithm (same bandwidth term "
          f"as the ring)")
    for r in (r for r in rows if r["what"] == "allreduce"):
        ok &= abs(r["error"]) <= ALLREDUCE_TARGET
        print(f"{r['nodes']:>5} {r['bytes']:>10} {r['predicted_us']:>13.0f} "
              f"{r['measured_us']:>12.0f} {100 * r['error']:>+6.1f}% "
              f"{_percent(r['measured_ci95_rel']):>6} {r['samples']:>3} {r['ring_us']:>9.0f}  "
              f"{r['algorithm']}")
    print("\ntraining what-if (gpt-tiny, gloo DDP): fit on 1 node, scaling at 2 nodes")
    print(f"{'link':>8} {'ceiling':>8} {'predicted':>10} {'net share':>9} {'diff':>6} "
          f"{'drift':>6} {'whole':>6} {'diff':>6} {'at nominal':>10} {'step ms':>8} "
          f"{'compute ms':>10} {'1-node ms':>9}")
    for r in (r for r in rows if r["what"] == "train"):
        print(f"{r['link']:>8} {r['ceiling_gbit_s']:>8.3f} {r['predicted_scaling']:>10.3f} "
              f"{r['network_scaling']:>9.3f} {r['network_error']:>+6.3f} "
              f"{100 * r['compute_drift']:>+5.0f}% {r['measured_scaling']:>6.3f} "
              f"{r['error']:>+6.3f} {r['predicted_scaling_nominal']:>10.3f} "
              f"{r['measured_step_ms']:>8.1f} {r['measured_compute_ms']:>10.1f} "
              f"{r['iteration_ms']:>9.1f}")
    print("(ceiling: iperf3 both ways, Gbit/s per direction; net share: the 2-node compute-only "
          "step over the same ranks' full step, what the network adds, judged against the "
          "predicted scaling; drift: the 2-node compute step against the 1-node step the "
          "what-if was fitted on (emulated nodes share this host's cores; real nodes do not "
          "drift so); whole: T_2 / (2·T_1) and its diff, shown, judged on real nodes only)")
    for link in links:
        median = statistics.median(r["network_error"] for r in rows if r.get("link") == link
                                   and r["what"] == "train")
        ok &= abs(median) <= SCALING_TARGET
        print(f"{link}: median network-share diff of {args.train_repeats} runs {median:+.3f}")
    print(f"\ntargets: allreduce within {100 * ALLREDUCE_TARGET:.0f} %, network share within "
          f"{SCALING_TARGET}: {'met' if ok else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
