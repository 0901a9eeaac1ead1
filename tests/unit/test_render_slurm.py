"""`fabbench render slurm`: exact output of a representative case, each runtime, the rendezvous,
bad input (one line, exit 2), and injection: hostile values reach the steps as plain arguments."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import cli, fabbench
from fabbench.config import RunConfig
from fabbench.errors import UsageError
from fabbench.render import Benchmark, SlurmJob, render_slurm
from fabbench.render.jinja_env import sh

OMNIPATH_MPI = """\
#!/bin/bash
# Rendered by fabbench 0.1.0 (`fabbench render slurm`). Submit with: sbatch <this file>
#SBATCH --job-name=fabbench
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --time=2:00:00
#SBATCH --partition=gpu
#SBATCH --account=proj-1
set -euo pipefail

# Each step's arguments go through launch(): FABBENCH_RENDER_DRY_RUN=1 prints them (NUL-separated,
# after the count) instead of running them, so the script's argument handling can be checked.
launch() {
  if [ -n "${FABBENCH_RENDER_DRY_RUN:-}" ]; then
    printf 'launch %d\\0' "$#"
    printf '%s\\0' "$@"
  else
    "$@"
  fi
}

# Results: one file per benchmark, <job id>-<label>.jsonl, written by rank 0.
results_dir=/scratch/fabbench
mkdir -p -- "$results_dir"
results_dir=$(cd -- "$results_dir" && pwd)
job_id=${SLURM_JOB_ID:?run this script with sbatch}

# The image every rank runs (apptainer passes the environment into the container): each
# results file names it, and the digest it was pulled by when the reference holds one.
export FABBENCH_IMAGE_REF=fabbench.sif

# --- benchmark 1 of 1: collectives (omnipath fabric, mpi) ---
# The environment of fabric profile omnipath (fabbench fabrics lists its file).
export FI_PROVIDER=psm2
export OMPI_MCA_pml=cm
export OMPI_MCA_mtl=ofi
export OMPI_MCA_mtl_ofi_provider_include=psm2
export OMPI_MCA_btl='^ofi,openib'
out="$results_dir/$job_id-collectives.jsonl"
launch srun --kill-on-bad-exit=1 --nodes=4 --ntasks-per-node=8 --mpi=pmix \\
  apptainer exec --nv --bind "$results_dir" --bind /dev/hfi1_0 fabbench.sif \\
  fabbench run --fabric omnipath --primitive mpi --device cuda --out "$out"
"""


def test_exact_output_omnipath_mpi_apptainer():
    p = fabbench("render", "slurm", "--nodes", "4", "--gpus-per-node", "8", "--fabric",
                 "omnipath", "--primitive", "mpi", "--runtime", "apptainer", "--image",
                 "fabbench.sif", "--time", "2:00:00", "--partition", "gpu", "--account",
                 "proj-1", "--results-dir", "/scratch/fabbench", timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == OMNIPATH_MPI


INFINIBAND_MPI_CHARLIECLOUD = """\
#!/bin/bash
# Rendered by fabbench 0.1.0 (`fabbench render slurm`). Submit with: sbatch <this file>
#SBATCH --job-name=fabbench
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
set -euo pipefail

# Each step's arguments go through launch(): FABBENCH_RENDER_DRY_RUN=1 prints them \
(NUL-separated,
# after the count) instead of running them, so the script's argument handling can be checked.
launch() {
  if [ -n "${FABBENCH_RENDER_DRY_RUN:-}" ]; then
    printf 'launch %d\\0' "$#"
    printf '%s\\0' "$@"
  else
    "$@"
  fi
}

# Results: one file per benchmark, <job id>-<label>.jsonl, written by rank 0.
results_dir=/scratch/fb
mkdir -p -- "$results_dir"
results_dir=$(cd -- "$results_dir" && pwd)
job_id=${SLURM_JOB_ID:?run this script with sbatch}

# The image every rank runs (charliecloud passes the environment into the container): each
# results file names it, and the digest it was pulled by when the reference holds one.
export FABBENCH_IMAGE_REF=/scratch/fabbench.sqfs

# --- benchmark 1 of 1: collectives (infiniband fabric, mpi) ---
# The environment of fabric profile infiniband (fabbench fabrics lists its file).
export UCX_TLS=rc,sm,self
export OMPI_MCA_pml=ucx
export OMPI_MCA_btl='^uct,openib,tcp'
export OMPI_MCA_osc=ucx
# Filled in by each rank at start (no --iface/--rdma-device given): UCX_NET_DEVICES
out="$results_dir/$job_id-collectives.jsonl"
# No bind for /dev/infiniband: ch-run shares the host's /dev, /proc and /sys.
launch srun --kill-on-bad-exit=1 --nodes=2 --ntasks-per-node=2 --mpi=pmix \\
  ch-run --set-env -b "$results_dir:/mnt/0" -b /scratch/data:/mnt/1 /scratch/fabbench.sqfs -- \
\\
  fabbench run --fabric infiniband --primitive mpi --device cpu --ops allreduce --sizes 8:1M \
--out "/mnt/0/${out##*/}"
"""


def test_exact_output_infiniband_mpi_charliecloud():
    """ch-run with the image's environment (--set-env), the results directory at /mnt/0 (a bind's
    destination must exist in the image), a user bind, and the fabric's device bind left to the
    /dev ch-run shares with the host (binding over it fails)."""
    p = fabbench("render", "slurm", "--nodes", "2", "--tasks-per-node", "2", "--fabric",
                 "infiniband", "--primitive", "mpi", "--runtime", "charliecloud", "--image",
                 "/scratch/fabbench.sqfs", "--bind", "/scratch/data:/mnt/1", "--results-dir",
                 "/scratch/fb", "--ops", "allreduce", "--sizes", "8:1M", timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == INFINIBAND_MPI_CHARLIECLOUD


def test_charliecloud_binds_outside_the_shared_trees_only():
    job = SlurmJob(runtime="charliecloud", image="/img", binds=("/sys/class/infiniband",
                                                                "/data", "/dev/shm:/dev/shm"),
                   benchmarks=(bench(fabric="omnipath", primitive="mpi"),))
    text = render_slurm(job)
    assert "-b /data " in text and "-b /sys" not in text and "-b /dev" not in text
    assert "# No bind for /dev/hfi1_0, /sys/class/infiniband, /dev/shm:/dev/shm" in text
    gpus = render_slurm(SlurmJob(runtime="charliecloud", image="/img", gpus_per_node=4,
                                 benchmarks=(bench(primitive="nccl", device="cuda"),)))
    assert "ch-fromhost --nvidia" in gpus


def bench(label: str = "collectives", extra_args: tuple[str, ...] = (), **fields) -> Benchmark:
    """A rendered benchmark of `fabbench run` options given as keywords (gloo on ethernet CPUs
    unless told)."""
    given = {"fabric": "ethernet", "primitive": "gloo", "device": "cpu", **fields}
    if given["primitive"] == "horovod":
        given.setdefault("horovod_over", "mpi")
    argv = [a for key, value in given.items() for a in ("--" + key.replace("_", "-"), value)]
    return Benchmark(label=label, extra_args=tuple(extra_args),
                     config=RunConfig.from_argv(argv))


def test_rendezvous_for_torch_primitives_only():
    gloo = render_slurm(SlurmJob(nodes=2, benchmarks=(bench(),)))
    assert "scontrol show hostnames" in gloo and "export MASTER_PORT=$(( port_base + 0 ))" in gloo
    assert "--mpi=pmix" not in gloo
    mpi = render_slurm(SlurmJob(nodes=2, benchmarks=(bench(primitive="mpi"),)))
    assert "MASTER_ADDR" not in mpi and "--mpi=pmix" in mpi
    hvd = render_slurm(SlurmJob(nodes=2, benchmarks=(bench(primitive="horovod"),)))
    assert "--mpi=pmix" in hvd and "--horovod-over mpi" in hvd


def test_one_srun_per_benchmark_each_with_its_own_file_and_port():
    job = SlurmJob(nodes=2, benchmarks=(bench(label="small", sizes="8,1K"),
                                        bench(label="large", sizes="1M")))
    text = render_slurm(job)
    assert text.count("launch srun") == 2
    assert '$job_id-small.jsonl"' in text and '$job_id-large.jsonl"' in text
    assert "port_base + 0" in text and "port_base + 1" in text


def test_pyxis_and_none_runtimes():
    pyxis = render_slurm(SlurmJob(runtime="pyxis", image="nvcr.io#site/fabbench:1", nodes=2,
                                  benchmarks=(bench(fabric="infiniband", primitive="mpi"),)))
    assert "--container-image='nvcr.io#site/fabbench:1'" in pyxis
    assert '--container-mounts="$results_dir:$results_dir",/dev/infiniband:/dev/infiniband' \
        in pyxis
    none = render_slurm(SlurmJob(fabbench_command="/opt/fb venv/bin/fabbench",
                                 benchmarks=(bench(),)))
    assert "apptainer" not in none and "container" not in none
    assert "'/opt/fb venv/bin/fabbench' run" in none


DIGEST = "sha256:" + "0123456789abcdef" * 4


def step_env(tmp_path, script: str) -> dict[str, str]:
    """The environment the script's srun step starts with (a stand-in srun records it; srun
    passes its environment to the ranks, and the runtime into the container)."""
    (tmp_path / "job.sbatch").write_text(script)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text('#!/bin/sh\nenv -0 > "$STEP_ENV"\n')
    (fake / "srun").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "FABBENCH_IMAGE_REF"}
    env.update(SLURM_JOB_ID="4242", STEP_ENV=str(tmp_path / "env"),
               PATH=f"{fake}:{os.environ['PATH']}")
    p = subprocess.run(["bash", str(tmp_path / "job.sbatch")], capture_output=True, env=env,
                       cwd=tmp_path, timeout=30, check=False)
    assert p.returncode == 0, p.stderr
    return dict(v.split("=", 1) for v in (tmp_path / "env").read_text().split("\0") if v)


@pytest.mark.parametrize("runtime,image", [
    ("apptainer", f"docker://registry.example/fabbench@{DIGEST}"),
    ("charliecloud", "/scratch/fabbench.sqfs"),
    ("pyxis", f"registry.example#fabbench@{DIGEST}")])
def test_every_rank_is_told_the_image_it_runs(tmp_path, runtime, image):
    """`render slurm --runtime R --image REF`: the script exports FABBENCH_IMAGE_REF=REF as
    given, so the steps' ranks (srun passes the environment; each runtime passes it into the
    container) record it, with the digest when REF names one (sysinfo.inventory)."""
    from fabbench.sysinfo.inventory import image_reference

    p = fabbench("render", "slurm", "--nodes", "2", "--fabric", "ethernet", "--primitive",
                 "mpi", "--runtime", runtime, "--image", image, timeout=60)
    assert p.returncode == 0, p.stderr
    assert f"export FABBENCH_IMAGE_REF={sh(image)}\n" in p.stdout
    env = step_env(tmp_path, p.stdout)
    assert env["FABBENCH_IMAGE_REF"] == image
    found = image_reference(runtime, env, tmp_path)
    assert found["ref"] == image and found.get("digest") == (DIGEST if "@" in image else None)


def test_no_image_no_reference(tmp_path):
    script = render_slurm(SlurmJob(benchmarks=(bench(primitive="mpi"),)))
    assert "FABBENCH_IMAGE_REF" not in script
    assert "FABBENCH_IMAGE_REF" not in step_env(tmp_path, script)


def test_fabric_env_from_profile_and_placeholders():
    deferred = render_slurm(SlurmJob(benchmarks=(bench(fabric="infiniband", primitive="mpi"),)))
    assert "export OMPI_MCA_pml=ucx" in deferred and "UCX_NET_DEVICES" not in \
        deferred.split("# Filled in")[0]
    assert "Filled in by each rank at start" in deferred
    given = render_slurm(SlurmJob(benchmarks=(bench(fabric="infiniband", primitive="mpi",
                                                    rdma_device="mlx5_2"),)))
    assert "export UCX_NET_DEVICES=mlx5_2:1" in given and "--rdma-device mlx5_2" in given


@pytest.mark.parametrize("fabric,primitive", [("infiniband", "nccl"), ("infiniband", "mpi"),
                                              ("omnipath", "mpi")])
@pytest.mark.parametrize("mode", ["on", "off"])
def test_gpudirect_exports_what_the_profile_says(fabric, primitive, mode):
    from fabbench.fabrics.profile import load_profile

    script = render_slurm(SlurmJob(gpus_per_node=4, benchmarks=(
        bench(fabric=fabric, primitive=primitive, device="cuda", gpudirect=mode),)))
    settings = load_profile(fabric).settings(primitive, "native", mode)
    for key, value in settings.gpudirect_modes[mode].env.items():
        assert f"export {key}={sh(value)}\n" in script
    assert f"--gpudirect {mode} " in script
    assert (f"GPUDirect RDMA {mode}: the profile's [primitive.{primitive}.gpudirect.{mode}]"
            in script)
    auto = render_slurm(SlurmJob(gpus_per_node=4, benchmarks=(
        bench(fabric=fabric, primitive=primitive, device="cuda"),)))
    assert "--gpudirect" not in auto and "GPUDirect" not in auto
    for key in settings.gpudirect_modes[mode].env:
        if key not in load_profile(fabric).settings(primitive).env:
            assert key not in auto


@pytest.mark.parametrize("args,message", [
    (["--name", "Bad_Name"], "DNS-1123"),
    (["--name", "a\nb"], "DNS-1123"),
    (["--runtime", "docker"], "--runtime must be one of"),
    (["--runtime", "apptainer"], "needs --image: this job's flavour is fabbench:"),
    (["--runtime", "pyxis", "--gpus-per-node", "4", "--primitive", "nccl"],
     "-cuda (a .sif, directory or registry reference of it)"),
    (["--time", "1h; rm -rf /"], "--time must be a Slurm time"),
    (["--partition", "gpu\n#SBATCH --x"], "--partition may hold only"),
    (["--fabric", "nonesuch"], "unknown fabric"),
    (["--fabric", "shm", "--nodes", "2"], "within one host only"),
    (["--primitive", "nccl"], "pass --gpus-per-node N"),
    (["--ops", "allreduce,frobnicate"], "has no operation"),
    (["--sizes", "1Q"], "bad size"),
    (["--nodes", "0"], "--nodes must be"),
    (["--gpudirect", "on"], "needs --device cuda"),
    (["--gpudirect", "sometimes", "--gpus-per-node", "1"], "--gpudirect takes"),
    (["--gpudirect", "on", "--gpus-per-node", "1", "--primitive", "nccl"], "no GPUDirect"),
    (["--gpudirect", "on", "--gpus-per-node", "1", "--fabric", "omnipath", "--primitive", "nccl"],
     "no GPUDirect for nccl"),
    (["--verify", "floors\n.toml"], "--verify takes the floors file's absolute path"),
    (["--verify", "f.toml", "--study", "quick"], "--verify judges one benchmark's results"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, message):
    # in this process (a second each as a subprocess; the real process: the test below)
    code, out, err = cli(capsys, "render", "slurm", *args)
    assert code == 2, out
    assert out == ""
    assert message in err and err.count("\n") == 1, err


def test_bad_input_is_one_line_exit_2_from_the_real_process():
    p = fabbench("render", "slurm", "--time", "1h; rm -rf /", timeout=60)
    assert p.returncode == 2 and p.stdout == "", p.stdout
    assert "--time must be a Slurm time" in p.stderr and p.stderr.count("\n") == 1, p.stderr


HOSTILE = ["$(touch {m}/dollar)", "`touch {m}/backtick`", "'; touch {m}/quote; '",
           '"; touch {m}/dquote; "', "a\ntouch {m}/newline", "--x=$HOME", "\\", "*", ""]


def test_injection_extra_args_and_paths_stay_arguments(tmp_path):
    marker = tmp_path / "m"
    marker.mkdir()
    extra = tuple(h.format(m=marker) for h in HOSTILE)
    results = tmp_path / f"res $(touch {marker}/dir) `x`"
    job = SlurmJob(nodes=2, results_dir=str(results), fabbench_command="fb$(touch x)",
                   benchmarks=(bench(extra_args=extra),))
    script = tmp_path / "job.sbatch"
    script.write_text(render_slurm(job))
    fake = tmp_path / "bin"  # scontrol for the dry run (the real one is used in integration)
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/sh\necho node1\n")
    (fake / "scontrol").chmod(0o755)
    env = {**os.environ, "FABBENCH_RENDER_DRY_RUN": "1", "SLURM_JOB_ID": "4242",
           "SLURM_JOB_NODELIST": "node1", "PATH": f"{fake}:{os.environ['PATH']}"}
    p = subprocess.run(["bash", str(script)], capture_output=True, env=env, cwd=tmp_path,
                       timeout=30, check=False)
    assert p.returncode == 0, p.stderr
    assert list(marker.iterdir()) == []  # nothing ran as shell
    assert results.is_dir()
    fields = p.stdout.decode().split("\0")
    assert fields[0] == "launch 30" or fields[0].startswith("launch ")
    argv = fields[1:1 + int(fields[0].split()[1])]
    assert argv[:4] == ["srun", "--kill-on-bad-exit=1", "--nodes=2", "--ntasks-per-node=1"]
    assert argv[4] == "fb$(touch x)"
    assert argv[-2:] == ["--out", f"{results}/4242-collectives.jsonl"]
    assert argv[-2 - len(extra):-2] == list(extra)


VERIFY_STEP = """\
launch srun --nodes=1 --ntasks=1 \\
  fabbench floors verify --floors "$results_dir/$job_id-floors.toml" \
"$results_dir/$job_id-small.jsonl" "$results_dir/$job_id-large.jsonl" || status=$?
exit "$status"
"""


def test_verify_judges_every_benchmarks_results_last(tmp_path):
    """`render slurm --verify FILE`: the floors file made absolute and copied beside the results
    at the job's start; after the benchmarks, one step of `fabbench floors verify` on every
    results file, and the script's last line exits with its code."""
    job = SlurmJob(nodes=2, verify="/site/floors.toml", benchmarks=(
        bench(label="small", sizes="8,1K"), bench(label="large", sizes="1M")))
    text = render_slurm(job)
    assert 'cp -- /site/floors.toml "$results_dir/$job_id-floors.toml"\n' in text
    assert text.index("cp -- /site/floors.toml") < text.index("launch srun")
    assert text.endswith("status=0\n" + VERIFY_STEP)
    assert text.rindex("fabbench run") < text.index("fabbench floors verify")
    p = fabbench("render", "slurm", "--verify", "floors.toml", cwd=tmp_path, timeout=60)
    assert p.returncode == 0, p.stderr
    assert f"cp -- {sh(str(tmp_path / 'floors.toml'))} " in p.stdout


def test_no_verify_no_acceptance_step():
    text = render_slurm(SlurmJob(benchmarks=(bench(),)))
    assert "verify" not in text and "floors" not in text and "status" not in text


def test_verify_runs_in_the_benchmarks_container_and_reference_floors_are_not_copied():
    text = render_slurm(SlurmJob(runtime="charliecloud", image="/img.sqfs", verify="reference",
                                 benchmarks=(bench(primitive="mpi"),)))
    assert "cp --" not in text
    assert text.endswith('  ch-run --set-env -b "$results_dir:/mnt/0" /img.sqfs -- \\\n'
                         '  fabbench floors verify --floors reference '
                         '"/mnt/0/$job_id-collectives.jsonl"'
                         ' || status=$?\nexit "$status"\n')
    with pytest.raises(UsageError, match="absolute path"):
        SlurmJob(verify="floors.toml", benchmarks=(bench(),))


@pytest.mark.parametrize("verdict", [0, 1, 2])
def test_the_job_exits_with_verifys_code(tmp_path, verdict):
    """The script run with a stand-in srun: the benchmark step, then verify's, whose exit code
    (and its FAIL lines) the job passes on; a failed benchmark step stops the job before."""
    floors = tmp_path / "floors.toml"
    floors.write_text('format = "fabbench-floors/1"\n')
    script = tmp_path / "job.sbatch"
    script.write_text(render_slurm(SlurmJob(verify=str(floors), results_dir=str(tmp_path / "r"),
                                            benchmarks=(bench(primitive="mpi"),))))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text(
        '#!/bin/sh\necho "$*" >> "$STEPS"\n'
        'case "$*" in *" verify "*) [ "$VERDICT" = 0 ] || echo "FAIL node n1: too slow"; '
        'exit "$VERDICT";; esac\nexit "$RUN_RC"\n')
    (fake / "srun").chmod(0o755)
    env = {**os.environ, "SLURM_JOB_ID": "4242", "STEPS": str(tmp_path / "steps"),
           "VERDICT": str(verdict), "RUN_RC": "0", "PATH": f"{fake}:{os.environ['PATH']}"}

    def job(**more: str) -> subprocess.CompletedProcess:
        (tmp_path / "steps").unlink(missing_ok=True)
        return subprocess.run(["bash", str(script)], capture_output=True, text=True,
                              env={**env, **more}, cwd=tmp_path, timeout=30, check=False)

    p = job()
    assert p.returncode == verdict, p.stderr
    assert ("FAIL node n1" in p.stdout) == (verdict != 0)
    steps = (tmp_path / "steps").read_text().splitlines()
    assert [" run " in s for s in steps] == [True, False] and " verify " in steps[1]
    assert (tmp_path / "r" / "4242-floors.toml").read_text() == floors.read_text()
    failed = job(RUN_RC="3")
    assert failed.returncode == 3 and len((tmp_path / "steps").read_text().splitlines()) == 1


def test_filter_refuses_non_scalars():
    with pytest.raises(UsageError):
        sh(["a"])
    assert sh("it's") == "'it'\"'\"'s'"


def test_strict_undefined():
    from fabbench.render.jinja_env import environment

    with pytest.raises(RuntimeError, match="undefined"):
        from fabbench.render.jinja_env import render
        render("slurm.sbatch.j2")
    assert environment().undefined.__name__ == "StrictUndefined"


def test_the_packages_own_example_renders(capsys):
    """render/__init__'s docstring example runs as written (it had gone stale once)."""
    import textwrap

    import fabbench.render

    example = textwrap.dedent(fabbench.render.__doc__.split("\n\n", 1)[1])
    exec(compile(example, "fabbench.render.__doc__", "exec"), {})  # noqa: S102
    assert capsys.readouterr().out.startswith("#!/bin/bash")
