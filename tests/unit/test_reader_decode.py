"""A results line is parsed by orjson where it gives what Python's json gives, and by json
where it would not (results.reader._decoded): the same value for any JSON a writer or a user
may write, and json's refusal, with its message, for anything else."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import property_examples
from fabbench.errors import UsageError
from fabbench.results import reader

SCALARS = (st.none() | st.booleans() | st.text(max_size=12)
           | st.integers(min_value=-10**30, max_value=10**30)
           | st.floats(allow_nan=False, allow_infinity=False))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=6)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=6), max_leaves=40)


def _same(a, b) -> bool:
    """Equal, and of the same type everywhere (1 is not 1.0 here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


@settings(max_examples=property_examples(400), deadline=None)
@given(VALUES, st.booleans())
def test_every_value_parses_as_json_parses_it(value, spaced):
    line = json.dumps(value, separators=(", ", ": ") if spaced else (",", ":"),
                      ensure_ascii=False)
    assert _same(reader._decoded(line, line.encode())[0], json.loads(line))


@pytest.mark.parametrize("line", [
    '{"bytes":123456789012345678901234567890}',   # past 64 bits: an int, not a float
    '{"bytes":-9223372036854775809}',              # one below the least int64
    '{"x":18446744073709551616}',                  # one past the largest uint64
    '{"x":1e400}',                                 # overflows: json makes it inf
    '{"x":"\\ud800"}',                             # a lone surrogate json keeps
    '{"x":1,"x":2}',                               # the last of two keys
    '{"x":0.12345678901234567890123}',             # more digits than a double holds
    '{"x":12345678901234567890123.5}',             # a float of 23 digits before its point
    '{"x":[1.5,-12345678901234567890123]}',         # after a comma, negative
    '{"x":0.00012345678901234567,"y":1}'])          # a float's 20 digits, then an integer
def test_what_orjson_would_parse_otherwise_or_refuse_is_parsed_by_json(line):
    assert _same(reader._decoded(line, line.encode())[0], json.loads(line))


def test_a_float_with_many_digits_is_parsed_by_orjson(monkeypatch):
    """A writer's float may have 20 digits in a row (0.00012345678901234567): orjson's."""
    line = '{"x":0.00012345678901234567,"y":[1e-05,123456789012345678]}'
    monkeypatch.setattr(reader, "_DECODER", None)  # json not asked
    assert _same(reader._decoded(line, line.encode())[0], json.loads(line))


def test_bytes_that_are_not_utf8_are_read_as_json_reads_them_replaced():
    raw = b'{"kind":"run","host":"n\xff1"}\n'
    line = raw.decode(errors="replace")
    assert reader._parse("p", 1, line, raw) == (json.loads(line), False)


@pytest.mark.parametrize(("line", "finite"), [
    ('{"kind":"run","x":[1.5,2]}', True), ('{"kind":"run","x":1e400}', False)])
def test_a_line_orjson_parsed_has_only_finite_numbers(line, finite):
    """orjson refuses NaN, Infinity and a number past float's range: a record it parsed needs
    no finiteness walk (records.problem(finite=True)); one json parsed does."""
    assert reader._parse("p", 1, line, line.encode())[1] is finite


@pytest.mark.parametrize(("line", "said"), [
    ('{"kind":"run","x":NaN}', "p:3: NaN is not a number fabbench accepts"),
    ('{"kind":"run","x":-Infinity}', "p:3: -Infinity is not a number fabbench accepts"),
    ('{"kind":"run","x":[1,2,]}', "p:3: not a fabbench results file (a line is not JSON)"),
    ('{"kind":"run",}', "p:3: not a fabbench results file (a line is not JSON)"),
    ('[1]', "p:3: not a fabbench results record (no 'kind')")])
def test_a_line_refused_gets_the_message_json_gives_it(line, said):
    with pytest.raises(UsageError) as raised:
        reader._parse("p", 3, line, line.encode())
    assert str(raised.value).startswith(said)
