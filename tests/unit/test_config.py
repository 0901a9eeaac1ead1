"""The run configuration (fabbench.config): declared once, it gives the `run` command's options,
a study cell's keys and the arguments of Slurm, Kubernetes and chart jobs; to_argv/from_argv
round-trip, and every consumer writes the same argv for the same configuration."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import REPO, fabbench, property_examples
from fabbench import catalog, config
from fabbench.cli.main import main
from fabbench.config import RunConfig, build, fields
from fabbench.errors import UsageError
from fabbench.option_fields import COUNTS, FLOAT, INT, NAMES, SWITCH, number_text
from fabbench.render import Benchmark, K8sJob, SlurmJob, render_k8s, render_slurm
from fabbench.render.chart import chart_options
from fabbench.study import spec

CHART = REPO / "charts" / "fabbench"
FABRICS = ("ethernet", "infiniband", "omnipath", "shm")

# values a field may take, beside its default; numbers within each field's own rule
NUMBERS = {
    "ranks": st.integers(1, 512), "timeout_s": st.floats(0.001, 86400),
    "ceiling_s": st.floats(0.5, 600), "budget_s": st.floats(1e-6, 1e3),
    "min_samples": st.integers(1, 5), "max_samples": st.integers(5, 10**6),
    "batch_size": st.integers(2, 4096), "image_size": st.sampled_from([32, 64, 224, 256]),
    "steps": st.integers(2, 10**4), "warmup_steps": st.integers(1, 100),
    "bucket_mb": st.floats(1e-3, 1e4), "fusion_mb": st.floats(0, 1e4),
    "cells_per_rank": st.integers(8, 10**9), "halo_iters": st.integers(1, 10**6),
    "replay_steps": st.integers(1, 10**6), "replay_warmup": st.integers(0, 10**6),
}
TEXTS = {
    "fabric": [*FABRICS, "auto"],
    "sizes": ["8:64M", "1K", "8,1M", "8:1M:4", "1K,64K,1M"],
    "out": ["r.jsonl", "results/x y.jsonl"],
    "iface": ["eth0", "ib0", "a b", "$(id)", "x'y"],
    "rdma_device": ["mlx5_0", "hfi1_0"],
    "model": ["resnet50", "gpt-tiny"],
    # a trace a rendered job's plan reads (two ranks, as the jobs' tests place them)
    "trace": [str(REPO / "tests/fixtures/replay/two-groups.json"), "/traces/a b.json"],
}


def _values(f: config.Field) -> st.SearchStrategy:
    o = f.option
    if f.name in NUMBERS:
        return NUMBERS[f.name]
    if f.name == "scaling":
        return st.lists(st.integers(1, 512), min_size=1, max_size=4, unique=True).map(tuple)
    if o.kind is NAMES:
        return st.lists(st.sampled_from(o.choices), min_size=1, max_size=3,
                        unique=True).map(tuple)
    if o.kind is SWITCH:
        return st.booleans()
    if f.name in TEXTS:
        return st.sampled_from(TEXTS[f.name])
    assert o.choices, f"no strategy for {f.path}"
    return st.sampled_from(o.choices)


@st.composite
def configs(draw, study: bool = False) -> RunConfig:
    """A valid configuration: each field its default or another value it takes. ``study``: one
    a study cell can hold (a study's workload kind, and only that kind's section set; no
    GPUs)."""
    values, kind = {}, None
    if study:
        kind = draw(st.sampled_from(spec.KINDS))
        values = {"workload": kind, "device": "cpu", "gpudirect": "auto"}
    for f in fields():
        if study and (f.section not in (None, kind) or f.path in values):
            continue
        if draw(st.booleans()):
            values[f.path] = draw(_values(f))
    try:
        return build(values)
    except UsageError:  # a rule between fields of a section (batch norm and image size, ...)
        assume(False)
        raise


@settings(max_examples=property_examples(200),
          deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(configs())
def test_argv_round_trips(c):
    argv = c.to_argv()
    assert RunConfig.from_argv(argv) == c
    assert all(isinstance(a, str) for a in argv)


@settings(max_examples=property_examples(300), deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_text_reads_back_and_is_go_notation(value):
    text = number_text(value)
    assert float(text) == value
    assert "e" not in text or ("e+" in text or "e-" in text)


def test_number_text_examples():
    assert [number_text(v) for v in (0.1, 30.0, 1e6, 262144.0, 1234567.0, 1e-5, 0.0001)] == [
        "0.1", "30", "1e+06", "262144", "1.234567e+06", "1e-05", "0.0001"]


# ---- the same argv from every consumer ----

def renderable(c: RunConfig) -> RunConfig | None:
    """``c`` as a rendered job carries it: its primitive, device and (Horovod) controller
    named, no --ranks/--out (the job places them); None when a job cannot run it."""
    primitive = c.primitive or "mpi"
    device = c.device or "cpu"
    if primitive == "nccl":
        device = "cuda"
    over = "mpi" if primitive == "horovod" else None
    try:
        r = c.replace(fabric=c.fabric if c.fabric != "auto" else "ethernet",
                      primitive=primitive, device=device, horovod_over=over, ranks=None,
                      out=None)
        Benchmark(config=r)
    except UsageError:
        return None
    return r


def slurm_args(c: RunConfig) -> list[str]:
    gpus = 4 if c.device == "cuda" else 0
    nodes = 1 if c.fabric == "shm" else 2
    return slurm_run_args(render_slurm(SlurmJob(nodes=nodes, gpus_per_node=gpus,
                                                benchmarks=(Benchmark(config=c),))))


def slurm_run_args(script: str) -> list[str]:
    """The arguments after `fabbench run` (less --out) of a one-benchmark sbatch script."""
    [line] = re.findall(r"(?:^|\s)fabbench run (.*)$", script.replace("\\\n", " "), re.M)
    words = shlex.split(line)
    return words[:words.index("--out")]


def k8s_args(c: RunConfig) -> list[str]:
    gpus = 4 if c.device == "cuda" else 0
    nodes = 1 if c.fabric == "shm" else 2
    return k8s_run_args(render_k8s(K8sJob(nodes=nodes, gpus_per_node=gpus,
                                          benchmark=Benchmark(config=c))))


def k8s_run_args(manifests: str) -> list[str]:
    """The arguments after `run` (less --out) of the one `fabbench run` in the manifests."""
    docs = list(yaml.safe_load_all(manifests))

    def lists(obj):
        if isinstance(obj, dict):
            for value in obj.values():
                yield from lists(value)
        elif isinstance(obj, list):
            if all(isinstance(v, str) for v in obj) and "run" in obj:
                yield obj
            for value in obj:
                yield from lists(value)

    [args] = list(lists(docs))
    args = [a.replace("$$", "$") for a in args]  # Kubernetes' own escape of $(VAR)
    return args[args.index("run") + 1:args.index("--out")]


def study_args(c: RunConfig, tmp: Path) -> list[str]:
    """The cell's argv of a one-cell study holding ``c``'s keys."""
    keys = {f.option.study: f.get(c) for f in fields()
            if f.get(c) != f.default and not f.option.placed}
    axes = {k: keys.pop(k) for k in ("fabric", "primitive", "gpudirect") if k in keys}
    kind = keys.pop("kind", "collectives")

    def toml(value):
        if isinstance(value, tuple):
            value = ",".join(map(str, value))
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return repr(value)
        return json.dumps(value) if isinstance(value, str) else str(value)

    lines = ['name = "one"', "[matrix]", 'workload = ["w"]',
             f'fabric = [{toml(axes.get("fabric", "ethernet"))}]',
             f'primitive = [{toml(axes.get("primitive", "mpi"))}]',
             f'gpudirect = [{toml(axes.get("gpudirect", "auto"))}]',
             # a replay cell runs on its trace's world (the fixture's two ranks)
             *(["[run]", "ranks_per_node = 2"] if kind == "replay" else []),
             "[workload.w]", f"kind = {toml(kind)}",
             *(f"{key} = {toml(value)}" for key, value in keys.items())]
    path = tmp / "one.toml"
    path.write_text("\n".join(lines) + "\n")
    [cell] = spec.load_study(str(path)).cells
    return cell.run_args()


@settings(max_examples=property_examples(80),
          deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(configs())
def test_slurm_kubernetes_and_the_config_write_the_same_argv(c):
    r = renderable(c)
    assume(r is not None)
    try:
        slurm = slurm_args(r)
    except UsageError:  # what the fabric's profile has not (a wire, GPUDirect settings)
        assume(False)
        raise
    assert slurm == k8s_args(r) == r.to_argv()


@settings(max_examples=property_examples(30), deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])
@given(configs(study=True))
def test_a_study_cell_writes_the_configuration_argv(tmp_path, c):
    r = renderable(c)
    assume(r is not None and r.device == "cpu")
    assert study_args(r, tmp_path) == r.to_argv()


# ---- `fabbench render` takes `fabbench run`'s options ----

def run_command_config(args: list[str]) -> RunConfig:
    """`fabbench run ARGS` as the CLI itself reads it: the run command's own parser, then
    config.from_parameters (not RunConfig.from_argv)."""
    from fabbench.cli.main import _command

    with _command().commands["run"].make_context("run", list(args)) as ctx:
        return config.from_parameters(ctx.params)


def rendered_run_args(target: str, options: list[str], gpus: int = 0) -> list[str]:
    """`fabbench render TARGET OPTIONS` through the real CLI: its job's `fabbench run`
    arguments, less --out."""
    code, out, err = run_main(["render", target, "--gpus-per-node", str(gpus), *options])
    assert code == 0, err
    return slurm_run_args(out) if target == "slurm" else k8s_run_args(out)


def _every_option_of(workload: str) -> RunConfig:
    """A job of ``workload`` with every option of its sections off its default, and those of
    the collectives (which pairs reads, and any job carries), and common ones a job does not
    place."""
    sections = {*catalog.parts(workload), "collectives"}
    trains = "train" in sections  # with Horovod, whose fusion threshold it takes
    values = {"fabric": "ethernet", "primitive": "horovod" if trains else "gloo",
              "horovod_over": "mpi" if trains else None, "device": "cpu", "workload": workload,
              "timeout_s": 45.0, "iface": "eth1", "ceiling": False, "ceiling_s": 3.0}
    if trains:
        values.update({"train.model": "resnet50", "train.image_size": 64,
                       "train.fusion_mb": 8.0})
    for f in fields():
        if f.section in sections and f.path not in values:
            values[f.path] = not f.default if f.option.kind is SWITCH else _examples(f)[0]
    values["collectives.min_samples"] = 3  # below --max-samples' example
    return build(values)


@pytest.mark.parametrize("target", ["slurm", "k8s"])
@pytest.mark.parametrize("workload", catalog.NAMES)
def test_render_round_trips_every_workload_through_the_run_command(target, workload):
    """`fabbench render` takes a configuration's options as `fabbench run` does; the job it
    writes runs the same configuration, as the run command itself parses the job's argv."""
    c = _every_option_of(workload)
    args = rendered_run_args(target, c.to_argv())
    assert run_command_config(args) == c
    assert args == c.to_argv()


@settings(max_examples=property_examples(40),
          deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(configs(), st.sampled_from(["slurm", "k8s"]))
def test_render_takes_any_renderable_configuration(c, target):
    r = renderable(c)
    assume(r is not None)
    try:
        slurm_args(r)
    except UsageError:  # what the fabric's profile has not (a wire, GPUDirect settings)
        assume(False)
    options = r.to_argv() + ["--nodes", "1" if r.fabric == "shm" else "2"]
    assert run_command_config(rendered_run_args(
        target, options, gpus=4 if r.device == "cuda" else 0)) == r


def test_render_measures_what_run_measures_by_default():
    """Without --budget (or any other option), a rendered job's points get `fabbench run`'s
    budget: the job's argv carries no budget, and reads back to run's default."""
    for target in ("slurm", "k8s"):
        args = rendered_run_args(target, ["--primitive", "gloo"])
        assert "--budget" not in args
        assert run_command_config(args).collectives.budget_s == \
            run_command_config([]).collectives.budget_s == RunConfig().collectives.budget_s


@pytest.mark.parametrize("options, message", [
    (["--workload", "train", "--steps", "1"], "steps must be at least 2"),
    (["--workload", "train", "--model", "nope"], "unknown model 'nope'"),
    (["--workload", "halo", "--cells-per-rank", "1"], "cells per rank"),
    (["--pair-schedule", "both"], "--pair-schedule takes auto, rounds, serial"),
    (["--extra-arg", "--min-samples=3"], "--min-samples is an option of fabbench render"),
    (["--extra-arg", "--out"], "names its results file itself"),
])
def test_render_checks_every_section_before_the_job_runs(options, message):
    for target in ("slurm", "k8s"):
        code, out, err = run_main(["render", target, *options])
        assert code == 2 and not out and err.count("\n") == 1, err
        assert message in err, err


# ---- every field, everywhere ----

def _changed(f: config.Field) -> RunConfig:
    """A renderable configuration with field ``f`` off its default."""
    base = {"fabric": "ethernet", "primitive": "mpi", "device": "cpu"}
    value = {"fabric": "infiniband", "primitive": "gloo", "horovod_over": "mpi",
             "device": "cuda", "gpudirect": "on", "workload": "train",
             "collectives.check": True, "ceiling": False, "train.image_size": 256,
             "train.fusion_mb": 8.0, "train.precision": "bf16"}.get(f.path)
    if value is None:
        value = _examples(f)[0]
    if f.path == "horovod_over":
        base["primitive"] = "horovod"
    if f.path == "train.fusion_mb":
        base.update(primitive="horovod", horovod_over="mpi")
    if f.path in ("gpudirect", "wire"):
        base.update(fabric="infiniband", device="cuda" if f.path == "gpudirect" else "cpu")
    return build({**base, f.path: value})


def _examples(f: config.Field) -> list:
    o = f.option
    if o.kind is INT:
        return [f.default + 1 if f.default else 64]
    if o.kind is FLOAT:
        return [(f.default or 1.0) * 2]
    if o.kind is COUNTS:
        return [(2, 4)]
    if o.kind is NAMES:
        return [tuple(o.choices[1:2])]
    if f.name in TEXTS:
        return [v for v in TEXTS[f.name] if v != f.default]
    return [v for v in o.choices if v != f.default]


def test_every_field_is_a_run_option_a_study_key_and_in_every_job():
    from fabbench.cli.main import _command

    run = _command().commands["run"]
    flags = {name for p in run.params for name in (*p.opts, *p.secondary_opts)}
    data = {o["flag"] for o in chart_options()}
    for f in fields():
        o = f.option
        assert o.flag in flags and (o.negative is None or o.negative in flags), f.path
        assert o.study in spec.KEYS or o.study in (*spec.AXES, "kind") or o.placed, f.path
        if o.placed:  # --ranks and --out: the job places the ranks and names the file
            continue
        c = _changed(f)
        assert o.flag in c.to_argv() or o.negative in c.to_argv(), f.path
        assert slurm_args(c) == k8s_args(c) == c.to_argv(), f.path
        assert o.flag in data, f.path


def test_the_chart_values_hold_every_field_the_chart_carries():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]
    for o in chart_options():
        if "value" in o:
            where = values[o["in"]] if o["in"] else values
            props = schema[o["in"]]["properties"] if o["in"] else schema
            assert o["value"] in where and o["value"] in props, o["flag"]


def test_run_help_groups_the_options_by_workload():
    p = fabbench("run", "--help", timeout=60)
    assert p.returncode == 0
    for panel in ("Run", "Collectives workload", "Train workload", "Halo workload",
                  "Pairs workload"):
        assert f"─ {panel} " in p.stdout


# ---- validation before anything starts ----

def run_main(argv: list[str]) -> tuple[int, str, str]:
    """`fabbench ARGV` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code, out.getvalue(), err.getvalue()


def test_out_that_holds_other_data_is_refused_before_any_rank_starts(tmp_path, monkeypatch):
    from fabbench import runner

    monkeypatch.setattr(runner, "run", lambda *a: pytest.fail("the run started"))
    text = tmp_path / "notes.txt"
    text.write_text("my notes\n")
    for path in ("/proc/version", str(text)):
        code, out, err = run_main(["run", "--fabric", "shm", "--primitive", "gloo", "--out",
                                   path])
        assert code == 2 and not out, err
        assert err == f"fabbench: error: --out {path} already holds data that is not fabbench " \
            "results; choose another --out (fabbench never overwrites a file)\n"
    assert text.read_text() == "my notes\n"
    code, _, err = run_main(["run", "--out", str(tmp_path)])
    assert code == 2 and "is a directory" in err


@pytest.mark.parametrize("argv, message", [
    (["--ops", "allreduce,frob"], "no operation 'frob'"),
    (["--scaling", "1,x"], "--scaling takes a comma list of whole numbers"),
    (["--timeout", "nan"], "--timeout takes a finite number"),
    (["--pair-schedule", "both"], "--pair-schedule takes auto, rounds, serial"),
    (["--bogus"], "no such option"),
    (["--ranks"], "--ranks needs a value"),
])
def test_from_argv_refuses_with_one_line(argv, message):
    with pytest.raises(UsageError, match=message):
        RunConfig.from_argv(argv)


@settings(max_examples=property_examples(300), deadline=None)
@given(st.lists(st.sampled_from([f.option.flag for f in fields()] + ["--no-check", "-n"])
                | st.text(string.printable, max_size=12), max_size=6))
def test_from_argv_parses_or_refuses(argv):
    try:
        c = RunConfig.from_argv(argv)
    except UsageError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert RunConfig.from_argv(c.to_argv()) == c
