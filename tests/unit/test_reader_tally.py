"""The loader's pass over a file with a columnar kind (results.reader._Tally): the file is read
in blocks and searched in place, and a block of only the kind's lines is counted, not walked.
Whatever the block size and wherever the lines fall, it gives the same lines, numbers and
per-run counts as reading the file line by line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fabbench.workloads.pairs.record  # noqa: F401  (registers pairs as a columnar kind)
from fabbench.results import reader

PREFIX = b'{"kind":"pairs",'
LINES = st.sampled_from([PREFIX + b'"a":1}', PREFIX + b'"a":22222222}', b'{"kind":"run"}',
                         b'{"kind":"summary","x":"' + b"y" * 40 + b'"}', b"", b"  ",
                         b'{"kind":"pair"}', PREFIX[:-1], b'x{"kind":"pairs",'])


def _by_line(data: bytes) -> list[tuple[int, bytes, int]]:
    """Each other line (its number, its text) and the kind's lines counted before it."""
    out, pending = [], 0
    for number, line in enumerate(data.splitlines(keepends=True), 1):
        if line.startswith(PREFIX):
            pending += 1
        else:
            out.append((number, line, pending))
    return [*out, (0, b"", pending)]


def _tallied(path: Path) -> list[tuple[int, bytes, int]]:
    tally = reader._Tally()
    tally.close_run = lambda: None  # type: ignore[method-assign]  (runs are _records' part)
    out = [(number, line, tally.pending) for number, line in tally.lines(path)]
    return [*out, (0, b"", tally.pending)]


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINES, max_size=40), block=st.integers(1, 200))
def test_the_blocks_give_what_the_lines_give(tmp_path, monkeypatch, lines, block):
    monkeypatch.setattr(reader._Tally, "BLOCK", block)
    path = tmp_path / "f.jsonl"
    data = b"".join(x + b"\n" for x in lines)
    path.write_bytes(data)
    assert _tallied(path) == _by_line(data)


@pytest.mark.parametrize("block", [1, 7, 1 << 24])
def test_a_last_line_without_its_newline_is_not_tallied(tmp_path, monkeypatch, block):
    monkeypatch.setattr(reader._Tally, "BLOCK", block)
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"kind":"run"}\n' + PREFIX + b'"a":1}\n' + PREFIX + b'"a"')
    with pytest.raises(reader._NotColumnar):
        _tallied(path)
