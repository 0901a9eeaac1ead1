"""The GPU kit's driver: every GPU fact issue 25 asks for, in one go, within a deadline, written
under one flat folder in at most 8 files. bench/gpu/run.sh installs the kit and calls this.

    python bench/gpu/drive.py --out DIR [--device cuda|cpu] [--scale full|tiny]
        [--deadline-s 540] [--site SITE] [--kit KIT]

Steps, in this order (each one a subprocess with its own time limit, cut to what is left of the
deadline; a step that fails is recorded and the next one runs):
  install         fabbench is imported from SITE (the kit's wheels), not from a checkout, on the
                  Python the kit was made for (KIT/MANIFEST.json)
  env             `fabbench env --json`; nvidia-smi and torch's view
  cuda-mpi        the cuda image's own CUDA-aware Open MPI and UCX (KIT/cuda-mpi.tar.xz, made by
                  prepare.py --cuda-image; bench/gpu/cuda_mpi.py): the C reference loop on
                  cudaMalloc'd buffers, 2 ranks on the one GPU over pml ucx, allreduce and
                  sendrecv, 8 B to 64 MiB, p50 and bandwidths, the UCX transports each endpoint
                  used (an op that fails with UCX's default transports runs once more with
                  cuda_mpi.FALLBACK_TLS; the step then fails, its figures kept); on --device cpu
                  its expected outcome is the loop's "no CUDA device" line (exit 3). Skipped,
                  with the kit's reason, where the kit has no tarball
                  Beside allreduce on device buffers, the split of where its time goes: the
                  same loop staged by hand (device -> pinned host, MPI, back), on host
                  buffers, with coll/cuda excluded, and the coll components enabled
  osu             OSU's osu_latency, osu_bw, osu_allreduce with CUDA (KIT/osu.tar.xz, made by
                  prepare.py --osu; bench/gpu/osu.py), -d cuda, 2 ranks, with the bundle's
                  mpirun, within its own deadline; fabbench / OSU per size beside the cuda-mpi
                  step's sendrecv and allreduce. Skipped on --device cpu and without it
  doctor          `fabbench doctor --json`
  nccl            1 rank, every op, 8 B to 1 GiB, --device cuda --check, CUDA graphs (the
                  default); NCCL's own log kept (the ranks' NCCL_DEBUG files: TMPDIR is a
                  folder of the step's own)
  nccl-tests      nccl-tests (KIT/nccl-tests.tar.xz, made by prepare.py --nccl-tests;
                  bench/gpu/peers.py), each op -G 10 and -G 0 on the nccl step's sizes, with
                  the libnccl.so.2 torch loads; summary.md sets fabbench beside it per size
  nccl-eager      the nccl step's sweep with --cuda-graph off (eager calls), every other size
  graph-probe     bench/gpu/graph_probe.py: sendrecv's variants captured in a CUDA graph, GPU
                  and host time per operation (where its time goes)
  gpudirect-on    `--fabric infiniband --gpudirect on` refused in one line, exit 2 (no RDMA NIC);
                  on --device cpu the refusal that applies there (--gpudirect needs cuda)
  nccl-2-ranks    not tried, and why: NCCL refuses two ranks on one device
  fidelity-*      bench/train_fidelity.py: fabbench's samples/s against a bare torch loop on the
                  same device (ResNet-50 at 224 px and GPT-small, AMP fp16 on cuda), goal 0.98
  train-*         the same models through `fabbench run --workload train` (the records)
  gloo-2-ranks    Gloo at 2 ranks on the device's tensors, one run per op (one op Gloo cannot do
                  on CUDA tensors does not hide the others)
On --device cpu there is no NCCL: its steps are skipped with that reason and the training runs
over Gloo in fp32 (the CPU rehearsal, tests/integration/test_gpu_kit.py).

Written under --out, rewritten after every step (a run cut short keeps what it finished):
summary.md (the table), summary.json (every step: commands, exit codes, seconds, figures),
results.jsonl (every fabbench results file, one after another), nccl.log (NCCL's own lines),
env.json (env, doctor, GPU and driver), console.log (every command's output).
Exit: 0 when every step that ran held what it must, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import cuda_mpi  # bench/gpu/cuda_mpi.py, beside this file
import mpich  # bench/gpu/mpich.py, beside this file
import osu  # bench/gpu/osu.py, beside this file
import peers  # bench/gpu/peers.py, beside this file

HERE = Path(__file__).resolve().parent
FIDELITY = HERE.parent / "train_fidelity.py"
ALL_OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "sendrecv")
OUT_FILES = ("summary.md", "summary.json", "results.jsonl", "nccl.log", "env.json",
             "console.log")
MAX_FILE_CHARS = 15 * 2**20  # the device tool brings back at most 8 files of 16 MiB each
GOAL = 0.98


@dataclass(frozen=True, kw_only=True)
class Scale:
    nccl_sizes: str
    eager_sizes: str  # nccl-eager's: every other size of nccl's (the same largest, so the
    # same buffer copies), to keep the kit within its deadline
    gloo_sizes: str
    gloo_ops: tuple[str, ...]
    image: tuple[str, int, int]  # model, image side, batch per rank
    tokens: tuple[str, int, int]  # model, sequence length, batch per rank
    steps: int
    warmup: int
    rounds: int
    cuda_mpi_sizes: tuple[int, ...]


SCALES = {
    "full": Scale(nccl_sizes="8:1G", eager_sizes="16:1G:4", gloo_sizes="8:64M",
                  gloo_ops=ALL_OPS,
                  image=("resnet50", 224, 64), tokens=("gpt-small", 1024, 8),
                  steps=30, warmup=5, rounds=10,
                  cuda_mpi_sizes=(8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20, 16 << 20,
                                  64 << 20)),
    # the CPU rehearsal: every step, small enough for 2 cores in a minute or two
    "tiny": Scale(nccl_sizes="8:64K", eager_sizes="16:64K:8", gloo_sizes="8:64K:8",
                  gloo_ops=("allreduce", "broadcast"),
                  image=("resnet50", 32, 2), tokens=("gpt-tiny", 32, 2),
                  steps=2, warmup=1, rounds=2, cuda_mpi_sizes=(8, 4096)),
}


@dataclass
class Step:
    name: str
    status: str = "not run"  # ok, failed, skipped, not run
    reason: str = ""
    seconds: float = 0.0
    commands: list[dict] = field(default_factory=list)
    figures: dict = field(default_factory=dict)


class Kit:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.scale = args, SCALES[args.scale]
        self.out = Path(args.out)
        self.work = Path(tempfile.mkdtemp(prefix="gpukit-work-"))
        self.started = time.monotonic()
        self.steps: list[Step] = []
        self.results: list[Path] = []
        self.nccl_lines: list[str] = []
        self.console: list[str] = []
        self.env: dict = {}
        self.fab = [sys.executable, "-m", "fabbench"]

    # ---- running things
    def left(self) -> float:
        return self.args.deadline_s - (time.monotonic() - self.started)

    def sh(self, step: Step, argv: list[str], cap_s: float, env: dict | None = None,
           keep: str | None = None) -> subprocess.CompletedProcess:
        """Run argv in its own process group, at most cap_s (and what the deadline leaves);
        on the limit the whole group is killed and the exit code is 124. keep: a pattern, the
        stdout lines console.log keeps (all where None)."""
        limit = max(1.0, min(cap_s, self.left() - 5))
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, **(env or {})},
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=limit)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=5)
                    break
                except subprocess.TimeoutExpired:
                    continue
            out, err = proc.communicate()
            rc, err = 124, err + f"\n[gpukit: killed after {limit:.0f} s]"
        seconds = round(time.monotonic() - t0, 2)
        shown = " ".join(argv).replace(sys.executable, "python")
        step.commands.append({"argv": shown, "rc": rc, "seconds": seconds})
        kept = out if keep is None else "\n".join(
            line for line in out.splitlines() if re.search(keep, line))
        self.console += [f"$ {shown}", f"[{step.name}: exit {rc}, {seconds} s]",
                         kept.rstrip(), err.rstrip(), ""]
        return subprocess.CompletedProcess(argv, rc, out, err)

    def run_fabbench(self, step: Step, args: list[str], cap_s: float, name: str,
                     ) -> tuple[subprocess.CompletedProcess, list[dict]]:
        """`fabbench run ... --out <work>/<name>.jsonl`; NCCL's log files land in a TMPDIR of the
        step's own and are kept; returns the process and the records it wrote."""
        out, tmp = self.work / f"{name}.jsonl", self.work / f"tmp-{name}"
        tmp.mkdir()
        p = self.sh(step, [*self.fab, "run", *args, "--out", str(out)], cap_s,
                    env={"TMPDIR": str(tmp)})
        for log in sorted(tmp.glob("fabbench-*/nccl.*")):
            self.nccl_lines += [f"# gpukit step {name}: {log.name}",
                                *log.read_text(errors="replace").splitlines()]
        records = []
        if out.exists() and out.stat().st_size:
            self.results.append(out)
            for line in out.read_text().splitlines():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:  # the last line of a killed run
                    continue
        return p, records

    def do(self, name: str, fn, *a) -> None:
        step = Step(name)
        self.steps.append(step)
        if self.left() < 15:
            step.reason = f"the {self.args.deadline_s:.0f} s deadline was reached"
        else:
            t0 = time.monotonic()
            try:
                fn(step, *a)
            except Exception as exc:  # the kit goes on to the next step; the error is kept
                step.status, step.reason = "failed", f"{type(exc).__name__}: {exc}"
            step.seconds = round(time.monotonic() - t0, 2)
        self.write()

    # ---- the steps
    def install(self, step: Step) -> None:
        import fabbench

        where = Path(fabbench.__file__).resolve()
        step.figures = {"fabbench": fabbench.__version__, "imported_from": str(where.parent),
                        "python": platform.python_version(), "executable": sys.executable}
        problems = []
        if self.args.site and not where.is_relative_to(Path(self.args.site).resolve()):
            problems.append(f"fabbench was imported from {where.parent}, not from the kit's "
                            f"install in {self.args.site}")
        if self.args.kit:
            manifest = json.loads(Path(self.args.kit, "MANIFEST.json").read_text())
            step.figures["kit"] = {k: manifest[k] for k in ("python_version", "bytes",
                                                            "fabbench_commit")}
            step.figures["kit"]["wheels"] = sorted(manifest["wheels"])
            have = "{}.{}".format(*sys.version_info[:2])
            if manifest["python_version"] != have:
                problems.append(f"the kit was made for Python {manifest['python_version']}, "
                                f"this is {have}")
        log = Path(self.args.site or "/nonexistent", ".gpukit-install.log")
        if log.exists():
            self.console += ["$ (bench/gpu/run.sh) install from the kit", log.read_text(), ""]
        step.status, step.reason = ("failed", "; ".join(problems)) if problems else (
            "ok", f"fabbench {fabbench.__version__} from {where.parent.parent} on Python "
            f"{platform.python_version()}")

    def environment(self, step: Step) -> None:
        p = self.sh(step, [*self.fab, "env", "--json"], 120)
        if p.returncode:
            step.status, step.reason = "failed", f"fabbench env exited {p.returncode}"
            return
        self.env["fabbench_env"] = json.loads(p.stdout)
        probe = ("import json, torch; c = torch.cuda.is_available(); print(json.dumps({"
                 "'torch': torch.__version__, 'cuda': torch.version.cuda, 'cuda_available': c,"
                 " 'devices': torch.cuda.device_count() if c else 0,"
                 " 'device_name': torch.cuda.get_device_name(0) if c else None,"
                 " 'capability': list(torch.cuda.get_device_capability(0)) if c else None,"
                 " 'nccl': '.'.join(map(str, torch.cuda.nccl.version())) if c else None}))")
        p = self.sh(step, [sys.executable, "-c", probe], 120)
        self.env["torch"] = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr}
        if shutil.which("nvidia-smi"):
            p = self.sh(step, ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                               "compute_cap", "--format=csv,noheader"], 60)
            self.env["nvidia_smi"] = p.stdout.strip().splitlines()
        torch_view = self.env["torch"]
        step.figures = {"gpu": torch_view.get("device_name"), "torch": torch_view.get("torch"),
                        "cuda": torch_view.get("cuda"), "nccl": torch_view.get("nccl"),
                        "nvidia_smi": self.env.get("nvidia_smi")}
        if self.args.device == "cuda" and not torch_view.get("cuda_available"):
            step.status, step.reason = "failed", "--device cuda but torch sees no GPU"
        else:
            step.status = "ok"
            step.reason = (f"{torch_view.get('devices')} GPU(s): {torch_view.get('device_name')}; "
                           f"nvidia-smi: {'; '.join(self.env.get('nvidia_smi') or ['none'])}; "
                           f"torch {torch_view.get('torch')}, CUDA {torch_view.get('cuda')}, "
                           f"NCCL {torch_view.get('nccl')}")

    def bundle(self, step: Step) -> tuple[Path, dict] | None:
        """The cuda-mpi bundle unpacked (once) and its environment; None where there is none
        or it cannot run here, STEP then skipped or failed with the reason."""
        kit = Path(self.args.kit) if self.args.kit else None
        tarball = kit / cuda_mpi.TARBALL if kit else None
        if tarball is None or not tarball.exists():
            why = "no --kit" if kit is None else (self.manifest().get("cuda_mpi") or {}).get(
                "why", "prepare.py made none")
            step.status, step.reason = "skipped", f"the kit has no {cuda_mpi.TARBALL}: {why}"
            return None
        t0 = time.monotonic()
        top = self.work / cuda_mpi.TOP
        if not top.is_dir():
            cuda_mpi.unpack(tarball, self.work)
        bundle = json.loads((top / "MANIFEST.json").read_text())
        env = cuda_mpi.environment(top, os.environ)
        step.figures = {"bundle": {k: bundle.get(k) for k in (
            "image", "image_id", "versions", "needs_versions", "files", "unpacked_bytes")},
            "unpack_s": round(time.monotonic() - t0, 2), "env": env}
        if _older_glibc(step, bundle):
            return None
        return top, env

    def cuda_mpi(self, step: Step) -> None:
        unpacked = self.bundle(step)
        if unpacked is None:
            return
        top, env = unpacked
        bin_ = top / "fabric" / "bin"
        p = self.sh(step, [str(bin_ / "ompi_info"), "--parsable", "--all"], 60, env,
                    keep=r"^ompi:version:full|cuda_support:value|"
                         r"^mca:(pml|coll|btl|mtl|osc):\w+:version:.component")
        aware = "mpi_built_with_cuda_support:value:true" in p.stdout
        ompi = re.search(r"^ompi:version:full:(\S+)", p.stdout, re.M)
        p = self.sh(step, [str(bin_ / "ucx_info"), "-d"], 60, env)
        step.figures.update({
            "openmpi": ompi.group(1) if ompi else None, "built_with_cuda": aware,
            "ucx_transports_available": sorted(set(re.findall(r"Transport: (\S+)", p.stdout))),
            "ops": {}, "sizes": {}, "transports": [], "default_failed": {}})
        problems, tls = [], None
        for op in ("allreduce", "sendrecv"):
            run = self._cuda_mpi_op(step, top, env, op, None)
            if run["no_device"]:
                step.figures.update({"no_device": run["no_device"], "exit": run["rc"],
                                     "transports": run["transports"]})
                tls = ", ".join(run["transports"]) or "none named"
                if self.args.device == "cpu" and run["rc"] == cuda_mpi.NO_DEVICE_EXIT:
                    step.status = "ok"
                    step.reason = (f"{run['no_device']} (exit {run['rc']}): the expected "
                                   f"outcome without a GPU; Open MPI {step.figures['openmpi']} "
                                   f"(built with CUDA: {aware}), UCX transports: {tls}")
                else:
                    step.status = "failed"
                    step.reason = f"{run['no_device']} (exit {run['rc']}); UCX transports: {tls}"
                return
            if run["problem"]:  # once more without the transports a sandbox may refuse
                step.figures["default_failed"][op] = run["problem"]
                problems.append(f"{op} with UCX's default transports: {run['problem']}")
                run = self._cuda_mpi_op(step, top, env, op, cuda_mpi.FALLBACK_TLS)
                tls = cuda_mpi.FALLBACK_TLS
                if run["problem"]:
                    problems.append(f"{op} with UCX_TLS={cuda_mpi.FALLBACK_TLS}: "
                                    f"{run['problem']}")
                else:
                    problems.append(f"with UCX_TLS={cuda_mpi.FALLBACK_TLS} it ran")
            rows = run["rows"]
            step.figures["sizes"][op] = rows
            step.figures["transports"] = sorted({*step.figures["transports"],
                                                 *run["transports"]})
            step.figures["device_line"] = run["device_line"]
            if rows:
                step.figures["ops"][op] = _op_figures(rows, run["problem"])
        step.figures["split"] = self._allreduce_split(step, top, env, tls)
        device_line = step.figures.get("device_line") or ""
        if self.args.device == "cuda" and "CUDA-aware: yes" not in device_line:
            problems.append(f"the loop did not say the MPI is CUDA-aware ({device_line!r})")
        used = step.figures["transports"]
        said = (f"Open MPI {step.figures['openmpi']} over UCX, 2 ranks on {device_line or '?'}; "
                f"UCX transports: {', '.join(used) or 'none named'}"
                + ("" if any(t.startswith("cuda") for t in used) else
                   " (no cuda_* transport named)") + "; " + "; ".join(
                    f"{op} {rows[0]['bytes']} B p50 {rows[0]['p50_us']:.2f} us, "
                    f"{rows[-1]['bytes'] >> 20} MiB busbw {rows[-1]['busbw_gbyte_s']:.3g} GB/s"
                    for op, rows in step.figures["sizes"].items() if rows))
        split = step.figures["split"]
        said += "; allreduce at the largest size, p50 us: " + ", ".join(
            f"{v} {rows[-1]['p50_us']:.4g}" if rows and rows[-1]["bytes"] == max(
                self.scale.cuda_mpi_sizes) else f"{v} -" for v, rows in split["sizes"].items())
        said += "; coll enabled: " + (", ".join(f"{c} {p}" for c, p in split["coll_selected"])
                                      or "none logged")
        step.status = "failed" if problems else "ok"
        step.reason = "; ".join([*problems, said]) if problems else said

    def _allreduce_split(self, step: Step, top: Path, env: dict, tls: str | None) -> dict:
        """Where allreduce on device buffers spends its time (docs/gpu-kit.md): the same loop
        staged by hand, on host buffers, with coll/cuda excluded (cuda_mpi.SPLIT), and the
        coll components Open MPI enabled, from a verbose run at the smallest size. Figures
        only: a variant that fails (coll ^cuda may: Open MPI's reduction then reads device
        memory on the host) is a finding with its line, not the step's failure."""
        sizes = {"device": step.figures["sizes"].get("allreduce") or []}
        problems = {}
        for variant in cuda_mpi.SPLIT:
            if variant == "device":
                continue
            run = self._cuda_mpi_op(step, top, env, "allreduce", tls, variant, cap_s=90)
            sizes[variant] = run["rows"]
            if run["problem"]:
                problems[variant] = run["problem"]
        p = self.sh(step, [*cuda_mpi.mpirun_prefix(str(top / "fabric" / "bin" / "mpirun"), 2,
                                                   tls, cuda_mpi.COLL_VERBOSE),
                           str(top / "mpi_loop"), "allreduce", *cuda_mpi.SPLIT["device"][0],
                           str(min(self.scale.cuda_mpi_sizes))], 60, env)
        return {"ucx_tls": tls or "UCX's default", "sizes": sizes, "problems": problems,
                "coll_selected": cuda_mpi.coll_selected(p.stdout + p.stderr)}

    def _cuda_mpi_op(self, step: Step, top: Path, env: dict, op: str, tls: str | None,
                     variant: str = "device", cap_s: float = 150) -> dict:
        """One mpirun of the loop, its buffers as VARIANT says (cuda_mpi.SPLIT): its exit,
        points, transports, and the problem (None when it held: exit 0, every size, no wrong
        result)."""
        argv = cuda_mpi.mpirun_argv(str(top / "fabric" / "bin" / "mpirun"), str(top / "mpi_loop"),
                                    op, self.scale.cuda_mpi_sizes, 2, tls, variant)
        return self._loop_run(step, argv, env, op, cap_s)

    def _loop_run(self, step: Step, argv: list[str], env: dict, op: str, cap_s: float) -> dict:
        """One launch of the C loop on 2 ranks (ARGV: Open MPI's mpirun or MPICH's mpiexec), read:
        its exit, points, transports (UCX's, where it names them), and the problem (None when it
        held: exit 0, every size, no wrong result)."""
        ranks, sizes = 2, self.scale.cuda_mpi_sizes
        p = self.sh(step, argv, cap_s, env)
        text = p.stdout + "\n" + p.stderr
        device = cuda_mpi.DEVICE_LINE.search(text)
        rows = [{"bytes": b, "p50_us": us, **cuda_mpi.bandwidths(op, b, us, ranks)}
                for b, us in sorted(cuda_mpi.points(p.stdout).items())]
        wrong = [line for line in text.splitlines() if "wrong result" in line]
        problem = None
        if p.returncode or len(rows) != len(sizes) or wrong:
            said = [line for line in p.stderr.splitlines()
                    if line.strip() and "UCX  INFO" not in line]
            tail = (wrong or [line for line in said if "error while loading" in line]
                    or said or ["?"])[-1]
            problem = f"exit {p.returncode}, {len(rows)} of {len(sizes)} sizes: {tail.strip()}"
        return {"rc": p.returncode, "rows": rows, "problem": problem,
                "transports": cuda_mpi.transports(text),
                "device_line": device.group(0) if device else None,
                "no_device": next((line for line in text.splitlines()
                                   if line.startswith(cuda_mpi.NO_DEVICE)), None)}

    def cuda_mpich(self, step: Step) -> None:
        """MPICH with CUDA (the kit's mpich-cuda.tar.xz, made by prepare.py --mpich;
        bench/gpu/mpich.py): the C loop on cudaMalloc'd buffers, 2 ranks on the one GPU by
        hydra, allreduce and sendrecv on the cuda-mpi step's sizes (allreduce reduced on the
        GPU by yaksa), then allreduce staged by hand and on host buffers; an op that fails with
        MPICH's defaults runs once more without CUDA IPC (mpich.FALLBACK_ENV), the step then
        failed with its figures kept."""
        top = cuda_mpi.unpack_from_kit(Path(self.args.kit or ""), mpich.TARBALL, mpich.TOP,
                                       self.work) if self.args.kit else None
        if top is None:
            why = (self.manifest().get("mpich") or {}).get("why", "prepare.py made none")
            step.status, step.reason = "skipped", f"the kit has no {mpich.TARBALL}: {why}"
            return
        bundle = json.loads((top / "MANIFEST.json").read_text())
        env = mpich.environment(top, os.environ)
        step.figures = {"bundle": {k: bundle.get(k) for k in (
            "mpich", "cuda", "cuda_arch", "needs_versions", "files", "unpacked_bytes")},
            "env": env, "run_env": mpich.RUN_ENV, "ops": {}, "sizes": {}, "default_failed": {}}
        if _older_glibc(step, bundle):
            return
        p = self.sh(step, [str(top / "fabric" / "bin" / "mpichversion")], 60, env)
        step.figures["mpichversion"] = p.stdout.strip().splitlines()[:4]
        built_cuda = "--with-cuda" in p.stdout
        mpiexec, loop = str(top / "fabric" / "bin" / "mpiexec"), str(top / "mpi_loop")
        problems, fallback = [], False

        def run(op: str, variant: str = "device", cap_s: float = 150) -> dict:
            argv = mpich.mpiexec_argv(mpiexec, loop, op, self.scale.cuda_mpi_sizes, 2,
                                      fallback, variant)
            return self._loop_run(step, argv, env, op, cap_s)

        for op in ("allreduce", "sendrecv"):
            got = run(op)
            if got["no_device"] or (self.args.device == "cpu" and got["rc"]):
                said = got["no_device"] or (got["problem"] or "?")
                step.figures.update({"no_device": said, "exit": got["rc"]})
                expected = self.args.device == "cpu" and (
                    got["rc"] == cuda_mpi.NO_DEVICE_EXIT or mpich.NO_DRIVER in said)
                step.status = "ok" if expected else "failed"
                step.reason = (f"{said} (exit {got['rc']})" + (
                    ": the expected outcome without a GPU and its driver; MPICH "
                    f"{bundle.get('mpich')} built for CUDA {bundle.get('cuda')} "
                    f"sm_{bundle.get('cuda_arch')}" if expected else ""))
                return
            if got["problem"] and not fallback:
                step.figures["default_failed"][op] = got["problem"]
                problems.append(f"{op} with MPICH's defaults: {got['problem']}")
                fallback = True
                got = run(op)
                problems.append(f"{op} without CUDA IPC: {got['problem'] or 'it ran'}")
            rows = step.figures["sizes"][op] = got["rows"]
            step.figures["device_line"] = got["device_line"]
            if rows:
                step.figures["ops"][op] = _op_figures(rows, got["problem"])
        split = {"device": step.figures["sizes"].get("allreduce") or []}
        for variant in ("staged", "host"):
            got = run("allreduce", variant, 90)
            split[variant] = got["rows"]
            if got["problem"]:
                step.figures.setdefault("split_problems", {})[variant] = got["problem"]
        step.figures["split"] = split
        step.figures["fallback"] = mpich.FALLBACK_ENV if fallback else None
        device_line = step.figures.get("device_line") or ""
        if not built_cuda:
            problems.append("mpichversion does not say --with-cuda")
        if "CUDA-aware: yes" not in device_line:
            problems.append(f"the loop did not say the MPI is CUDA-aware ({device_line!r})")
        said = (f"MPICH {bundle.get('mpich')}, 2 ranks on {device_line or '?'}"
                + (" without CUDA IPC" if fallback else "") + "; " + "; ".join(
                    f"{op} {rows[0]['bytes']} B p50 {rows[0]['p50_us']:.2f} us, "
                    f"{rows[-1]['bytes'] >> 20} MiB busbw {rows[-1]['busbw_gbyte_s']:.3g} GB/s"
                    for op, rows in step.figures["sizes"].items() if rows))
        step.status = "failed" if problems else "ok"
        step.reason = "; ".join([*problems, said]) if problems else said

    def osu(self, step: Step) -> None:
        """OSU's osu_latency, osu_bw and osu_allreduce (the kit's osu.tar.xz, made by prepare.py
        --osu; bench/gpu/osu.py) with the cuda-mpi bundle's mpirun and options, device buffers,
        the cuda-mpi step's sizes, within osu.DEADLINE_S; each beside the cuda-mpi step's
        figure of the same size."""
        if self.args.device != "cuda":
            step.status, step.reason = "skipped", ("no GPU on --device cpu: OSU's programs "
                                                   "run with -d cuda")
            return
        programs = self.peer(step, osu, "osu")
        if programs is None:
            return
        unpacked = self.bundle(step)
        if unpacked is None:
            return
        top, env = unpacked
        ours = next((s.figures for s in self.steps if s.name == "cuda-mpi"), {})
        tls = (ours.get("split") or {}).get("ucx_tls")
        prefix = cuda_mpi.mpirun_prefix(str(top / "fabric" / "bin" / "mpirun"), 2,
                                        tls if tls == cuda_mpi.FALLBACK_TLS else None)
        step.figures.update({"build": json.loads((programs / "BUILD.json").read_text()),
                             "ucx_tls": tls or "UCX's default", "points": {},
                             "transports": {}})
        problems, t0 = [], time.monotonic()
        for program in osu.PROGRAMS:
            left = osu.DEADLINE_S - (time.monotonic() - t0)
            if left < 5:
                problems.append(f"{program}: not run, the step's {osu.DEADLINE_S} s were spent")
                continue
            p = self.sh(step, osu.argv(prefix, programs / program, self.scale.cuda_mpi_sizes,
                                       cuda=True), min(osu.PROGRAM_CAP_S, left), env)
            try:
                points = osu.figures(p.stdout, self.work / f"{program}.txt")
            except Exception as exc:  # fabbench's reader: one line naming what it expected
                points = {}
                problems.append(f"{program} exit {p.returncode}: {exc}")
            else:
                if p.returncode:
                    problems.append(f"{program} exit {p.returncode}, {len(points)} sizes")
            step.figures["points"][program] = points
            step.figures["transports"][program] = cuda_mpi.transports(p.stdout + p.stderr)
        rows = osu.side_by_side(ours.get("sizes") or {}, step.figures["points"])
        step.figures["beside"] = rows
        ratios = {program: [r["ratio"] for r in rows if r["program"] == program
                            and r["ratio"] is not None] for program in osu.PROGRAMS}
        said = f"OSU {step.figures['build'].get('version')} -d cuda, 2 ranks; fabbench / OSU: " \
            + "; ".join(f"{program} {min(r):.3g}-{max(r):.3g} at {len(r)} sizes" if r else
                        f"{program} none (no cuda-mpi figures)"
                        for program, r in ratios.items())
        step.status = "failed" if problems else "ok"
        step.reason = "; ".join([*problems, said])

    def doctor(self, step: Step) -> None:
        # the primitive the kit measures with (nccl on a GPU, gloo in the CPU rehearsal): the
        # default on a host without a GPU is mpi, whose mpi4py the kit does not carry
        primitive = "nccl" if self.args.device == "cuda" else "gloo"
        p = self.sh(step, [*self.fab, "doctor", "--json", "--primitive", primitive], 120)
        if p.returncode not in (0, 1):
            step.status, step.reason = "failed", f"fabbench doctor exited {p.returncode}"
            return
        report = json.loads(p.stdout)
        self.env["fabbench_doctor"] = report
        step.figures = {c["name"]: c["verdict"] for c in report["checks"]}
        step.status = "ok"  # it ran; its verdict (exit 1 when a check fails) is a finding
        step.reason = "doctor: ready" if p.returncode == 0 else \
            "doctor: " + "; ".join(f"{c['name']} {c['verdict']}: {c['detail']}"
                                   for c in report["checks"] if c["verdict"] == "fail")

    def nccl(self, step: Step, graph: bool = True) -> None:
        """fabbench's NCCL sweep: as a user runs it (its default, CUDA graphs; with --check),
        or with --cuda-graph off (eager calls, the figure an eager training loop pays)."""
        if self.args.device != "cuda":
            step.status, step.reason = "skipped", ("no NCCL on --device cpu: NCCL moves GPU "
                                                   "buffers only")
            return
        p, recs = self.run_fabbench(step, [
            "--primitive", "nccl", "--ranks", "1", "--fabric", "ethernet", "--device", "cuda",
            "--sizes", self.scale.nccl_sizes if graph else self.scale.eager_sizes,
            "--timeout", "60", *(["--check"] if graph else ["--cuda-graph", "off"])], 300,
            step.name)
        run = next((r for r in recs if r["kind"] == "run"), {})
        colls = [r for r in recs if r["kind"] == "collective"]
        report = run.get("library_report") or {}
        step.figures = {
            "transport": run.get("transport"), "timing_method": run.get("timing_method"),
            "nccl": (run.get("provenance") or {}).get("versions", {}).get("nccl"),
            "channels": report.get("channels"), "nccl_log_lines": len(self.nccl_lines),
            "ops": _per_op(colls),
            "p50_us": {op: {r["bytes"]: r["time_us"]["p50"] for r in colls if r["op"] == op}
                       for op in dict.fromkeys(r["op"] for r in colls)}}
        problems = _run_problems(p, recs)
        if any(bool(r.get("cuda_graph")) != graph for r in colls):
            problems.append(f"a point not {'in a CUDA graph' if graph else 'eager'}")
        if run.get("timing_method") != "device-synchronize":
            problems.append(f"timing_method {run.get('timing_method')!r}, not "
                            "device-synchronize")
        missing = sorted(set(ALL_OPS) - {r["op"] for r in colls})
        if missing:
            problems.append(f"no records for {', '.join(missing)}")
        if not any(not line.startswith("# gpukit") for line in self.nccl_lines):
            problems.append("NCCL wrote no log lines")
        step.status, step.reason = ("failed", "; ".join(problems)) if problems else (
            "ok", f"{step.figures['transport']}, NCCL {step.figures['nccl']}, "
            f"{step.figures['channels']} channel(s), {len(colls)} points "
            + ("in CUDA graphs, every result correct, " if graph else "of eager calls, ")
            + f"{len(self.nccl_lines)} NCCL log lines")

    def nccl_tests(self, step: Step) -> None:
        """nccl-tests (the kit's build, bench/gpu/peers.py) on the nccl step's sizes, eager and
        as CUDA graphs, each beside fabbench's figure issued the same way."""
        if self.args.device != "cuda":
            step.status, step.reason = "skipped", "no NCCL on --device cpu: nccl-tests needs a GPU"
            return
        programs = self.peer(step, peers, "nccl_tests")
        if programs is None:
            return
        lib = peers.machine_nccl()
        if lib is None:
            step.status, step.reason = "failed", "torch loaded no libnccl.so.2 to run it with"
            return
        from fabbench.units import parse_sizes

        sizes = parse_sizes(self.scale.nccl_sizes)
        env = {"LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}",
               "NCCL_DEBUG": "VERSION"}
        step.figures = {"build": json.loads((programs / "BUILD.json").read_text()),
                        "nccl_lib": str(lib), "points": {}}
        problems = []
        for op, (program, _) in peers.PROGRAMS.items():
            for way in ("graph", "eager"):
                p = self.sh(step, peers.argv(programs / program, (min(sizes), max(sizes)),
                                             way == "graph"), 120, env=env)
                points = peers.parse(p.stdout)
                if p.returncode or not points:
                    problems.append(f"{program} ({way}) exit {p.returncode}, "
                                    f"{len(points)} sizes")
                step.figures["points"].setdefault(op, {})[way] = points
        ratios = [r["ratio"] for r in self.beside_nccl_tests()
                  if r["way"] == "graph" and r["ratio"] is not None]
        step.status = "failed" if problems else "ok"
        step.reason = "; ".join(problems) if problems else (
            f"nccl-tests {step.figures['build'].get('version')}, {len(peers.PROGRAMS)} ops eager "
            f"and -G; fabbench "
            f"(CUDA graph) / nccl-tests -G time at {len(ratios)} points: "
            + (f"{min(ratios):.3f}-{max(ratios):.3f}" if ratios else "none (no nccl step)"))

    def beside_nccl_tests(self) -> list[dict]:
        """fabbench's p50 beside nccl-tests' time per op, size and way of issuing (graph: the
        nccl step against -G; eager: nccl-eager against -G 0), wherever both ran."""
        steps = {s.name: s.figures for s in self.steps}
        peer = (steps.get("nccl-tests") or {}).get("points") or {}
        rows = []
        for op, ways in peer.items():
            column = peers.PROGRAMS[op][1]
            for way, ours in (("graph", "nccl"), ("eager", "nccl-eager")):
                mine = ((steps.get(ours) or {}).get("p50_us") or {}).get(op) or {}
                rows += [{"op": op, "way": way, "column": column, **r}
                         for r in peers.side_by_side(mine, ways.get(way) or {}, column)]
        return rows

    def graph_probe(self, step: Step) -> None:
        """bench/gpu/graph_probe.py: variants of sendrecv captured in a CUDA graph, GPU and host
        time per operation (where sendrecv's time goes; docs/methods.md)."""
        if self.args.device != "cuda":
            step.status, step.reason = "skipped", "no NCCL on --device cpu: the probe needs a GPU"
            return
        p = self.sh(step, [sys.executable, str(HERE / "graph_probe.py")], 120)
        rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        step.figures = {"variants": rows}
        if p.returncode or not rows:
            step.status, step.reason = "failed", f"graph_probe exited {p.returncode}"
            return
        step.status = "ok"
        step.reason = "; ".join(
            f"{r['variant']} {r['bytes']} B: " + (f"capture failed: {r['capture_failed']}"
                                                 if "capture_failed" in r else
                                                 f"GPU {r['gpu_us']} us, host {r['host_us']} us")
            for r in rows)

    def peer(self, step: Step, module, key: str) -> Path | None:
        """A peer's programs (MODULE: peers or osu) unpacked from the kit; None, STEP skipped
        with the kit's reason (its MANIFEST.json's KEY), where the kit has none."""
        programs = module.unpack(Path(self.args.kit or ""), self.work)
        if programs is None:
            why = (self.manifest().get(key) or {}).get("why", "not in the kit")
            step.status, step.reason = "skipped", f"no {module.TARBALL} in the kit: {why}"
        return programs

    def manifest(self) -> dict:
        path = Path(self.args.kit or "", "MANIFEST.json")
        return json.loads(path.read_text()) if path.is_file() else {}

    def gpudirect_on(self, step: Step) -> None:
        if self.args.device == "cuda":
            args = ["--primitive", "nccl", "--fabric", "infiniband", "--device", "cuda"]
            why, says = ("no active InfiniBand/RoCE port: GPUDirect RDMA has no NIC to use",
                         "needs an active InfiniBand/RoCE port")
        else:
            args = ["--primitive", "gloo", "--fabric", "ethernet", "--device", "cpu"]
            why = "--gpudirect is about GPU buffers: it needs --device cuda"
            says = "it needs --device cuda"
        p, recs = self.run_fabbench(step, [*args, "--ranks", "1", "--gpudirect", "on",
                                           "--sizes", "8", "--ops", "allreduce"], 120, "gdr-on")
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        step.figures = {"expected": why, "exit": p.returncode, "stderr": lines}
        if p.returncode == 2 and len(lines) == 1 and says in lines[0] and not recs:
            step.status, step.reason = "ok", lines[0]
        else:
            step.status = "failed"
            step.reason = (f"expected a one-line refusal with exit 2 ({why}); got exit "
                           f"{p.returncode}, {len(lines)} stderr line(s), {len(recs)} records")

    def nccl_two_ranks(self, step: Step) -> None:
        step.status = "skipped"
        step.reason = ("no NCCL on --device cpu" if self.args.device != "cuda" else
                       "not tried: NCCL refuses two ranks on one GPU (ncclInvalidUsage, "
                       "'Duplicate GPU detected'); two-rank NCCL needs two GPUs")

    def fidelity(self, step: Step, family: str) -> None:
        model, size, batch = getattr(self.scale, family)
        cuda = self.args.device == "cuda"
        p = self.sh(step, [sys.executable, str(FIDELITY), "--json", "--per-step", "--ranks", "1",
                           "--device", self.args.device,
                           "--primitive", "nccl" if cuda else "gloo",
                           "--precision", "fp16" if cuda else "fp32", "--model", model,
                           "--image-size", str(size), "--batch", str(batch),
                           "--steps", str(self.scale.steps), "--warmup",
                           str(self.scale.warmup), "--rounds",
                           str(self.scale.rounds), "--timeout", str(max(30, self.left() - 10))],
                    240)
        if p.returncode:
            step.status, step.reason = "failed", f"train_fidelity exited {p.returncode}"
            return
        result = json.loads(p.stdout.strip().splitlines()[-1])
        step.figures = result
        rates = [r[k] for r in result["rounds"] for k in ("bare", "fab_p50", "fab_mean")]
        if not rates or min(rates) <= 0:
            step.status, step.reason = "failed", "a rate was not positive"
            return
        step.status = "ok"
        step.reason = (f"fabbench mean / bare = {result['ratio_mean']:.3f}: {result['verdict']} "
                       f"the goal >= {GOAL}")
        if self.args.scale != "full":
            step.reason += f" (--scale {self.args.scale}: a rehearsal, not a measurement)"

    def train(self, step: Step, family: str) -> None:
        model, size, batch = getattr(self.scale, family)
        cuda = self.args.device == "cuda"
        p, recs = self.run_fabbench(step, [
            "--primitive", "nccl" if cuda else "gloo", "--ranks", "1", "--fabric", "ethernet",
            "--device", self.args.device, "--workload", "train", "--model", model,
            "--image-size", str(size), "--batch-size", str(batch),
            "--precision", "fp16" if cuda else "fp32", "--steps", str(self.scale.steps),
            "--warmup-steps", str(self.scale.warmup), "--timeout", "120"], 240, f"train-{model}")
        trains = [r for r in recs if r["kind"] == "train"]
        problems = _run_problems(p, recs)
        if not trains:
            problems.append("no train record")
        else:
            t = trains[0]
            step.figures = {k: t.get(k) for k in ("model", "precision", "batch_per_rank",
                                                  "samples_per_s", "step_ms", "comm_ms",
                                                  "grads_identical")}
            if not t["samples_per_s"]["p50"] > 0 or t.get("grads_identical") is not True:
                problems.append("samples/s not positive or gradients not identical")
        step.status, step.reason = ("failed", "; ".join(problems)) if problems else (
            "ok", f"{step.figures['samples_per_s']['p50']:.4g} samples/s (p50), step "
            f"{step.figures['step_ms']:.4g} ms, {step.figures['precision']}")

    def gloo(self, step: Step) -> None:
        from fabbench.comm import primitives

        failed = {}
        step.figures = {"device": self.args.device, "ops": {}}
        able = primitives.get("gloo").ops_on(self.args.device)
        for op in self.scale.gloo_ops:
            if self.left() < 20:
                failed[op] = "not run: deadline"
                continue
            p, recs = self.run_fabbench(step, [
                "--primitive", "gloo", "--ranks", "2", "--fabric", "ethernet",
                "--device", self.args.device, "--ops", op, "--sizes", self.scale.gloo_sizes,
                "--check", "--timeout", "60"], 120, f"gloo-{op}")
            if op not in able:  # the registry says Gloo cannot: refused before any rank starts
                said = p.stderr.strip().splitlines()
                step.figures["ops"][op] = {"refused": said[-1] if said else ""}
                if p.returncode != 2 or len(said) != 1 or recs:
                    failed[op] = f"not refused in one line (exit {p.returncode})"
                continue
            run = next((r for r in recs if r["kind"] == "run"), {})
            problems = _run_problems(p, recs)
            if run and run.get("device") != self.args.device:
                problems.append(f"ran on {run.get('device')}")
            per_op = _per_op([r for r in recs if r["kind"] == "collective"])
            step.figures["ops"][op] = per_op.get(op) or {}
            if problems:
                failed[op] = "; ".join(problems)
        step.figures["failed"] = failed
        step.status = "failed" if failed else "ok"
        refused = [op for op in self.scale.gloo_ops if op not in able]
        step.reason = "; ".join(f"{op}: {why}" for op, why in failed.items()) if failed else \
            f"{', '.join(op for op in self.scale.gloo_ops if op in able)} on " \
            f"{self.args.device} tensors, every result correct" + (
                f"; {', '.join(refused)} refused in one line" if refused else "")

    # ---- output
    def write(self) -> None:
        summary = {"device": self.args.device, "scale": self.args.scale,
                   "host": platform.node(), "wall_s": round(time.monotonic() - self.started, 1),
                   "deadline_s": self.args.deadline_s,
                   "ok": all(s.status in ("ok", "skipped") for s in self.steps),
                   "steps": [asdict(s) for s in self.steps],
                   "beside_nccl_tests": self.beside_nccl_tests()}
        texts = {
            "summary.json": json.dumps(summary, indent=2) + "\n",
            "summary.md": _markdown(summary, self.env),
            "results.jsonl": "".join(p.read_text() for p in self.results),
            "env.json": json.dumps(self.env, indent=2) + "\n",
            "console.log": "\n".join(self.console) + "\n",
        }
        if self.nccl_lines:
            texts["nccl.log"] = "\n".join(self.nccl_lines) + "\n"
        for name, text in texts.items():
            if name in ("console.log", "nccl.log") and len(text) > MAX_FILE_CHARS:
                cut = len(text) - MAX_FILE_CHARS
                text = f"[gpukit: the first {cut} characters were cut]\n" + text[cut:]
            tmp = self.out / f".{name}.tmp"
            tmp.write_text(text)
            tmp.replace(self.out / name)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


def _op_figures(rows: list[dict], problem: str | None) -> dict:
    """An op's line in summary.md's table from the C loop's ROWS (bytes, p50, bandwidths)."""
    return {"points": len(rows), "smallest_bytes": rows[0]["bytes"],
            "smallest_p50_us": rows[0]["p50_us"], "largest_bytes": rows[-1]["bytes"],
            "largest_p50_us": rows[-1]["p50_us"],
            "largest_busbw_gbyte_s": rows[-1]["busbw_gbyte_s"], "correct": not problem}


def _older_glibc(step: Step, bundle: dict) -> bool:
    """True, STEP failed with the reason, where this machine's glibc is older than the newest
    symbol version BUNDLE's files need (its MANIFEST.json)."""
    need = (bundle.get("needs_versions") or {}).get("GLIBC")
    have = (os.confstr("CS_GNU_LIBC_VERSION") or "glibc ?").split()[-1]
    if need and _version(have) < _version(need):
        step.status = "failed"
        step.reason = f"the bundle needs glibc {need}, this machine has {have}"
        return True
    return False


def _run_problems(p: subprocess.CompletedProcess, recs: list[dict]) -> list[str]:
    problems = []
    if p.returncode:
        tail = [line for line in p.stderr.splitlines() if line.strip()][-1:]
        problems.append(f"exit {p.returncode}" + (f": {tail[0]}" if tail else ""))
    summaries = [r for r in recs if r["kind"] == "summary"]
    if not summaries or summaries[-1].get("ok") is not True:
        problems.append("no ok summary record")
    if any(r.get("correct") is False for r in recs if r["kind"] == "collective"):
        problems.append("a result was wrong (--check)")
    return problems


def _per_op(colls: list[dict]) -> dict:
    """Per op: the smallest size's p50 time and the largest size's bandwidths."""
    out = {}
    for op in dict.fromkeys(r["op"] for r in colls):
        mine = sorted((r for r in colls if r["op"] == op), key=lambda r: r["bytes"])
        small, big = mine[0], mine[-1]
        out[op] = {"points": len(mine), "smallest_bytes": small["bytes"],
                   "smallest_p50_us": small["time_us"]["p50"], "largest_bytes": big["bytes"],
                   "largest_p50_us": big["time_us"]["p50"],
                   # one rank moves nothing between ranks: no busbw (docs/methods.md)
                   "largest_busbw_gbyte_s": None if big.get("ranks") == 1
                   else big.get("busbw_gbyte_s"),
                   "correct": all(r.get("correct") is True for r in mine)}
    return out


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _split_markdown(summary: dict) -> list[str]:
    """The cuda-mpi step's allreduce split and the osu step's ratios, where they ran."""
    steps = {s["name"]: s["figures"] for s in summary["steps"]}
    lines: list[str] = []
    split = (steps.get("cuda-mpi") or {}).get("split") or {}
    if split.get("sizes"):
        variants = list(split["sizes"])
        p50 = {v: {r["bytes"]: r["p50_us"] for r in rows} for v, rows in split["sizes"].items()}
        lines += ["", "cuda-mpi allreduce, where its time goes: p50 us per size, 2 ranks "
                  f"(UCX_TLS {split['ucx_tls']}; coll enabled on MPI_COMM_WORLD: "
                  + (", ".join(f"{c} {p}" for c, p in split["coll_selected"]) or "none logged")
                  + "):", "", "| bytes | " + " | ".join(variants) + " |",
                  "|---:|" + "---:|" * len(variants)]
        for size in sorted({b for rows in p50.values() for b in rows}):
            lines.append(f"| {size} | " + " | ".join(_num(p50[v].get(size)) for v in variants)
                         + " |")
        lines += [f"{v}: {why}" for v, why in split.get("problems", {}).items()]
    ompi, mpch = ((steps.get(name) or {}).get("sizes") or {} for name in ("cuda-mpi",
                                                                         "cuda-mpich"))
    if ompi or mpch:
        def at(sizes: dict, op: str, key: str) -> dict:
            return {r["bytes"]: r[key] for r in sizes.get(op) or []}
        cols = [at(ompi, "allreduce", "p50_us"), at(mpch, "allreduce", "p50_us"),
                at(ompi, "allreduce", "busbw_gbyte_s"), at(mpch, "allreduce", "busbw_gbyte_s"),
                at(ompi, "sendrecv", "p50_us"), at(mpch, "sendrecv", "p50_us"),
                at(ompi, "sendrecv", "busbw_gbyte_s"), at(mpch, "sendrecv", "busbw_gbyte_s")]
        lines += ["", "The two CUDA-aware MPIs on device buffers, 2 ranks on the one GPU (Open MPI "
                  "stages allreduce through the host; MPICH reduces on the GPU):", "",
                  "| bytes | allreduce us Open MPI | MPICH | allreduce busbw GB/s Open MPI | "
                  "MPICH | sendrecv us Open MPI | MPICH | sendrecv GB/s Open MPI | MPICH |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for size in sorted({b for col in cols for b in col}):
            lines.append(f"| {size} | " + " | ".join(_num(col.get(size)) for col in cols) + " |")
    msplit = (steps.get("cuda-mpich") or {}).get("split") or {}
    if any(msplit.values()):
        p50 = {v: {r["bytes"]: r["p50_us"] for r in rows} for v, rows in msplit.items()}
        lines += ["", "cuda-mpich allreduce, p50 us per size: on device buffers, staged by hand "
                  "through pinned host buffers, on host buffers:", "",
                  "| bytes | " + " | ".join(p50) + " |", "|---:|" + "---:|" * len(p50)]
        for size in sorted({b for col in p50.values() for b in col}):
            lines.append(f"| {size} | " + " | ".join(_num(p50[v].get(size)) for v in p50)
                         + " |")
    rows = (steps.get("osu") or {}).get("beside") or []
    if rows:
        lines += ["", "fabbench's cuda-mpi step beside OSU (-d cuda, 2 ranks): sendrecv p50 us "
                  "against osu_latency, sendrecv GB/s against osu_bw, allreduce p50 us against "
                  "osu_allreduce; ratio = fabbench / OSU:", "",
                  "| program | bytes | fabbench | OSU | ratio |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {r['program']} | {r['bytes']} | {_num(r['fabbench'])} | {_num(r['osu'])} "
                  f"| {_num(r['ratio'])} |" for r in rows]
    return lines


def _markdown(summary: dict, env: dict) -> str:
    torch_view = env.get("torch", {})
    lines = [f"# fabbench GPU kit on {summary['host']} (--device {summary['device']}, "
             f"--scale {summary['scale']})", ""]
    lines += [f"GPU: {torch_view.get('device_name')}; nvidia-smi: "
              f"{'; '.join(env.get('nvidia_smi') or ['none'])}; torch {torch_view.get('torch')}"
              f", CUDA {torch_view.get('cuda')}, NCCL {torch_view.get('nccl')}. "
              f"Wall {summary['wall_s']} s of {summary['deadline_s']:.0f}; "
              f"{'every step held' if summary['ok'] else 'NOT every step held'}.", ""]
    lines += ["| step | status | s | what it found |", "|---|---|---:|---|"]
    for s in summary["steps"]:
        found = s["reason"].replace("|", "/").replace("\n", " ")
        lines.append(f"| {s['name']} | {s['status']} | {s['seconds']} | {found} |")
    fid = [s for s in summary["steps"] if s["name"].startswith("fidelity-") and s["figures"]]
    if fid:
        lines += ["", "| model | input | batch | precision | bare samples/s | fabbench p50 | "
                  "fabbench mean | mean / bare | goal |", "|---|---:|---:|---|---:|---:|---:|"
                  "---:|---|"]
        for s in fid:
            f, m = s["figures"], s["figures"]["median"]
            lines.append(f"| {f['model']} | {f['input']} | {f['batch']} | {f['precision']} | "
                         f"{m['bare']:.1f} | {m['fab_p50']:.1f} | {m['fab_mean']:.1f} | "
                         f"{f['ratio_mean']:.3f} | {f['verdict']} >= {f['goal']} |")
    for s in summary["steps"]:
        ops = s["figures"].get("ops") if isinstance(s["figures"], dict) else None
        if ops:
            lines += ["", f"{s['name']}:", "", "| op | points | p50 us at smallest | "
                      "largest bytes | busbw GB/s at largest | correct |",
                      "|---|---:|---:|---:|---:|---|"]
            for op, f in ops.items():
                if f and "refused" in f:
                    lines.append(f"| {op} | refused: {f['refused']} | | | | |")
                elif f:
                    lines.append(f"| {op} | {f['points']} | {f['smallest_p50_us']:.2f} | "
                                 f"{f['largest_bytes']} | {_num(f['largest_busbw_gbyte_s'])} | "
                                 f"{f['correct']} |")
    lines += _split_markdown(summary)
    beside = summary.get("beside_nccl_tests") or []
    if beside:
        lines += ["", "fabbench beside nccl-tests: p50 us against nccl-tests' time, 1 rank, the "
                  "column torch's form matches (in place for allreduce and broadcast); ratio = "
                  "fabbench / nccl-tests:", "",
                  "| op | bytes | fabbench graph | nccl-tests -G | ratio | fabbench eager | "
                  "nccl-tests | ratio |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        eager = {(r["op"], r["bytes"]): r for r in beside if r["way"] == "eager"}
        keys = dict.fromkeys((r["op"], r["bytes"]) for r in beside)
        graph = {(r["op"], r["bytes"]): r for r in beside if r["way"] == "graph"}
        for key in keys:
            g, e = graph.get(key, {}), eager.get(key, {})
            lines.append(f"| {key[0]} | {key[1]} | {_num(g.get('fabbench_us'))} | "
                         f"{_num(g.get('nccl_tests_us'))} | {_num(g.get('ratio'))} | "
                         f"{_num(e.get('fabbench_us'))} | {_num(e.get('nccl_tests_us'))} | "
                         f"{_num(e.get('ratio'))} |")
    return "\n".join(lines) + "\n"


class OneLineParser(argparse.ArgumentParser):
    """Bad input: one line on stderr, exit 2 (argparse's own adds the usage)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="gpukit", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="a flat folder for at most 8 files")
    ap.add_argument("--device", default="cuda", help="cuda (the GPU machine) or cpu (rehearsal)")
    ap.add_argument("--scale", default="full", help="full, or tiny (the CPU rehearsal)")
    ap.add_argument("--deadline-s", type=float, default=540.0,
                    help="seconds for every step together (default 540: 9 minutes)")
    ap.add_argument("--site", help="where run.sh installed the kit (fabbench must come from it)")
    ap.add_argument("--kit", help="the kit's folder (its MANIFEST.json names the Python)")
    ap.add_argument("--only", default="", help="comma list of steps to run (install and env "
                    "always run): to measure again what a change touched")
    args = ap.parse_args(argv)
    bad = (f"--device takes cuda or cpu, not {args.device!r}"
           if args.device not in ("cuda", "cpu") else
           f"--scale takes {' or '.join(SCALES)}, not {args.scale!r}"
           if args.scale not in SCALES else
           f"--deadline-s must be between 60 and 3600, not {args.deadline_s}"
           if not 60 <= args.deadline_s <= 3600 else
           f"--out {args.out} holds files the kit did not write"
           if Path(args.out).is_dir() and set(os.listdir(args.out)) - set(OUT_FILES) else None)
    if bad:
        print(f"gpukit: error: {bad}", file=sys.stderr)
        return 2
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for stale in OUT_FILES:
        Path(args.out, stale).unlink(missing_ok=True)
    kit = Kit(args)
    # the cuda-mpi step first of the GPU's: whenever a GPU machine is lent, it runs first
    steps = [("install", kit.install), ("env", kit.environment), ("cuda-mpi", kit.cuda_mpi),
             ("cuda-mpich", kit.cuda_mpich), ("osu", kit.osu), ("doctor", kit.doctor),
             ("nccl", kit.nccl), ("nccl-tests", kit.nccl_tests),
             ("nccl-eager", kit.nccl, False), ("graph-probe", kit.graph_probe),
             ("gpudirect-on", kit.gpudirect_on),
             ("nccl-2-ranks", kit.nccl_two_ranks), ("fidelity-image", kit.fidelity, "image"),
             ("fidelity-tokens", kit.fidelity, "tokens"), ("train-image", kit.train, "image"),
             ("train-tokens", kit.train, "tokens"), ("gloo-2-ranks", kit.gloo)]
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    if only - {s[0] for s in steps}:
        print(f"gpukit: error: --only names no step {sorted(only - {s[0] for s in steps})[0]!r}"
              f" (steps: {', '.join(s[0] for s in steps)})", file=sys.stderr)
        return 2
    try:
        for name, fn, *a in steps:
            if not only or name in only or name in ("install", "env"):
                kit.do(name, fn, *a)
    finally:
        shutil.rmtree(kit.work, ignore_errors=True)
    for s in kit.steps:
        print(f"{s.name:<16} {s.status:<8} {s.seconds:>7.1f} s  {s.reason}")
    print(f"gpukit: {len(os.listdir(args.out))} files in {args.out}")
    return 0 if all(s.status in ("ok", "skipped") for s in kit.steps) else 1


if __name__ == "__main__":
    sys.exit(main())
