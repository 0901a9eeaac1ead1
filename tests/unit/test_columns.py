"""The columnar reading of pairs records (fabbench.results.columns) against the Python reader:
a file with a broken pairs line gets the same one-line message whichever reads it (every check
the columns make, and every fallback), a file it flags but the schema accepts is read on, and
the slow-node verdict and the floors' figures are the same made from columns as from records."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from fabbench.errors import UsageError
from fabbench.results import columns, reader
from fabbench.results.runs import split_runs
from fabbench.workloads.pairs import slow_node
from fabbench.workloads.pairs.floors import floor_figures

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pairs" / "local-pairs.jsonl"


def _records() -> tuple[dict, list[dict], dict]:
    lines = [json.loads(x) for x in FIXTURE.read_text().splitlines() if x.strip()]
    return lines[0], [r for r in lines if r["kind"] == "pairs"], lines[-1]


def _file(tmp_path: Path, nodes: int = 12, *, slow: int | None = None, dtypes=("float32",),
          recheck=(), seed: int = 1, edit=None, name: str = "p.jsonl") -> Path:
    """A pairs run of ``nodes`` made from the fixture's real records (bandwidths spread),
    ``edit(index, record)`` applied to each pairs record's JSON text (the index: its order)."""
    run, real, summary = _records()
    rnd = random.Random(seed)
    hosts = [f"n{i:03d}" for i in range(nodes)]
    run = dict(run, ranks=nodes, nodes=nodes, rank_hosts=hosts, rank_containers=["docker"] * nodes)
    out, index = [json.dumps(run, separators=(",", ":"))], 0
    for a in range(nodes):
        for b in range(a + 1, nodes):
            for dtype in dtypes:
                for k, tmpl in enumerate(real[:2]):
                    f = (0.3 if slow in (a, b) else 1.0) * rnd.uniform(0.8, 1.2)
                    r = dict(tmpl, a=a, b=b, a_rank=a, b_rank=b, a_host=hosts[a],
                             b_host=hosts[b], unit="node", units=nodes, dtype=dtype,
                             bw_gbyte_s=tmpl["bw_gbyte_s"] * f,
                             time_us=dict(tmpl["time_us"], p50=tmpl["time_us"]["p50"] / f))
                    copies = [r, dict(r, recheck=True, bw_gbyte_s=r["bw_gbyte_s"] * 2)] \
                        if (a, b) in recheck and k == 1 else [r]
                    for c in copies:
                        text = json.dumps(c, separators=(",", ":"))
                        out.append(edit(index, text) if edit else text)
                        index += 1
    out.append(json.dumps(dict(summary, counts=dict(summary["counts"], pairs=index))))
    path = tmp_path / name
    path.write_text("\n".join(out) + "\n")
    return path


def _python_way(path: Path) -> str:
    with pytest.raises(UsageError) as raised:
        reader.read_results(path)
    return str(raised.value)


def _columns_way(path: Path) -> str:
    with pytest.raises(UsageError) as raised:
        split_runs(path)
    return str(raised.value)


# one change to the 40th pairs line (the middle of the file): each one the schema refuses
BROKEN = {
    "a number as a string": (r'"bytes":(\d+)', r'"bytes":"\1"'),
    "a string as a number": (r'"a_host":"n(\d+)"', r'"a_host":\1'),
    "a fraction where an integer is due": (r'"round":(\d+)', r'"round":\1.5'),
    "below the minimum": (r'"a":(\d+)', r'"a":-\1'),
    "an unknown dtype": (r'"dtype":"float32"', '"dtype":"int8"'),
    "an empty transport": (r'"transport":"[^"]*"', '"transport":""'),
    "a required field missing": (r'"op":"sendrecv",', ''),
    "a required field that may be null, missing": (r',"correct":null', ''),
    "an optional field null": (r'"schedule":"rounds"', '"schedule":null'),
    "a required field null": (r'"b_host":"[^"]*"', '"b_host":null'),
    "NaN": (r'"bw_gbyte_s":', '"bw_gbyte_s":NaN,"x":'),
    "Infinity in an unknown field": (r'"op"', '"zz":-Infinity,"op"'),
    "an overflowing number": (r'"time_us":\{"min":', '"time_us":{"min":1e999,"y":'),
    "a string among the samples": (r'"samples_us":\[', '"samples_us":["1",'),
    "a nested field missing": (r'"p50":', '"q50":'),
    "a nested object that is a string": (r'"time_us":\{', '"time_us":"x","t":{'),
    "not JSON": (r'"warmup":', '"warmup":,'),
    # JSON that DuckDB's reader takes and Python's refuses
    "a trailing comma": (r'\}\s*$', ',}'),
    "nan in an unknown field": (r'"op"', '"zz":nan,"op"'),
    "inf in an unknown field": (r'"op"', '"zz":-inf,"op"'),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_pairs_line_gets_the_python_readers_message(tmp_path, case):
    old, new = BROKEN[case]

    def edit(index: int, text: str) -> str:
        if index != 40:
            return text
        changed = re.sub(old, new, text, count=1)
        assert changed != text, case
        return changed

    path = _file(tmp_path, edit=edit)
    expected = _python_way(path)
    assert ":42:" in expected  # line 42: the run record, then 40 pairs lines before it
    assert _columns_way(path) == expected


def test_a_line_the_checks_flag_but_the_schema_accepts_is_read_on(tmp_path):
    """2.0 for an integer and a space after a colon: flagged by the columns' checks (a
    writer writes neither), accepted by the schema: the verdict is the records'."""
    def edit(index: int, text: str) -> str:
        if index == 7:
            return text.replace('"round":', '"round": ').replace('"units":12', '"units":12.0')
        return text

    path = _file(tmp_path, edit=edit, slow=4)
    rows = split_runs(path)[0].of_kind("pairs")
    assert isinstance(rows, columns.ColumnRecords)
    assert rows.table.text_flagged == 1
    records = reader.read_results(path).of_kind("pairs")
    assert slow_node.analyse(rows).to_json() == slow_node.analyse(records).to_json()


def _two_transports(index: int, text: str) -> str:
    return text.replace('"transport":"', '"transport":"x') if index % 7 == 0 else text


def _a_key_twice(index: int, text: str) -> str:
    """A second record of one pair, size and dtype, not marked as a recheck."""
    if index != 30:
        return text
    return text + "\n" + re.sub(r'"bw_gbyte_s":[0-9.e-]+', '"bw_gbyte_s":9.5', text)


def _a_unit_under_two_hosts(index: int, text: str) -> str:
    """One record names its unit a by another host (and rank): the unit's host is then the
    one its best record's order gives (best_pairs over the records)."""
    return text.replace('"a_host":"n', '"a_host":"m').replace('"a_rank":', '"a_rank":1') \
        if index == 12 else text


def _units_past_16_bits(index: int, text: str) -> str:
    return re.sub(r'"([ab])":(\d+),', lambda m: f'"{m[1]}":{70_000 + int(m[2])},', text)


@pytest.mark.parametrize("shape", [
    {"slow": 3}, {"slow": None}, {"slow": 0, "recheck": {(0, 1), (2, 5)}},
    {"slow": 7, "dtypes": ("float32", "float64")}, {"nodes": 3}, {"nodes": 2},
    {"slow": 5, "edit": _two_transports}, {"slow": 2, "edit": _a_key_twice},
    {"slow": 4, "edit": _units_past_16_bits}, {"slow": 6, "edit": _a_unit_under_two_hosts}])
def test_the_verdict_and_the_floors_figures_from_columns_are_the_records(tmp_path, shape):
    path = _file(tmp_path, **shape)
    rows = split_runs(path)[0].of_kind("pairs")
    assert isinstance(rows, columns.ColumnRecords)
    records = reader.read_results(path).of_kind("pairs")
    assert len(rows) == len(records)
    made, expected = slow_node.analyse(rows), slow_node.analyse(records)
    assert made is not None and expected is not None
    assert made.to_json() == expected.to_json()
    assert slow_node.table(made) == slow_node.table(expected)
    for got, want in zip(floor_figures(rows), floor_figures(records), strict=True):
        assert (got.node, got.metrics, got.evidence, got.transport, got.dtype) == \
            (want.node, want.metrics, want.evidence, want.transport, want.dtype)
        assert dict(got.peers) == dict(want.peers)
    if shape.get("slow") is not None and shape.get("nodes", 12) > 2 and not shape.get("recheck") \
            and "edit" not in shape:
        assert [n.unit for n in made.slow] == [shape["slow"]]


def test_a_record_under_another_runs_id_is_read_by_its_position(tmp_path):
    """A pairs line whose run_id is not its run's: the Python way (by position) reads it."""
    path = _file(tmp_path, edit=lambda i, t: t.replace('"run_id":"', '"run_id":"x', 1)
                 if i == 3 else t)
    assert reader.read_results(path, columnar=True).columns == []
    assert len(split_runs(path)[0].of_kind("pairs")) == len(
        reader.read_results(path).of_kind("pairs"))


def _tables() -> set[str]:
    return {r[0] for r in columns.engine().execute(
        "SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()}


@pytest.mark.parametrize("after", ["an older run", "a broken line", "a truncated last line"])
def test_a_file_the_columns_do_not_take_stops_their_read_and_leaves_no_table(tmp_path, after):
    """DuckDB's read starts at the file's first pairs line, beside the loader's pass; a file
    the pass then finds the columns cannot take (a later run of an older schema, a broken line
    of another kind, a last line without its newline) stops it, and nothing of it is left."""
    first = _file(tmp_path, name="a.jsonl").read_text()
    tail = {"an older run": first.replace('"schema":"fabbench/2"', '"schema":"fabbench/1"', 1),
            "a broken line": '{"kind":"summary",\n',
            "a truncated last line": first.splitlines(keepends=True)[1][:-20]}[after]
    path = tmp_path / "b.jsonl"
    path.write_text(first + tail)
    before = _tables()
    try:
        got = split_runs(path)
    except UsageError as exc:
        assert str(exc) == _python_way(path)
    else:
        assert all(not isinstance(r.of_kind("pairs"), columns.ColumnRecords) for r in got)
    assert _tables() == before


@pytest.mark.parametrize(("text", "expected"), [
    ("1536Mi", 1536 << 20), ("2Gi", 2 << 30), ("1000000", 1_000_000), ("1G", 10**9),
    ("", None), ("0", None)])
def test_the_memory_limit_is_a_byte_count_or_a_quantity(text, expected):
    assert columns.memory_limit(text) == expected


def test_a_memory_limit_that_is_no_size_is_one_line():
    with pytest.raises(UsageError, match="FABBENCH_MEMORY_LIMIT='lots' is not a memory size"):
        columns.memory_limit("lots")
