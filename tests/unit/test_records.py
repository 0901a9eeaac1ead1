"""The records module: every kind written through it reads back the same; a record that breaks
the schema (NaN and Infinity included) is refused before a byte is written; fabbench/1 files
are still read by report, compare and model."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from fabbench.cli.main import main
from fabbench.errors import InvalidRecord, UsageError
from fabbench.results import SCHEMA, records
from fabbench.results.reader import read_results
from fabbench.results.writer import ResultWriter
from fabbench.timing.engine import TimingPolicy
from fabbench.timing.stats import STABLE_RULE, is_stable, median_ci95_rel, summarize
from fabbench.workloads.collectives.record import Collective
from fabbench.workloads.halo.record import Halo
from fabbench.workloads.pairs.record import Pairs
from fabbench.workloads.replay.record import Replay, ReplayOp
from fabbench.workloads.train.record import Buckets, Net, Train

V1 = Path(__file__).parents[1] / "fixtures" / "runs"  # fabbench/1 files (old field names)
RUN_ID = "20260101T000000Z-abcdef"
TIMES = {"min": 9.0, "p50": 10.0, "mean": 10.1, "p99": 11.5, "max": 12.0, "stdev": 0.5}
PROVENANCE = {
    "host": "nodeA", "os": "Linux 6.1", "cpu": {"model": "x"}, "gpus": [],
    "nics": [{"name": "eth0", "operstate": "up", "speed_mbit_s": 25000, "mtu": 1500,
              "kind": "ether", "pci": True}],
    "rdma": [{"device": "mlx5_0", "port": 1, "state": "4: ACTIVE", "rate": "100 Gb/sec (4X EDR)",
              "link_layer": "InfiniBand", "driver": "mlx5_core", "active": True,
              "rate_gbit_s": 100.0}],
    "hfi": [], "gpudirect_rdma": False, "versions": {}, "build": None, "image": None,
    "container": None, "scheduler": None, "env": {}}


def _collective(nbytes: int, t_us: float) -> Collective:
    samples = [t_us * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(20)]
    rel = median_ci95_rel(samples)
    times = summarize(samples)
    algbw = nbytes / (times["p50"] * 1e-6) / 1e9
    return Collective(
        run_id=RUN_ID, op="allreduce", bytes=nbytes, count=nbytes // 4, dtype="float32",
        ranks=2, transport="tcp", iters=200, samples=20, batch=10, warmup=3, timing="batch",
        cuda_graph=False, time_us=records.Times.of(times),
        samples_us=samples, rank_samples_us=[samples, samples], algbw_gbyte_s=algbw,
        busbw_gbyte_s=algbw,
        busbw_mean_gbyte_s=algbw, correct=True, wrong=0, wrong_ranks=[],
        stable=is_stable(rel), stable_rule=STABLE_RULE, median_ci95_rel=rel)


def examples() -> dict[str, records.Record]:
    """One record of every registered kind."""
    rate = {"p50": 100.0, "mean": 99.0, "ci95": 1.5}
    return {
        "run": records.Run(
            run_id=RUN_ID, started="2026-01-01T00:00:00+00:00", argv=("fabbench", "run"),
            fabric="ethernet", wire="native", primitive="mpi", horovod_over=None, device="cpu",
            ranks=2, nodes=1, rank_hosts=("nodeA", "nodeA"), transport="tcp", interface="lo",
            expected_transport=("tcp",), picked=(),
            profile_source="builtin", profile_env={"OMPI_MCA_btl_tcp_if_include": "eth0"},
            profile_link=records.ProfileLink(hardware="ethernet", speed_from="nic",
                                             device_env=[],
                                             iface_env=["OMPI_MCA_btl_tcp_if_include"]),
            timing=records.Timing.of(vars(TimingPolicy(budget_s=0.1))), resumed=False,
            plan={"ranks": 2}, timing_method="host-clock", library_report=None,
            provenance=records.Provenance.of(PROVENANCE),
            gpudirect=records.GpuDirect(requested="auto", obtained=None, verify="report",
                                        evidence="no network connection")),
        "collective": _collective(1 << 20, 500.0),
        "train": Train(
            run_id=RUN_ID, model="resnet50", parameters=25557032,
            reference_parameters=25557032, family="image", input_size=224, batch_per_rank=32,
            global_batch=64, ranks=2, engine="ddp", primitive="gloo", horovod_over=None,
            transport="tcp", device="cpu", precision="fp32", threads_per_rank=1, steps=5,
            warmup_steps=2, samples_per_s=rate, samples_per_s_per_rank=rate, step_ms=640.0,
            step_ms_mean=641.0, compute_ms=600.0, compute_ms_mean=601.0, comm_ms=40.0,
            comm_fraction=0.0625, allreduce_ms=30.0, step_ms_samples=(640.0, 641.0),
            compute_ms_samples=(600.0, 601.0), grad_bytes=102228128,
            wire_bytes_per_rank=102228128,
            buckets=Buckets(cap_mb=25.0, count=1, bytes=[102228128], source="estimated"),
            net=Net(iface="lo", interval_s=0.1, samples=3, seconds=1.0, tx_bytes=10,
                            rx_bytes=10, tx_gbit_s=0.1, rx_gbit_s=0.1, peak_gbit_s=0.2,
                            link_gbit_s=None, utilization=None, peak_utilization=None),
            grads_identical=True, grads_finite_nonzero=True, params_identical=True,
            grads_differ_without_exchange=True, baseline_samples_per_s=None,
            scaling_efficiency=None),
        "halo": Halo(
            run_id=RUN_ID, cells_per_rank=64**3, side=64, grid=(2, 1, 1), ranks=2,
            iterations=50, dtype="float64", transport="tcp", time_us=records.Times.of(TIMES),
            exchange_us=records.Times.of(TIMES),
            samples_us=(10.0, 11.0), compute_us_p50=1.0, bytes_per_iter=65536, messages_per_iter=2,
            exchange_gbyte_s=6.5, correct=True, wrong=0),
        "ceiling": records.Ceiling(
            run_id=RUN_ID, tool="iperf3", mode="bidir", interface="fbnet0",
            client=records.Endpoint(rank=0, host="n0", address="198.18.0.2"),
            server=records.Endpoint(rank=1, host="n1", address="198.18.0.3"), seconds=2.0,
            directions=[records.CeilingDirection(from_="n0", to="n1", gbit_s=0.9, retransmits=0),
                        records.CeilingDirection(from_="n1", to="n0", gbit_s=0.8,
                                                 retransmits=None)],
            per_direction_gbit_s=0.85, error=None),
        "pairs": Pairs(
            run_id=RUN_ID, op="sendrecv", round=1, rounds=3, unit="node", units=4, a=0, b=1,
            a_rank=0, b_rank=1, a_host="n0", b_host="n1", bytes=1024, dtype="float32",
            transport="tcp", iters=100, samples=10, batch=10, warmup=3, timing="batch",
            time_us=records.Times.of(TIMES),
            samples_us=[10.0] * 10, bw_gbyte_s=0.1, correct=True),
        "replay": Replay(
            run_id=RUN_ID, trace="/traces/ddp.json", trace_sha256="0" * 64, trace_world=2,
            trace_steps=3, groups=2, mode="gaps", ranks=2, steps=10, warmup=2,
            transport="gloo/tcp", ops_per_step=6.0, bytes_per_step=1 << 20,
            step_us=records.Times.of(TIMES), compute_us=records.Times.of(TIMES),
            comm_us=records.Times.of(TIMES), exposed_us=records.Times.of(TIMES),
            exposed_share=0.25, step_samples_us=[10.0, 11.0], exposed_samples_us=[2.0, 3.0],
            recorded_step_us=10.5, recorded_comm_us=None, link_gbit_s=1.0,
            ops=[ReplayOp(op="allreduce", group=0, group_size=2, bytes=1 << 20,
                          dtype="float32", peer=None, async_op=True, ranks=2, per_step=1.0,
                          calls=10, time_us=records.Times.of(TIMES), busbw_gbyte_s=0.1,
                          recorded_us=None)]),
        "summary": records.Summary(run_id=RUN_ID, ok=True, counts={"collective": 1},
                                   wall_s=1.5, error=None),
    }


def test_a_reader_alone_knows_the_kinds_the_workload_packages_declare(tmp_path):
    """A workload's record lives in its package (halo's, pairs'): a program that imports the
    reader alone still reads them, in the contract's order, the catalog loaded on demand, and
    no communication library with it."""
    path = tmp_path / "r.jsonl"
    writer = ResultWriter(path)
    for record in examples().values():
        writer.write(record)
    writer.close()
    code = ("import sys; from fabbench.results import records, reader\n"
            "assert 'fabbench.catalog' not in sys.modules and 'halo' not in records.KINDS\n"
            f"got = reader.read_results({str(path)!r})\n"
            "print(' '.join(type(r).__module__ + ':' + r.kind for r in got.records))\n"
            "heavy = {'torch', 'mpi4py', 'horovod'} & set(sys.modules)\n"
            "assert not heavy, heavy\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    kinds = dict(reversed(item.split(":")) for item in out.stdout.split())
    assert kinds["halo"] == "fabbench.workloads.halo.record", kinds
    assert kinds["pairs"] == "fabbench.workloads.pairs.record", kinds
    assert list(kinds) == [k for k in records.kinds() if k in kinds]


def replaced(record: records.R, **changes: Any) -> records.R:
    """A record as read (unchecked, like Record.read) with some fields changed: a test's
    variation of a record read from a file of any version."""
    fields = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    return type(record).read({**fields, **changes})


def test_every_kind_has_an_example_and_the_schema_lists_the_same_fields():
    schema = json.loads(resources.files("fabbench.results").joinpath("schema.json").read_text())
    assert list(records.kinds()) == schema["properties"]["kind"]["enum"]
    assert set(examples()) == set(records.KINDS)
    for name, cls in records.kinds().items():
        declared = {f.name for f in dataclasses.fields(cls)} | {"kind"}
        assert declared == set(schema["$defs"][name]["properties"]), name


def test_a_kind_is_registered_once():
    with pytest.raises(ValueError, match="registered twice"):
        records.kind("halo")(type("Again", (records.Record,), {}))


def test_each_kind_written_through_the_writer_reads_back_the_same(tmp_path):
    path = tmp_path / "r.jsonl"
    writer = ResultWriter(path)
    written = [writer.write(r).to_json() for r in examples().values()]
    writer.close()
    back = read_results(path)
    assert [type(r) for r in back.records] == [type(r) for r in examples().values()]
    assert [r.to_json() for r in back.records] == written and not back.warnings
    assert back.of_kind(records.Run)[0].schema == SCHEMA == "fabbench/2"
    assert writer.counts == dict.fromkeys(records.KINDS, 1)
    assert back.of_kind(Collective)[0].busbw_gbyte_s > 0


def _broken(name: str) -> records.Record:
    """A record made valid, then broken in place (a list is mutable; a frozen dataclass can be
    changed by force)."""
    record = examples()["collective"]
    {"nan": lambda: object.__setattr__(record.time_us, "p50", math.nan),
     "inf": lambda: record.samples_us.__setitem__(3, math.inf),
     "negative": lambda: object.__setattr__(record.time_us, "min", -1.0),
     "unknown": lambda: object.__setattr__(record, "time_us",
                                           {**record.time_us.to_json(), "p42": 1.0})}[name]()
    return record


@pytest.mark.parametrize(("how", "message"), [
    ("nan", "time_us/p50: NaN is not a finite number"),
    ("inf", "samples_us/3: Infinity is not a finite number"),
    ("negative", "time_us/min: -1.0 is less than the minimum of 0"),
    ("unknown", "time_us: Additional properties are not allowed ('p42' was unexpected)"),
])
def test_a_record_that_breaks_the_schema_is_refused_before_writing(tmp_path, how, message):
    path = tmp_path / "r.jsonl"
    writer = ResultWriter(path)
    writer.write(examples()["run"])
    before = path.read_bytes()
    with pytest.raises(InvalidRecord, match=message.replace("(", r"\(").replace(")", r"\)")):
        writer.write(_broken(how))
    writer.close()
    assert path.read_bytes() == before and writer.counts == {"run": 1}


@pytest.mark.parametrize("field", ["busbw_gbyte_s", "algbw_gbyte_s", "median_ci95_rel"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_cannot_even_make_a_record(field, value):
    with pytest.raises(InvalidRecord, match=f"{field}: .* is not a finite number"):
        dataclasses.replace(examples()["collective"], **{field: value})


def test_the_writer_takes_typed_records_only(tmp_path):
    path = tmp_path / "r.jsonl"
    with pytest.raises(InvalidRecord, match="typed records"):
        ResultWriter(path).write(examples()["summary"].to_json())  # type: ignore[arg-type]
    assert not path.exists()


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


@pytest.mark.parametrize("token", ["Infinity", "-Infinity", "NaN"])
@pytest.mark.parametrize("field", ['"busbw_gbps":', '"p50":'])
def test_report_on_a_non_finite_number_is_one_line_naming_file_and_line(capsys, tmp_path,
                                                                         token, field):
    bad = tmp_path / "bad.jsonl"
    text = (V1 / "siteA-ib.jsonl").read_text()
    start = text.index(field, text.index('"kind":"collective"')) + len(field)
    end = min(text.index(c, start) for c in ",}")
    bad.write_text(text[:start] + token + text[end:])
    for command in ("report", "compare", "model"):
        args = {"report": [str(bad)], "compare": [str(bad), str(V1 / "siteB-ib.jsonl")],
                "model": ["--from", str(bad)]}[command]
        code, _, err = cli(capsys, command, *args)
        assert code == 2, command
        assert err.count("\n") == 1 and f"bad.jsonl:2: {token} is not a number" in err


@pytest.mark.parametrize("token", ["1e999", "-2E+400", "9" * 320 + ".5"])
def test_a_number_that_overflows_to_infinity_is_refused_naming_the_field(capsys, tmp_path,
                                                                          token):
    """The decoder refuses NaN and Infinity by name; a number past float's range reads as inf,
    which the reader's walk finds (results.reader._OVERFLOW sends such a line to it)."""
    bad = tmp_path / "bad.jsonl"
    text = (V1 / "siteA-ib.jsonl").read_text()
    start = text.index('"p50":', text.index('"kind":"collective"')) + len('"p50":')
    end = min(text.index(c, start) for c in ",}")
    bad.write_text(text[:start] + token + text[end:])
    code, _, err = cli(capsys, "report", str(bad))
    assert code == 2
    assert err.count("\n") == 1 and "bad.jsonl:2: time_us/p50: " in err
    assert "is not a finite number (NaN and Infinity are refused)" in err


def test_a_fabbench_1_file_is_read_with_the_current_names():
    results = read_results(V1 / "siteA-ib.jsonl")
    run, point = results.of_kind(records.Run)[0], results.of_kind(Collective)[0]
    assert run.schema == "fabbench/1"
    assert point.busbw_gbyte_s > 0 and point.algbw_gbyte_s > 0
    assert not point.extra  # busbw_gbps and algbw_gbps were renamed, not kept beside
    assert run.provenance.rdma[0].rate_gbit_s == 100.0
    assert run.provenance.nics[0].speed_mbit_s == 25000


def test_the_loader_returns_the_writers_typed_records_and_absent_fields_are_none():
    results = read_results(V1 / "siteA-ib.jsonl")
    run = results.of_kind(records.Run)[0]
    assert results.records[0] is run and all(
        isinstance(r, records.KINDS[k]) for k in records.KINDS for r in results.of_kind(k))
    # fabbench/1 did not record these: None, not a default made up on load
    assert run.schema == "fabbench/1" and run.plan is None and run.gpudirect is None
    assert run.wire == "native" and not run.extra  # recorded by this fabbench/1 writer
    point = results.of_kind(Collective)[0]
    assert point.busbw_gbyte_s > 0 and point.rank_samples_us is None


def test_every_field_an_older_or_the_current_schema_lets_a_file_lack_is_optional():
    from fabbench.results import RENAMED, SCHEMA_FILES
    from fabbench.results.reader import DERIVED

    for version, name in SCHEMA_FILES.items():
        schema = json.loads(resources.files("fabbench.results").joinpath(name).read_text())
        for kind, cls in records.KINDS.items():
            if kind not in schema["$defs"]:  # a later kind (replay): no file of it holds one
                continue
            renames = {old.split(".")[0]: new for old, new in
                       RENAMED.get(version, {}).get(kind, {}).items() if "." not in old}
            required = {renames.get(f, f) for f in schema["$defs"][kind].get("required", ())}
            derived = {"samples", "median_ci95_rel", "stable", "stable_rule"} \
                if kind in DERIVED.get(version, {}) else set()
            for f in dataclasses.fields(cls):
                if f.name not in required | derived | {"run_id"}:
                    assert "None" in str(f.type), f"{kind}.{f.name} may be absent ({version})"


def test_a_fabbench_1_point_is_judged_by_the_one_rule_on_load():
    from fabbench.timing.stats import STABLE_RULE, is_stable, median_ci95_rel

    points = read_results(V1 / "siteA-ib.jsonl").of_kind(Collective)
    assert points and all(p.stable_rule == STABLE_RULE for p in points)
    for p in points:
        assert p.samples == len(p.samples_us)
        assert p.median_ci95_rel == median_ci95_rel(p.samples_us)
        assert p.stable is is_stable(p.median_ci95_rel)
    raw = [line for line in (V1 / "siteA-ib.jsonl").read_text().splitlines()
           if '"collective"' in line]
    assert raw and not any('"stable' in line or "median_ci95_rel" in line for line in raw)


@pytest.mark.parametrize("written", ["fabbench/1", "fabbench/2"])
def test_report_compare_and_model_read_both_versions(capsys, tmp_path, written):
    if written == "fabbench/1":
        a, b = V1 / "siteA-ib.jsonl", V1 / "siteB-ib.jsonl"
    else:
        a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        for path, slow in ((a, 1.0), (b, 2.0)):
            writer = ResultWriter(path)
            writer.write(examples()["run"])
            for nbytes in (1 << 10, 1 << 16, 1 << 20, 1 << 24):
                writer.write(_collective(nbytes, slow * (5 + nbytes / 1e3)))
            writer.write(examples()["summary"])
            writer.close()
    code, out, _ = cli(capsys, "report", str(a), "--csv", str(tmp_path / "x.csv"))
    assert code == 0 and "busbw" in out
    header = (tmp_path / "x.csv").read_text().splitlines()[0]
    assert "busbw_gbyte_s" in header and "gbps" not in header
    code, out, _ = cli(capsys, "compare", str(a), str(b), "--json")
    assert code == 0 and json.loads(out)["rows"]
    code, out, _ = cli(capsys, "model", "--from", str(a), "--json")
    assert code == 0
    fit = json.loads(out)["fits"][0]
    assert fit["busbw_at_max_gbyte_s"] > 0


def test_an_unknown_record_in_a_file_is_bad_input(tmp_path):
    path = tmp_path / "r.jsonl"
    writer = ResultWriter(path)
    writer.write(examples()["run"])
    writer.close()
    with path.open("a") as f:
        f.write(json.dumps({"kind": "collective", "run_id": RUN_ID, "busbw_gbps": 1.0}) + "\n")
    with pytest.raises(UsageError, match=r"r.jsonl:2: "):
        read_results(path)


def test_a_reader_ignores_a_field_it_does_not_know_a_writer_refuses_it(tmp_path):
    path = tmp_path / "r.jsonl"
    writer = ResultWriter(path)
    writer.write(examples()["run"])
    writer.close()
    newer = {**examples()["summary"].to_json(), "added_later_s": 1.0}
    with path.open("a") as f:
        f.write(json.dumps(newer) + "\n")
    summary = read_results(path).records[-1]
    assert isinstance(summary, records.Summary) and summary.extra == {"added_later_s": 1.0}
    with pytest.raises(InvalidRecord, match="added_later_s"):
        records.checked(newer)


def test_a_record_has_no_mapping_access():
    """Readers use attributes: a record read or made answers no ``rec["x"]``, ``.get`` or
    ``in``, so a field an old file lacks is None, never a KeyError."""
    run = read_results(V1 / "siteA-ib.jsonl").of_kind(records.Run)[0]
    for record in (run, examples()["collective"]):
        assert not any(hasattr(record, name) for name in ("__getitem__", "get", "keys"))
        with pytest.raises(TypeError):
            record["run_id"]
        with pytest.raises(TypeError):
            assert "run_id" in record
    assert run.plan is None and run.schema == "fabbench/1"


def test_report_compare_model_and_show_read_every_kind(capsys, tmp_path):
    """The readers of results take every kind of record, and fabbench/1 files, as typed
    records."""
    from fabbench.cli.show import show_run

    path = tmp_path / "all.jsonl"
    writer = ResultWriter(path)
    for record in examples().values():
        writer.write(record)
    writer.close()
    runs = sorted(V1.glob("*.jsonl"))
    for argv in (["report", str(path), *map(str, runs), "--csv", str(tmp_path / "x.csv")],
                 ["report", str(path), "--json"],
                 ["compare", str(V1 / "siteA-ib.jsonl"), str(V1 / "siteB-ib.jsonl")],
                 ["model", "--from", str(path), "--from", str(V1 / "siteA-ib.jsonl")]):
        code, _, err = cli(capsys, *argv)
        assert code == 0, (argv, err)
    show_run(str(path))
    assert "results: " in capsys.readouterr().out


def test_a_non_finite_number_under_an_empty_key_is_named_not_a_crash():
    # hypothesis found it: the path was a string, so key '' then index 0 read as '/0'
    record = {**examples()["summary"].to_json(), "": {"": [math.nan]}}
    assert records.problem(record, unknown_fields=True) == (
        "//0: NaN is not a finite number (NaN and Infinity are refused)")
