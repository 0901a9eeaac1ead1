"""Fidelity of fabbench's training loop: its samples/s against a bare, hand-written DDP loop on
the same model, the same ranks, the same threads and the same synthetic batch.

    .venv/bin/python bench/train_fidelity.py [--model resnet50] [--image-size 64] [--batch 4]
        [--steps 10] [--rounds 3] [--ranks 2] [--device cpu|cuda] [--primitive gloo|nccl]
        [--precision fp32|bf16|fp16] [--warmup 2] [--json] [--per-step]

Each rank builds both: the bare loop (a DDP model, SGD, zero_grad/forward/loss/backward/step,
the whole loop timed once, slowest rank) and fabbench's (workloads.train.run.Trainer and its timed
step loop, exactly as ``fabbench run --workload train`` runs it). The two alternate, round after
round (bare, fabbench, bare, fabbench, ...), so that drift on a shared machine hits both alike.
Reported per round and as the median: bare samples/s; fabbench's reported figure (p50 of the
per-step rates) and its mean rate (samples / summed step time); the ratios to bare. Goal >= 0.98.

On a GPU (--device cuda; each rank on GPU local_rank % GPUs, as fabbench places it) the bare loop
synchronises the device before it reads the clock, and with --precision fp16/bf16 it runs under
torch.autocast, fp16 with a GradScaler, as AMP's recipe has it. --json prints one JSON object
(the rounds, the medians and the verdict) instead of the table (bench/gpu/drive.py reads it).
--per-step also times the bare loop per step as fabbench times its steps (CUDA events on a GPU),
either loop first in alternate rounds, and keeps every step's time of both: where a gap between
the mean and the p50 comes from.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def _rank_main(args: argparse.Namespace) -> None:
    import torch

    from fabbench.comm.torchdist import TorchComm
    from fabbench.networks import build
    from fabbench.plan import Plan
    from fabbench.workloads.collectives import Sweep
    from fabbench.workloads.train.run import (
        Trainer,
        _slowest,
        _timed,
        set_threads,
        timed_steps,
    )
    from fabbench.workloads.train.section import TrainConfig

    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    comm = TorchComm(args.primitive, rank=rank, size=size, local_rank=rank, device=args.device,
                     timeout_s=120)
    plan = Plan(fabric="ethernet", primitive=args.primitive, ranks=size, workload="train",
                collectives=Sweep(ops=("allreduce",), sizes=(8,)), out="/dev/null",
                run_id="fidelity", device=args.device,
                train=TrainConfig(model=args.model, batch_size=args.batch,
                                  image_size=args.image_size, steps=args.steps,
                                  warmup_steps=args.warmup, precision=args.precision))
    fab = Trainer(plan, comm)  # sets the threads per rank as fabbench does
    fab.go_distributed()
    if args.device == "cpu":
        set_threads(torch, size)

    # the bare loop, written as anyone would
    torch.manual_seed(0)
    device = torch.device(comm.device)
    model = build(args.model).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=plan.train.bucket_mb)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9)
    x, y = fab.x, fab.y  # the same synthetic batch
    amp = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    scaler = torch.amp.GradScaler("cuda") if args.precision == "fp16" else None

    def bare_steps(n: int) -> None:
        for _ in range(n):
            opt.zero_grad()
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                out = ddp(x)
                loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                         y.reshape(-1))
            if scaler is None:
                loss.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def slowest(value: float) -> float:
        return comm.max_scalar(value)  # a device tensor: NCCL reduces nothing else

    global_batch = args.batch * size
    no_watchdog = lambda seconds, what: None  # noqa: E731
    bare_steps(args.warmup)  # on a GPU with fp16 also the GradScaler's first, skipped, steps
    _timed(fab.step, args.warmup, no_watchdog, 60, "warm-up")

    def fab_loop() -> list[float]:
        comm.barrier()
        return _slowest(comm, timed_steps(fab, fab.step, args.steps, no_watchdog, 60, "step"))

    def bare_loop() -> list[float]:  # the bare loop timed per step as fabbench times its steps
        comm.barrier()
        return _slowest(comm, timed_steps(fab, lambda sync=True: bare_steps(1), args.steps,
                                          no_watchdog, 60, "bare step"))

    rows = []
    for r in range(args.rounds):
        comm.barrier()  # all-reduce and device synchronise (dist.barrier guesses NCCL's device)
        t0 = time.perf_counter()
        bare_steps(args.steps)
        sync()
        bare = global_batch * args.steps / slowest(time.perf_counter() - t0)
        if args.per_step and r % 2 == 0:  # either goes first in every other round
            ev = bare_loop()
            times = fab_loop()
        else:
            times = fab_loop()
            ev = bare_loop() if args.per_step else []
        rates = [global_batch / t for t in times]
        row = {"round": r + 1, "bare": bare, "fab_p50": statistics.median(rates),
               "fab_mean": global_batch * len(times) / sum(times)}
        if ev:
            row |= {"bare_ev_p50": statistics.median(global_batch / t for t in ev),
                    "bare_ev_mean": global_batch * len(ev) / sum(ev),
                    "fab_ms": [round(t * 1e3, 3) for t in times],
                    "bare_ev_ms": [round(t * 1e3, 3) for t in ev]}
        rows.append(row)
    if rank == 0:
        print(json.dumps(rows), flush=True)
    comm.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps of each loop first")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--primitive", choices=("gloo", "nccl"), default="gloo")
    ap.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    ap.add_argument("--per-step", action="store_true",
                    help="also time the bare loop per step as fabbench does, and keep every "
                         "step's time of both (JSON only): where a gap between mean and p50 "
                         "comes from")
    args = ap.parse_args()
    if "RANK" in os.environ:
        _rank_main(args)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = []
    for rank in range(args.ranks):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(args.ranks),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "GLOO_SOCKET_IFNAME": "lo"}
        procs.append(subprocess.Popen([sys.executable, __file__, *sys.argv[1:]], env=env,
                                      stdout=subprocess.PIPE, text=True))
    try:
        outs = [p.communicate(timeout=args.timeout)[0] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        print(f"train_fidelity: ranks did not finish within {args.timeout:.0f} s", file=sys.stderr)
        return 1
    if any(p.returncode for p in procs):
        print("train_fidelity: a rank failed", file=sys.stderr)
        return 1
    rows = json.loads(outs[0].strip().splitlines()[-1])
    med = {k: statistics.median(r[k] for r in rows) for k in ("bare", "fab_p50", "fab_mean")}
    ratio_p50 = statistics.median(r["fab_p50"] / r["bare"] for r in rows)
    ratio_mean = statistics.median(r["fab_mean"] / r["bare"] for r in rows)
    verdict = "meets" if ratio_mean >= 0.98 else "misses"
    if args.json:
        print(json.dumps({"model": args.model, "input": args.image_size, "batch": args.batch,
                          "ranks": args.ranks, "device": args.device,
                          "primitive": args.primitive, "precision": args.precision,
                          "steps": args.steps, "rounds": rows, "median": med,
                          "ratio_p50": ratio_p50, "ratio_mean": ratio_mean, "goal": 0.98,
                          "verdict": verdict}))
        return 0
    print(f"# {args.model}, image/sequence {args.image_size}, batch {args.batch}/rank, "
          f"{args.ranks} ranks, DDP over {args.primitive} on {args.device}, {args.precision}, "
          f"{args.steps} steps per round")
    print(f"{'round':>5} {'bare samples/s':>15} {'fabbench p50':>13} {'fabbench mean':>14} "
          f"{'p50/bare':>9} {'mean/bare':>10}")
    for r in rows:
        print(f"{r['round']:>5} {r['bare']:>15.2f} {r['fab_p50']:>13.2f} {r['fab_mean']:>14.2f} "
              f"{r['fab_p50'] / r['bare']:>9.3f} {r['fab_mean'] / r['bare']:>10.3f}")
    print(f"{'median':>5} {med['bare']:>15.2f} {med['fab_p50']:>13.2f} {med['fab_mean']:>14.2f} "
          f"{ratio_p50:>9.3f} {ratio_mean:>10.3f}")
    print(f"# fidelity (median of per-round fabbench mean / bare): {ratio_mean:.3f} -> {verdict} "
          "the goal >= 0.98")
    return 0


if __name__ == "__main__":
    sys.exit(main())
