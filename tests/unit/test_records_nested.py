"""The typed objects inside records (results.records.Nested): a run's timing, provenance (its
NICs and RDMA ports), GPUDirect state and profile link; a ceiling's endpoints and directions.
Written through the writer they read back equal; a fabbench/1 file reads with None where its
version recorded nothing; a record read and written again gives the line it was read from; a
writer's dict where a dataclass belongs, or a key a class does not declare, is refused."""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from fabbench.errors import InvalidRecord
from fabbench.results import SCHEMA_FILES, lines, records
from fabbench.results.reader import read_results
from fabbench.results.writer import ResultWriter
from fabbench.workloads.collectives.line import header
from fabbench.workloads.replay.record import ReplayOp
from fabbench.workloads.train.record import Buckets, Net
from unit.test_records import PROVENANCE, RUN_ID, examples

FIXTURES = Path(__file__).parents[1] / "fixtures"
V1 = FIXTURES / "runs" / "siteA-ib.jsonl"      # fabbench/1
V2 = FIXTURES / "pairs" / "local-pairs.jsonl"  # fabbench/2, as a run of fabbench wrote it


def _written(tmp_path: Path, *made: records.Record) -> Path:
    path = tmp_path / "r.jsonl"
    writer = ResultWriter(path)
    for record in made:
        writer.write(record)
    writer.close()
    return path


def test_a_written_run_and_ceiling_read_back_as_equal_nested_dataclasses(tmp_path):
    made = examples()
    back = read_results(_written(tmp_path, made["run"], made["ceiling"]))
    run, ceiling = back.of_kind(records.Run)[0], back.of_kind(records.Ceiling)[0]
    for name in ("timing", "provenance", "gpudirect", "profile_link"):
        assert getattr(run, name) == getattr(made["run"], name), name
    assert type(run.provenance.nics[0]) is records.Nic and type(run.gpudirect) is records.GpuDirect
    assert run.provenance.rdma[0].rate_gbit_s == 100.0 and run.timing.budget_s == 0.1
    assert (ceiling.client, ceiling.server) == (made["ceiling"].client, made["ceiling"].server)
    assert list(ceiling.directions) == list(made["ceiling"].directions)
    assert ceiling.directions[0].from_ == "n0" and ceiling.directions[1].retransmits is None


def test_a_fabbench_1_run_reads_with_none_where_its_version_recorded_nothing():
    run = read_results(V1).of_kind(records.Run)[0]
    assert run.schema == "fabbench/1"
    assert run.timing is None and run.gpudirect is None and run.profile_link is None
    prov = run.provenance
    assert isinstance(prov, records.Provenance) and prov.host == "nodeA"
    assert prov.image is None and prov.container_version is None  # not recorded then
    assert prov.container == "apptainer" and prov.gpudirect_rdma is False
    assert prov.nics[1] == records.Nic(name="ib0", operstate="up", speed_mbit_s=100000,
                                       mtu=2044, kind="infiniband", pci=True)  # renamed on load
    assert prov.rdma[0].rate_gbit_s == 100.0 and not prov.extra and not prov.rdma[0].extra


def test_a_field_an_old_nested_object_lacks_is_none(tmp_path):
    text = V1.read_text().splitlines()
    run = json.loads(text[0])
    del run["provenance"]["os"], run["provenance"]["nics"][0]["kind"]
    path = tmp_path / "old.jsonl"
    path.write_text("\n".join([json.dumps(run), *text[1:]]) + "\n")
    prov = read_results(path).of_kind(records.Run)[0].provenance
    assert prov.os is None and prov.nics[0].kind is None and prov.nics[0].name == "eth0"


def test_a_record_read_and_written_again_is_the_line_it_was_read_from(tmp_path):
    for path in (V2, _written(tmp_path, *examples().values())):
        text = path.read_text().splitlines()
        for line, record in zip(text, read_results(path).records, strict=True):
            assert json.dumps(record.to_json(), separators=(",", ":")) == line  # bytes, order


def test_the_writer_writes_the_same_bytes_a_dict_gave_before(tmp_path):
    """The JSON of a typed run and ceiling is the JSON of the dicts they replace, key order
    included; the keys the inventory leaves out when it has nothing stay out."""
    made = examples()
    path = _written(tmp_path, made["run"], made["ceiling"])
    run, ceiling = (json.loads(line) for line in path.read_text().splitlines())
    assert run["provenance"] == PROVENANCE and list(run["provenance"]) == list(PROVENANCE)
    assert "container_version" not in run["provenance"]
    assert list(run["timing"]) == ["budget_s", "min_samples", "max_samples", "samples_target",
                                   "max_batch", "warmup_s", "patience", "protocol",
                                   "cuda_graph"]
    assert run["gpudirect"] == {"requested": "auto", "obtained": None, "verify": "report",
                                "evidence": "no network connection"}
    assert ceiling["directions"][1] == {"from": "n1", "to": "n0", "gbit_s": 0.8,
                                        "retransmits": None}
    assert ceiling["client"] == {"rank": 0, "host": "n0", "address": "198.18.0.2"}
    versioned = records.Provenance.of({**PROVENANCE, "container": "podman",
                                       "container_version": "4.3.1",
                                       "container_version_source": "/run/.containerenv engine"})
    keys = list(versioned.to_json())
    assert keys[keys.index("container"):keys.index("scheduler")] == [
        "container", "container_version", "container_version_source"]


def test_keys_a_newer_writer_added_are_kept_in_extra_and_not_written_back(tmp_path):
    made = examples()
    line = made["run"].to_json()
    line["provenance"]["nics"][0]["added_later"] = 1
    line["provenance"]["added_later"] = "x"
    path = tmp_path / "newer.jsonl"
    path.write_text(json.dumps(line) + "\n")
    run = read_results(path).of_kind(records.Run)[0]
    assert run.provenance.extra == {"added_later": "x"}
    assert run.provenance.nics[0].extra == {"added_later": 1}
    assert run.provenance == made["run"].provenance  # extra is no field
    assert run.to_json() == made["run"].to_json()


def test_a_writer_passes_the_dataclasses_and_of_refuses_what_a_class_does_not_declare():
    made = examples()
    with pytest.raises(TypeError, match=r"Run.provenance takes records.Provenance, not dict"):
        dataclasses.replace(made["run"], provenance=PROVENANCE)
    with pytest.raises(TypeError, match=r"Ceiling.directions takes a sequence of "
                                        r"records.CeilingDirection, not dict"):
        dataclasses.replace(made["ceiling"], directions=[{"from": "a", "to": "b", "gbit_s": 1}])
    with pytest.raises(InvalidRecord, match=r"records.Provenance has no field 'extra_key'"):
        records.Provenance.of({**PROVENANCE, "extra_key": 1})
    without_host = {k: v for k, v in PROVENANCE.items() if k != "host"}
    with pytest.raises(InvalidRecord, match=r"records.Provenance needs 'host'"):
        records.Provenance.of(without_host)
    bad_nic = {**PROVENANCE, "nics": [{**PROVENANCE["nics"][0], "speed_mbps": 1}]}
    with pytest.raises(InvalidRecord, match=r"records.Nic has no field 'speed_mbps'"):
        records.Provenance.of(bad_nic)
    # the schema still checks the values, through the record
    with pytest.raises(InvalidRecord, match=r"gpudirect/requested"):
        dataclasses.replace(made["run"], gpudirect=dataclasses.replace(
            made["run"].gpudirect, requested="maybe"))


def _schema(version: str) -> dict[str, Any]:
    name = SCHEMA_FILES[version]
    return json.loads(resources.files("fabbench.results").joinpath(name).read_text())


def _described(schema: dict[str, Any]) -> dict[type[records.Nested], dict[str, Any] | None]:
    """Each nested class and its object in a schema (None where the version has none)."""
    defs = schema["$defs"]
    run = defs["run"]["properties"]
    return {records.GpuDirect: run.get("gpudirect"), records.ProfileLink: run.get("profile_link"),
            records.Provenance: run["provenance"], records.Nic: defs.get("nic"),
            records.Port: defs.get("rdma_port"), records.Endpoint: defs["endpoint"],
            records.CeilingDirection: defs["ceiling"]["properties"]["directions"]["items"],
            records.Times: defs["times"], Buckets: defs["train"]["properties"]["buckets"],
            Net: defs["train"]["properties"]["net"], ReplayOp: defs.get("replay_op"),
            # the schema leaves these open: {"type": "object"}
            records.Timing: None, records.Cpu: None, records.Gpu: None, records.Versions: None,
            records.EmulatedCluster: None, records.EmulatedLink: None,
            records.ConnectionReport: None}


def _keys(cls: type[records.Nested]) -> set[str]:
    return {f.name.removesuffix("_") for f in dataclasses.fields(cls)}


def test_each_nested_class_lists_its_schema_objects_fields():
    for cls, obj in _described(_schema("fabbench/2")).items():
        if obj is None:
            continue
        listed = set(obj.get("properties", {})) | set(obj.get("required", ()))
        if obj.get("additionalProperties") is False:
            assert _keys(cls) == listed, cls.__name__
        else:  # an open object: the fields this fabbench writes, at least the schema's
            assert listed <= _keys(cls), cls.__name__


@pytest.mark.parametrize("version", list(SCHEMA_FILES))
def test_every_nested_field_a_version_lets_a_file_lack_is_optional(version):
    current = _described(_schema("fabbench/2"))
    for cls, obj in _described(_schema(version)).items():
        # a version that does not describe the object (fabbench/1's nics) is read as today's
        required = set((obj or current[cls] or {}).get("required", ()))
        for f in dataclasses.fields(cls):
            if f.name.removesuffix("_") not in required:
                assert "None" in str(f.type), f"{cls.__name__}.{f.name} may be absent ({version})"


def test_the_streamed_lines_read_the_typed_objects():
    made = examples()
    run = dataclasses.replace(made["run"], device="cuda", gpudirect=records.GpuDirect(
        requested="on", obtained="partial", verify="report", evidence="nccl's report"))
    shown = header(records.Run.read(run.to_json()))  # the written line, read
    assert "# GPUDirect RDMA: asked on, got partial (nccl's report); timing: host-clock" \
        in shown.splitlines()
    ceiling = made["ceiling"]
    assert lines.ceiling(ceiling) == lines.ceiling(records.Ceiling.read(ceiling.to_json())) == \
        "# ceiling iperf3 bidir n0 <-> n1: 0.900 + 0.800 Gbit/s"


def test_the_ceiling_tools_record_is_built_of_the_dataclasses():
    from fabbench.ceiling.measure import _one
    from fabbench.ceiling.tools import TOOLS

    fields = _one(TOOLS["iperf3"], "bidir", "10.0.0.1", None, 0, 2.0, {}, ["a", "b"], 1,
                  "eth0", "rank 1's host has no IPv4 address on interface 'eth0'")
    record = records.Ceiling(run_id=RUN_ID, **fields)
    assert record.server == records.Endpoint(rank=1, host="b", address=None)
    assert record.client.address == "10.0.0.1" and record.directions == []


def test_a_library_report_is_written_with_exactly_the_keys_its_library_gave():
    nccl = {"network": "IB", "transport": "nccl/IB", "gpudirect": None, "net_connections": 0,
            "gdr_connections": 0, "channels": None, "link_layers": [], "ofi_provider": None,
            "lines": ["NCCL INFO Using network IB"]}
    mpi = {"cuda_aware": True, "evidence": "MPIX_Query_cuda_support() = 1"}
    for report in (nccl, mpi):
        made = records.ConnectionReport.of(report)
        assert json.dumps(made.to_json()) == json.dumps(report)  # keys, order and nulls
        assert records.ConnectionReport.read(made.to_json()).to_json() == report
    assert records.ConnectionReport.of(mpi).cuda_aware is True
