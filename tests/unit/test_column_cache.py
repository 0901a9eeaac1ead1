"""A large file's checked columns kept for its next read (results.column_cache): the next read
of the same file scans them instead of reading the file; a file changed in any way since (in
place, its size and modification time kept) is read again; a folder that cannot be written is
said to be one; a kept file that is not ours, or removed, is read past."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fabbench.errors import UsageError
from fabbench.results import SCHEMA, column_cache, columns, reader
from fabbench.results.runs import split_runs
from fabbench.workloads.pairs.floors import floor_figures
from fabbench.workloads.pairs.record import Pairs
from unit.test_columns import _file


@pytest.fixture(autouse=True)
def _small(monkeypatch):
    """These files are kept, whatever their size, and as soon as they are written."""
    monkeypatch.setattr(column_cache, "MIN_ROWS", 1)
    monkeypatch.setattr(column_cache, "_SETTLED_NS", 0)


def _figures(records) -> list:
    return [(f.node, dict(f.metrics), f.evidence) for f in floor_figures(records)]


def _read(path: Path, monkeypatch, *, kept: bool) -> list:
    """The floors' figures of the file's first run, read as columns; ``kept``: from the kept
    columns (DuckDB does not read the file), else from the file."""
    def refused(*args):
        raise AssertionError("read the file, not the kept columns")

    with monkeypatch.context() as m:
        if kept:
            m.setattr(columns, "load", refused)
        rows = split_runs(path)[0].of_kind("pairs")
    assert isinstance(rows, columns.ColumnRecords)
    return _figures(rows)


def _records(path: Path) -> list:
    return _figures(reader.read_results(path).of_kind("pairs"))


def test_the_next_read_scans_the_kept_columns(tmp_path, monkeypatch):
    path = _file(tmp_path, slow=3)
    first = _read(path, monkeypatch, kept=False)
    assert column_cache.where(path) == tmp_path / ".p.jsonl.fabbench-columns.parquet"
    assert column_cache.where(path).is_file()
    assert _read(path, monkeypatch, kept=True) == first == _records(path)


def test_a_file_changed_in_place_keeping_its_size_and_time_is_read_again(tmp_path, monkeypatch):
    path = _file(tmp_path, slow=3)
    before = _read(path, monkeypatch, kept=False)
    stat, text = path.stat(), path.read_bytes()
    at = text.rindex(b'"bw_gbyte_s":') + len(b'"bw_gbyte_s":')  # a pair's at the largest size
    digit = text[at:at + 1]
    changed = text[:at] + (b"9" if digit != b"9" else b"1") + text[at + 1:]
    with path.open("r+b") as f:  # in place: the same inode, the same size
        f.write(changed)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same modification time
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    after = _read(path, monkeypatch, kept=False)
    assert after == _records(path) != before


def test_a_file_changed_just_before_its_read_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(column_cache, "_SETTLED_NS", 60 * 10**9)
    path = _file(tmp_path)
    _read(path, monkeypatch, kept=False)
    assert not column_cache.where(path).exists()


def test_kept_columns_that_are_not_ours_or_removed_are_read_past(tmp_path, monkeypatch):
    path = _file(tmp_path)
    first = _read(path, monkeypatch, kept=False)
    kept = column_cache.where(path)
    kept.write_bytes(b"not parquet")
    made = reader.read_results(path, columnar=True)
    (said,) = made.warnings
    assert said.startswith(f"{path}: its kept columns {kept} could not be read (")
    assert said.endswith("); the file is read again")
    assert _read(path, monkeypatch, kept=True) == first  # written again
    kept.unlink()
    assert _read(path, monkeypatch, kept=False) == first


def test_a_folder_that_cannot_be_written(tmp_path, monkeypatch):
    """Beside the file where its folder is writable; else under FABBENCH_CACHE; else nowhere,
    and the read says so."""
    path = _file(tmp_path)
    real = os.access
    monkeypatch.setattr(column_cache.os, "access",
                        lambda p, mode: False if Path(p) == tmp_path else real(p, mode))
    cache = tmp_path / "cache"
    monkeypatch.setenv("FABBENCH_CACHE", str(cache))
    first = _read(path, monkeypatch, kept=False)
    (kept,) = (cache / "columns").iterdir()
    assert kept.name.endswith(".fabbench-columns.parquet")
    assert _read(path, monkeypatch, kept=True) == first
    monkeypatch.delenv("FABBENCH_CACHE")
    made = reader.read_results(path, columnar=True)
    assert made.warnings == [f"{path}: its checked columns are not kept for the next read "
                             "(its folder is not writable and FABBENCH_CACHE is not set)"]
    assert not (tmp_path / ".p.jsonl.fabbench-columns.parquet").exists()


def test_a_small_file_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(column_cache, "MIN_ROWS", 100_000)
    path = _file(tmp_path)
    _read(path, monkeypatch, kept=False)
    assert not column_cache.where(path).exists()


def _two_runs(tmp_path: Path) -> Path:
    """Two pairs runs in one file: a run's record and summary stand between lines of the kind."""
    first = _file(tmp_path, name="a.jsonl").read_text()
    second = _file(tmp_path, nodes=5, seed=2, name="b.jsonl").read_text()
    run_id = json.loads(first.split("\n", 1)[0])["run_id"]
    path = tmp_path / "p.jsonl"
    path.write_text(first + second.replace(f'"run_id":"{run_id}"', f'"run_id":"{run_id}-2"'))
    return path


def _runs(made: reader.ResultsFile) -> list:
    return [{kind: (rows.run_id, len(rows), _figures(rows)) for kind, rows in run.items()}
            for run in made.columns]


@pytest.mark.parametrize("block", [1 << 24, 97])  # 97 bytes: lines cross the blocks
def test_a_read_of_the_kept_columns_reads_the_file_only_at_its_other_lines(
        tmp_path, monkeypatch, block):
    """The read that keeps the columns notes where the file's other lines are; the next read
    reads those lines there (each run's record and summary) and none of the kind's."""
    monkeypatch.setattr(reader._Tally, "BLOCK", block)
    path = _two_runs(tmp_path)
    first = reader.read_results(path, columnar=True)

    def passed(self, path):
        raise AssertionError("the file was passed over")

    monkeypatch.setattr(reader._Tally, "lines", passed)
    monkeypatch.setattr(columns, "load", passed)
    again = reader.read_results(path, columnar=True)
    others = [r for r in reader.read_results(path).records if not isinstance(r, Pairs)]
    assert again.records == first.records == others
    assert len(others) == 4  # two runs, two summaries
    assert _runs(again) == _runs(first)
    assert [len(r) for r in _runs(again)] == [1, 1]


def _noted(path: Path) -> dict:
    found = dict(columns.engine().execute(
        "SELECT decode(key), decode(value) FROM parquet_kv_metadata(?)",
        [str(column_cache.where(path))]).fetchall())
    return json.loads(found["fabbench_lines"]) if "fabbench_lines" in found else {}


def test_columns_kept_without_the_other_lines_places_are_kept_again_with_them(
        tmp_path, monkeypatch):
    """Columns an older fabbench kept (no places noted) are read, and kept again with them."""
    path = _two_runs(tmp_path)
    first = _read(path, monkeypatch, kept=False)
    kept = column_cache.where(path)
    noted = _noted(path)
    # a run of 12 nodes (66 pairs, 2 sizes), then one of 5 (10 pairs): their records, summaries
    assert noted["others"] == [[1, 0, 0], [134, noted["others"][1][1], 132],
                               [135, noted["others"][2][1], 0],
                               [156, noted["others"][3][1], 20]]
    lines = path.read_bytes().splitlines(keepends=True)
    assert [o for _, o, _ in noted["others"]] == [sum(map(len, lines[:n - 1]))
                                                  for n, _, _ in noted["others"]]
    key = column_cache._key(os.stat(path), "pairs", SCHEMA)
    older = tmp_path / "older.parquet"
    columns.engine().execute(f"COPY (SELECT * FROM read_parquet('{kept}')) TO '{older}' "
                             f"(FORMAT parquet, KV_METADATA {{fabbench: {columns._sql(key)}}})")
    os.replace(older, kept)
    assert _noted(path) == {}
    assert _read(path, monkeypatch, kept=True) == first
    assert _noted(path) == noted


def test_the_kept_columns_are_in_file_order(tmp_path, monkeypatch):
    path = _two_runs(tmp_path)
    _read(path, monkeypatch, kept=False)
    kept = columns.engine().execute(
        "SELECT a, b, bytes, run_id FROM read_parquet(?, file_row_number = true) "
        "ORDER BY file_row_number", [str(column_cache.where(path))]).fetchall()
    assert kept == [(r.a, r.b, r.bytes, r.run_id)
                    for r in reader.read_results(path).of_kind("pairs")]


def test_a_file_replaced_after_its_kept_columns_were_found_is_read_the_python_way(
        tmp_path, monkeypatch):
    path = _two_runs(tmp_path)
    _read(path, monkeypatch, kept=False)
    monkeypatch.setattr(column_cache, "same", lambda stat, kept: False)
    made = reader.read_results(path, columnar=True)
    assert made.columns == []
    assert made.records == reader.read_results(path).records


@pytest.mark.parametrize("planted", ["another user's", "writable by its group"])
def test_kept_columns_another_user_could_have_planted_are_not_read(tmp_path, monkeypatch,
                                                                    planted):
    """Kept columns are read unchecked: one owned by neither the reader nor the file's owner,
    or writable by others, is said not to be read, and the file is read (and kept again)."""
    path = _file(tmp_path)
    first = _read(path, monkeypatch, kept=False)
    kept = column_cache.where(path)
    assert kept.stat().st_mode & 0o777 == 0o644
    if planted == "another user's":
        os.chown(kept, 54321, -1)
        why = "owned by uid 54321, neither you nor the owner of the file"
    else:
        kept.chmod(0o664)
        why = "writable by others"
    made = reader.read_results(path, columnar=True)
    assert made.warnings == [f"{path}: its kept columns {kept} are not read ({why}); the file "
                             "is read again"]
    assert _figures(made.columns[0]["pairs"]) == first
    assert kept.stat().st_uid == os.getuid() and kept.stat().st_mode & 0o777 == 0o644
    assert _read(path, monkeypatch, kept=True) == first


def test_keep_columns_0_neither_keeps_nor_reads_them(tmp_path, monkeypatch):
    """FABBENCH_KEEP_COLUMNS=0: a read writes nothing beside the file, and reads no kept file."""
    path = _file(tmp_path)
    monkeypatch.setenv("FABBENCH_KEEP_COLUMNS", "0")
    first = _read(path, monkeypatch, kept=False)
    assert reader.read_results(path, columnar=True).warnings == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl"]
    monkeypatch.setenv("FABBENCH_KEEP_COLUMNS", "1")
    assert _read(path, monkeypatch, kept=False) == first  # kept now
    assert column_cache.where(path).is_file()
    monkeypatch.setenv("FABBENCH_KEEP_COLUMNS", "0")
    loads = []
    real = columns.load
    monkeypatch.setattr(columns, "load", lambda *a: loads.append(a) or real(*a))
    assert _read(path, monkeypatch, kept=False) == first and len(loads) == 1  # the file read


def test_keep_columns_that_is_neither_0_nor_1_is_one_line(tmp_path, monkeypatch):
    path = _file(tmp_path)
    monkeypatch.setenv("FABBENCH_KEEP_COLUMNS", "yes")
    with pytest.raises(UsageError, match=r"FABBENCH_KEEP_COLUMNS='yes' is neither 1 .* nor 0"):
        reader.read_results(path, columnar=True)
