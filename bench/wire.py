"""How close each primitive gets to the wire: 2 emulated nodes (network namespaces, veth, tbf
at --link both ways), the raw ceiling measured in the same job (iperf3 one way and both ways),
then allreduce and sendrecv at --size. Printed per primitive x pattern: busbw, its share of the
measured ceiling (both ways at once, per direction: what a ring allreduce or a bidirectional
sendrecv loads) and of the nominal link, so the profiles can be tuned toward the wire; and how
busy this host's cores were in the busiest quarter of each run (/proc/stat every 0.5 s, softirq
apart): on one host every node's TCP, veth and tbf work shares its cores, and a share near 100 %
says the CPUs, not the emulated wire, are what limits.

Variants: mpi with the ethernet profile as shipped; mpi with Open MPI's btl_tcp_links 4 (several
TCP connections per peer, a profile written for this run); gloo. Rounds alternate the variants
and the best round of each is kept, so a noisy neighbour does not pick the winner.

Needs root (namespaces). Usage: python bench/wire.py [--link 1gbit] [--size 64M] [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from fabbench.emulate import ENV, make_emulation
from fabbench.emulate.session import emulated
from fabbench.fabrics.profile import BUILTIN_DIR
from fabbench.results.link import ceiling_of
from fabbench.results.reader import read_results
from fabbench.results.records import Ceiling
from fabbench.workloads.collectives.record import Collective

OPS = ("allreduce", "sendrecv")
TIMEOUT_S = 900


def links4_profile(folder: Path) -> Path:
    """The shipped ethernet profile with btl_tcp_links = 4 added to its mpi MCA table."""
    text = (BUILTIN_DIR / "ethernet.toml").read_text()
    line = 'mca = { pml = "ob1", btl = "self,tcp", btl_tcp_if_include = "{iface}" }'
    if line not in text:
        sys.exit("bench/wire.py: the ethernet profile's mpi MCA line changed; update links4")
    path = folder / "ethernet-links4.toml"
    path.write_text(text.replace('name = "ethernet"', 'name = "ethernet-links4"').replace(
        line, line[:-2] + ', btl_tcp_links = "4" }'))
    return path


def cpu_times() -> tuple[float, float, float]:
    """This host's CPU seconds so far (every core): (busy, softirq, total), from /proc/stat."""
    fields = [float(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    hz = os.sysconf("SC_CLK_TCK")
    total = sum(fields)
    return (total - idle - iowait) / hz, softirq / hz, total / hz


class CpuWatch:
    """Samples the host's CPU use every ``every_s`` while a run lasts: what share of every core
    was busy (and in softirq: the kernel's TCP, veth and tbf work), interval by interval."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s, self.samples = every_s, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        last = cpu_times()
        while not self._stop.wait(self.every_s):
            now = cpu_times()
            total = now[2] - last[2]
            if total > 0:
                self.samples.append(((now[0] - last[0]) / total, (now[1] - last[1]) / total))
            last = now

    def __enter__(self) -> CpuWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def busiest(self) -> tuple[float, float]:
        """The busy and softirq shares of the busiest quarter of the intervals (the run's
        measuring phases; its start-up is mostly idle waiting)."""
        top = sorted(self.samples, reverse=True)[:max(1, len(self.samples) // 4)]
        if not self.samples:
            return 0.0, 0.0
        return (sum(b for b, _ in top) / len(top), sum(s for _, s in top) / len(top))


def run_one(label: str, args: list[str], cluster_state: str, out: Path) -> dict:
    argv = [sys.executable, "-m", "fabbench", "run", *args, "--ops", ",".join(OPS),
            "--out", str(out)]
    with CpuWatch() as cpu:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                           check=False, env={**os.environ, ENV: cluster_state})
    if p.returncode != 0:
        sys.exit(f"bench/wire.py: {label} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    results = read_results(out)
    ceilings = results.of_kind(Ceiling)
    ceiling = ceiling_of(ceilings)
    one_way = [r for r in ceilings if r.mode == "one-way"]
    busbw = {r.op: r.busbw_gbyte_s for r in results.of_kind(Collective)}
    return {"busbw": busbw, "ceiling": ceiling.speed_gbit_s if ceiling else None,
            "one_way": one_way[0].per_direction_gbit_s if one_way else None,
            "cpu": cpu.busiest()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--link", default="1gbit")
    ap.add_argument("--size", default="64M")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--budget", default="1.0")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/wire.py: needs root (network namespaces)")
    emulation = make_emulation(nodes=2, link=a.link)
    nominal = emulation.link.rate_bit_s / 1e9
    common = ["--sizes", a.size, "--budget", a.budget, "--min-samples", "3", "--timeout", "60",
              "--ceiling", "--ceiling-seconds", "2"]
    best: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="fabbench-wire-") as tmp, \
            emulated(emulation) as cluster:
        variants = {
            "mpi (ethernet profile)": ["--fabric", "ethernet", "--primitive", "mpi"],
            "mpi btl_tcp_links 4": ["--fabric", str(links4_profile(Path(tmp))),
                                    "--primitive", "mpi"],
            "gloo": ["--fabric", "ethernet", "--primitive", "gloo"],
        }
        for rnd in range(a.rounds):
            for number, (label, args) in enumerate(variants.items()):
                got = run_one(label, [*args, *common], str(cluster.state_file),
                              Path(tmp) / f"{rnd}-{number}-{label.split()[0]}.jsonl")
                print(f"# round {rnd + 1} {label}: "
                      + ", ".join(f"{op} {v:.4f} GB/s" for op, v in got["busbw"].items())
                      + f"; ceiling {got['ceiling']:.3f} Gbit/s per direction both ways, "
                        f"{got['one_way']:.3f} one way; host CPU busiest quarter "
                        f"{got['cpu'][0]:.0%} busy, {got['cpu'][1]:.0%} softirq",
                      file=sys.stderr, flush=True)
                keep = best.setdefault(label, got)
                for op, v in got["busbw"].items():
                    if v >= keep["busbw"].get(op, 0):
                        keep["busbw"][op] = v
                        keep["ceiling"], keep["one_way"] = got["ceiling"], got["one_way"]
                        keep["cpu"] = got["cpu"]
    print(f"2 emulated nodes, {a.link} links (tbf both ways), {a.size}, best of {a.rounds} "
          f"round(s); ceiling = iperf3 both ways at once, per direction, same job")
    print(f"{'primitive':<24} {'pattern':<10} {'busbw GB/s':>10} {'Gbit/s':>7} "
          f"{'ceiling':>8} {'% ceil':>7} {'% link':>7} {'CPU busy':>8} {'softirq':>7}")
    for label, got in best.items():
        for op in OPS:
            v = got["busbw"][op]
            print(f"{label:<24} {op:<10} {v:>10.4f} {v * 8:>7.3f} {got['ceiling']:>8.3f} "
                  f"{100 * v * 8 / got['ceiling']:>6.1f}% {100 * v * 8 / nominal:>6.1f}% "
                  f"{got['cpu'][0]:>8.0%} {got['cpu'][1]:>7.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
