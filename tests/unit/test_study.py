"""Studies as data: the shipped studies load, bad files are refused with file, line and key
(exit 2, nothing created), cells know their launch and why a place cannot run them, and the
headline says what the statistics say."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fabbench.cli.main import main
from fabbench.errors import UsageError
from fabbench.report.significance import Verdict
from fabbench.report.study.cells import StudyCell
from fabbench.report.study.groups import CellGroup, CellResult, headline
from fabbench.study.host import Host, Place, why_not
from fabbench.study.locate import line_of
from fabbench.study.manifest import CellEntry
from fabbench.study.spec import available_studies, load_study

GOOD = textwrap.dedent("""\
    # a small study
    name = "tiny"
    description = "two fabrics"

    [matrix]
    fabric = ["ethernet", "shm"]
    primitive = [
      "mpi",
      "nccl",
    ]
    workload = ["allreduce", "gpt"]

    [run]
    ranks_per_node = 2
    deadline = 60

    [workload.allreduce]
    kind = "collectives"
    ops = "allreduce"
    sizes = "1K:64K"

    [workload.gpt]
    kind = "train"
    model = "gpt-tiny"
    steps = 5

    [[exclude]]
    fabric = "shm"
    primitive = "nccl"

    [[override]]
    match = { workload = "gpt", fabric = "shm" }
    steps = 7
    """)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(text)
    return path


def test_shipped_studies_load():
    studies = available_studies()
    for name in ("quick", "hpec2020", "fabric-ab"):
        assert name in studies
        s = load_study(name)
        assert s.name == name and s.cells
        assert len({c.id for c in s.cells}) == len(s.cells)
    hpec = load_study("hpec2020")
    assert {c.primitive for c in hpec.cells} == {"nccl", "mpi", "gloo", "horovod"}
    assert {c.gpudirect for c in hpec.cells} == {"on", "off"}
    assert {"resnet50", "vgg16", "gpt-small"} <= {c.options.get("model") for c in hpec.cells}
    assert not [c for c in hpec.cells if c.primitive == "gloo" and c.gpudirect == "on"]
    assert {c.kind for c in hpec.cells} == {"train", "halo"}


def test_cells_of_a_good_study(tmp_path):
    s = load_study(str(_write(tmp_path, GOOD)))
    assert [c.id for c in s.cells] == [
        "allreduce-ethernet-mpi-n1", "allreduce-ethernet-nccl-n1", "allreduce-shm-mpi-n1",
        "gpt-ethernet-mpi-n1", "gpt-ethernet-nccl-n1", "gpt-shm-mpi-n1"]
    shm = s.cell("gpt-shm-mpi-n1")
    assert shm.options["steps"] == 7 and shm.ranks == 2 and shm.deadline_s == 60
    eth = s.cell("gpt-ethernet-mpi-n1")
    assert eth.options["steps"] == 5
    assert eth.run_args() == ["--fabric", "ethernet", "--primitive", "mpi", "--workload",
                              "train", "--model", "gpt-tiny", "--steps", "5"]
    nccl = s.cell("allreduce-ethernet-nccl-n1")
    assert nccl.device == "cuda" and "--device" in nccl.run_args()


@pytest.mark.parametrize("old, new, line, words", [
    ('description = "two fabrics"', 'descripton = "two fabrics"', 3, "descripton"),
    ('sizes = "1K:64K"', 'size = "1K:64K"', 20, "workload.allreduce.size"),
    ('  "nccl",', '  "ncl",', 9, "unknown primitive 'ncl'"),
    ('fabric = ["ethernet", "shm"]', 'fabric = ["ethernet", "infiniband2"]', 6,
     "unknown fabric 'infiniband2'"),
    ('model = "gpt-tiny"', 'model = "resnet5"', 24, "unknown model 'resnet5'"),
    ('workload = ["allreduce", "gpt"]', 'workload = []', 11, "matrix.workload: empty"),
    ('steps = 7', 'stepz = 7', 33, "override[0].stepz"),
    ('match = { workload = "gpt", fabric = "shm" }',
     'match = { workload = "gpt", fabrc = "shm" }', 32, "unknown axis 'fabrc'"),
    ('steps = 5', 'steps = "5"', 25, "expected int"),
    ('sizes = "1K:64K"', 'sizes = "1K:64Q"', 20, "bad size"),
    ('ops = "allreduce"', 'ops = "allreduce"\nmodel = "gpt-tiny"', 20,
     "'model' is an option of train workloads, not of a collectives workload"),
    ('deadline = 60', 'deadline = 60\nretry = "always"', 16,
     "retry: takes none or transient, not 'always'"),
])
def test_bad_study_names_file_line_and_key(tmp_path, old, new, line, words):
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(UsageError) as err:
        load_study(str(path))
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert words in message, message


def test_retry_is_the_studys_choice_and_only_the_wires_faults_are_transient(tmp_path):
    from fabbench.study.run import transient

    plain = load_study(str(_write(tmp_path, GOOD)))
    assert {c.retry for c in plain.cells} == {"none"}
    retried = load_study(str(_write(tmp_path, GOOD.replace(
        "deadline = 60", 'deadline = 60\nretry = "transient"'))))
    assert {c.retry for c in retried.cells} == {"transient"}
    assert transient("rank(s) 0 timed out in allreduce of 65536 bytes (deadline 5.0 s); "
                     "rank(s) 1 did not arrive", 1)
    assert transient("ORTE has lost communication with a remote daemon", 1)
    assert transient("mpirun: Connection reset by peer", 1)
    assert not transient("rank 0: WRONG result of allreduce: timed out in check", 1)
    assert not transient("passed the cell's deadline of 60 s; stopped", 124)
    assert not transient("--sizes: bad size", 2)
    assert not transient("the transport changed: ucx/tcp is not ucx/rc*", 1)
    assert not transient(None, 1)


def test_all_cells_excluded_is_refused(tmp_path):
    text = GOOD + '\n[[exclude]]\nfabric = ["ethernet", "shm"]\n'
    with pytest.raises(UsageError, match=r"tiny.toml:5: matrix: the matrix leaves no cells"):
        load_study(str(_write(tmp_path, text)))


def test_bad_study_exits_2_before_anything_runs(tmp_path, capsys):
    path = _write(tmp_path, GOOD.replace('model = "gpt-tiny"', 'model = "resnet5"'))
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        main(["study", "run", str(path), "--out", str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and f"{path}:24: workload.gpt.model" in err, err
    assert not out.exists()


def test_out_that_is_a_file_is_refused_in_one_line_and_left_as_it_was(tmp_path, capsys):
    out = tmp_path / "results.jsonl"
    out.write_text("a user's file\n")
    for resume in ([], ["--resume"]):
        with pytest.raises(SystemExit) as exit_:
            main(["study", "run", "quick", "--out", str(out), *resume])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert str(out) in err
    assert out.read_text() == "a user's file\n" and list(tmp_path.iterdir()) == [out]


def test_unknown_study_and_not_toml(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["study", "show", "no-such-study"])
    assert exit_.value.code == 2 and "unknown study 'no-such-study'" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(SystemExit) as exit_:
        main(["study", "show", str(bad)])
    assert exit_.value.code == 2 and "not valid TOML" in capsys.readouterr().err


def test_line_of():
    text = GOOD
    assert line_of(text, ("matrix", "primitive"), "nccl") == 9
    assert line_of(text, ("workload", "gpt", "model")) == 24
    assert line_of(text, ("override", 0, "match", "fabric")) == 32
    assert line_of(text, ("exclude", 0, "primitive")) == 29
    assert line_of(text, ("nowhere", "at", "all")) == 1
    assert line_of(text, ("workload", "gpt", "nope")) == 22  # the nearest parent


def _host(**kw) -> Host:
    base = {"gpus": False, "root": True, "mpirun": True,
            "modules": frozenset({"horovod", "mpi4py"})}
    return Host(**{**base, **kw})


def test_why_not(tmp_path):
    text = GOOD.replace('fabric = ["ethernet", "shm"]',
                        'fabric = ["ethernet", "shm", "infiniband"]')
    s = load_study(str(_write(tmp_path, text)))
    local = Place(scheduler="local", nodes=1)
    assert why_not(s.cell("allreduce-ethernet-mpi-n1"), _host(), local) is None
    assert "needs a GPU" in why_not(s.cell("allreduce-ethernet-nccl-n1"), _host(), local)
    assert why_not(s.cell("allreduce-ethernet-nccl-n1"), _host(gpus=True), local) is None
    assert "mpirun" in why_not(s.cell("allreduce-ethernet-mpi-n1"), _host(mpirun=False), local)
    ib = why_not(s.cell("allreduce-infiniband-mpi-n1"), _host(), local)
    if Path("/sys/class/infiniband").exists():
        pytest.skip("this host has RDMA devices")
    assert "needs an active InfiniBand/RoCE port" in ib


def test_why_not_nodes_and_gpudirect(tmp_path):
    text = GOOD.replace('workload = ["allreduce", "gpt"]',
                        'workload = ["allreduce", "gpt"]\nnodes = [1, 2]\ngpudirect = ["off", '
                        '"on"]')
    s = load_study(str(_write(tmp_path, text)))
    cell = s.cell("allreduce-ethernet-mpi-gdr-off-n2")
    gpu = _host(gpus=True)
    assert cell.device == "cuda" and "--gpudirect" in cell.run_args()
    assert why_not(cell, gpu, Place(scheduler="local", nodes=1)) == \
        "needs 2 nodes; this host is one node"
    assert why_not(cell, gpu, Place(scheduler="slurm", nodes=2)) is None
    assert "single-host" in why_not(s.cell("allreduce-shm-mpi-gdr-off-n2"), gpu,
                                    Place(scheduler="slurm", nodes=2))
    gdr = s.cell("allreduce-ethernet-mpi-gdr-on-n1")
    assert gdr.device == "cuda"
    assert "needs a GPU" in why_not(gdr, _host(), Place(scheduler="local", nodes=1))
    assert why_not(gdr, _host(gpus=True), Place(scheduler="local", nodes=1)) is None


def _entry(id_: str, axes: dict) -> CellEntry:
    """A manifest's entry of a cell, as much of it as the report's grouping reads."""
    return CellEntry(id=id_, axes=axes, kind="train", options={}, argv=[],
                     file=f"cells/{id_}.jsonl", log=None)


def _row(label: str, median: float, verdict: Verdict | None) -> CellResult:
    cell = StudyCell(_entry(label.replace("/", "-"), {}), [], label)
    return CellResult(cell=cell, median=median, samples=[median] * 10, verdict=verdict,
               best=verdict is None)


def test_headline_words():
    g = CellGroup("train", "resnet50", 1, [
        _row("shm/gloo", 100.0, None),
        _row("ethernet/gloo", 102.1, Verdict(1.021, 1.014, 1.029, 0.001, "slower")),
        _row("ethernet/mpi", 100.5, Verdict(1.005, 0.99, 1.02, 0.4, "same"))])
    assert headline(g) == ("resnet50: ethernet/gloo is 2.1 % slower than shm/gloo "
                           "(95 % CI 1.4–2.9 %), significant; ethernet/mpi: no significant "
                           "difference")
    same = CellGroup("halo", "halo", 2, [_row("a/mpi", 1.0, None),
                                     _row("b/mpi", 1.01, Verdict(1.01, 0.98, 1.03, 0.5, "same"))])
    assert headline(same) == "halo on 2 nodes: no significant difference between a/mpi, b/mpi"


def test_render_slurm_study(tmp_path, capsys):
    import subprocess

    with pytest.raises(SystemExit) as exit_:
        main(["render", "slurm", "--study", "quick", "--fabbench-command", "/opt/fb/bin/fabbench",
              "--results-dir", "out dir"])
    assert exit_.value.code == 0
    script = capsys.readouterr().out
    assert "#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=2\n" in script
    assert "/opt/fb/bin/fabbench study run quick --out \"$out\" \"${resume[@]}\"" in script
    assert "results_dir='out dir'" in script
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0
    with pytest.raises(SystemExit) as exit_:
        main(["render", "slurm", "--study", "hpec2020", "--nodes", "4", "--gpus-per-node", "8"])
    assert exit_.value.code == 0
    script = capsys.readouterr().out
    assert "#SBATCH --nodes=4\n" in script and "#SBATCH --gpus-per-node=8\n" in script
    site = _write(tmp_path, GOOD)
    with pytest.raises(SystemExit) as exit_:
        main(["render", "slurm", "--study", str(site)])
    assert exit_.value.code == 0 and f"study run {site.resolve()} --out" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["render", "slurm", "--study", "quick", "--runtime", "apptainer", "--image", "x.sif"])
    assert exit_.value.code == 2 and "--runtime none" in capsys.readouterr().err


def test_whatif_study_and_its_emulated_cells():
    from fabbench.study.run import command

    s = load_study("whatif-ethernet")
    links = [c.link for c in s.cells if c.kind == "train"]
    assert links == ["100mbit", "1gbit", "10gbit", "100gbit"]
    cell = s.cell("gpt-tiny-ethernet-gloo-n2-100mbit")
    argv, env = command(cell, Path("/x/c.jsonl"), Place(scheduler="local", nodes=1), 0)
    assert argv[3:13] == ["emulate", "run", "--nodes", "2", "--link", "100mbit",
                          "--ranks-per-node", "1", "--max-time", "300"]
    assert argv[13:15] == ["--", "run"] and "--ranks" not in argv and env == {}
    assert why_not(cell, _host(), Place(scheduler="local", nodes=1)) is None
    assert "need root" in why_not(cell, _host(root=False),
                                  Place(scheduler="local", nodes=1))


def _train_series(step_ms: float, compute_ms: float):
    from fabbench.results.records import Run
    from fabbench.results.runs import Series
    from fabbench.workloads.train.record import Train

    rec = Train.read({"model": "gpt-tiny", "ranks": 2, "step_ms": step_ms,
                      "compute_ms": compute_ms, "comm_ms": step_ms - compute_ms,
                      "parameters": 953856, "grad_bytes": 3815424,
                      "buckets": {"bytes": [3815424]}, "batch_per_rank": 2,
                      "samples_per_s": {"p50": 1.0, "mean": 1.0, "ci95": 0.0}})
    return Series(path=Path("x"), run=Run.read({}), others={"train": [rec]})


def test_whatif_forecast_beside_measurement():
    from fabbench.report.study.link_whatif import agreement, whatif_rows

    def row(link, step, verdict):
        cell = StudyCell(_entry(f"gpt-{link}", {"link": link}),
                          [_train_series(step, 200.0)], f"ethernet/gloo @{link}")
        return CellResult(cell=cell, median=step, samples=[step] * 10, verdict=verdict,
                   best=verdict is None)

    g = CellGroup("train", "gpt-tiny", 2, [
        row("100gbit", 201.0, None), row("10gbit", 202.0, Verdict(1.005, 0.97, 1.08, 0.4, "same")),
        row("100mbit", 510.0, Verdict(2.54, 2.4, 2.7, 1e-4, "slower"))])
    rows, notes = whatif_rows(g)
    assert [r.link for r in rows] == ["100mbit", "10gbit", "100gbit"]
    slow, fast = rows[0], rows[1]
    # 3.8 MB reduce-scattered and all-gathered between 2 nodes: 3.8 MB / 12.5 MB/s at 100 Mbit/s
    assert slow.forecast_overhead_ms == pytest.approx(3815424 / 12.5e6 * 1e3, rel=0.2)
    assert slow.forecast_matters and not fast.forecast_matters
    assert "3.82 MB of gradients" in notes[0]
    line = agreement(g, rows)
    assert line.startswith("gpt-tiny: the network matters (measured, significant) at 100mbit;")
    assert line.endswith("at 100mbit: consistent")


def test_mpijob_launcher_place_and_cells(tmp_path, monkeypatch):
    from fabbench.study.host import detect_place
    from fabbench.study.run import command

    # the chart's launcher is told the image; its mpirun passes it to the workers' ranks
    monkeypatch.setenv("FABBENCH_IMAGE_REF", "registry.example/fabbench:0.1.0-cpu")

    hostfile = tmp_path / "hostfile"
    hostfile.write_text("fb-worker-0.fb-worker.bench.svc slots=2\n"
                        "fb-worker-1.fb-worker.bench.svc slots=2\n")
    place = detect_place({"OMPI_MCA_orte_default_hostfile": str(hostfile)})
    assert place.scheduler == "mpijob" and place.nodes == 2
    assert place.master_addr == "fb-worker-0.fb-worker.bench.svc"
    s = load_study("quick")
    argv, env = command(s.cell("allreduce-ethernet-gloo-n1"), Path("/r/c.jsonl"), place, 3)
    head = ["mpirun", "--hostfile", str(hostfile), "-np", "2", "--map-by", "ppr:2:node",
            "--bind-to", "none"]
    assert argv[:len(head)] == head
    assert env["MASTER_ADDR"] == place.master_addr
    i = argv.index("MASTER_PORT")
    assert argv[i - 1] == "-x" and argv.index("run") > i
    i = argv.index("FABBENCH_IMAGE_REF")
    assert argv[i - 1] == "-x" and argv.index("run") > i
    assert env["FABBENCH_IMAGE_REF"] == "registry.example/fabbench:0.1.0-cpu"
    assert why_not(s.cell("allreduce-ethernet-gloo-n1"), _host(mpirun=False), place) == \
        "Open MPI's mpirun is not installed"
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(UsageError, match="names no host"):
        detect_place({"OMPI_MCA_orte_default_hostfile": str(empty)})


def test_a_launcher_with_its_own_rendezvous_is_skipped_in_an_allocation(tmp_path, monkeypatch):
    from fabbench.study.run import command

    monkeypatch.delenv("FABBENCH_IMAGE_REF", raising=False)

    text = GOOD.replace('  "nccl",\n]', '  "nccl",\n  "horovod",\n]') + \
        '\n[[override]]\nmatch = { primitive = "horovod" }\nhorovod_over = "gloo"\n'
    s = load_study(str(_write(tmp_path, text)))
    cell = s.cell("allreduce-ethernet-horovod-n1")
    slurm = Place(scheduler="slurm", nodes=1, job_id="7", master_addr="n1")
    assert why_not(cell, _host(), slurm) == (
        "horovod starts its ranks with horovodrun, which has its own rendezvous: slurm cannot "
        "start it")
    assert command(cell, Path("/r/c.jsonl"), slurm, 0) == ([], {})
    assert why_not(cell, _host(), Place(scheduler="local", nodes=1)) is None
    assert "horovod is not installed" in why_not(cell, _host(modules=frozenset()),
                                                 Place(scheduler="local", nodes=1))
    assert why_not(s.cell("allreduce-ethernet-mpi-n1"), _host(modules=frozenset({"horovod"})),
                   Place(scheduler="local", nodes=1)) == (
        "mpi4py is not installed (the mpi primitive's package)")
    mpi = s.cell("allreduce-ethernet-mpi-n1")
    argv, env = command(mpi, Path("/r/c.jsonl"), slurm, 3)
    assert argv[:5] == ["srun", "--kill-on-bad-exit=1", "--nodes=1", "--ntasks-per-node=2",
                        "--mpi=pmix"] and env == {}
