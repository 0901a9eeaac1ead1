"""The compiled schema check (results.compiled) gives jsonschema's verdict, and problem() the
message it always gave: records of every kind and both schema versions, valid and broken by
hypothesis in every way a line can be (a value replaced by any JSON value, a field dropped or
added, several at once), are judged by the compiled check and by jsonschema's walk of the schema,
writer's (strict) and reader's (unknown fields ignored) alike, and problem() is compared with the
implementation it had before the compiled check (reference_problem below: jsonschema only). A
kind that is a list or an object, which made problem() raise TypeError, is now refused."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fabbench.results import SCHEMA, compiled, records
from unit.test_records import examples

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _seeds() -> list[tuple[str, dict[str, Any]]]:
    """Valid records as written: one of each kind (fabbench/2), and every line of the fixture
    files (fabbench/1 runs, a fabbench/2 pairs run)."""
    out = [(SCHEMA, r.to_json()) for r in examples().values()]
    for path in sorted(FIXTURES.glob("*/*.jsonl")):
        version = None
        for line in path.read_text().splitlines():
            record = json.loads(line)
            version = record.get("schema", version) if record["kind"] == "run" else version
            out.append((version, record))
    return out


SEEDS = _seeds()

# any JSON value, and the ones at the edges of the schema's rules
EDGES = st.sampled_from([None, True, False, 0, 1, -1, 2, 1.0, 2.0, 0.5, -0.0, -1.5, 1e300, "",
                         "x", "fabbench/2", "fabbench/2\n", "run", "collective", "allreduce",
                         "float32", "tcp", [], {}, [1.0, -1.0], {"p50": 1.0}, 10**30])
SCALARS = (st.none() | st.booleans() | st.integers(-10**20, 10**20)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6) | EDGES)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])


def _paths(value: Any, where: tuple = ()) -> list[tuple]:
    """Every place in a JSON value: the keys and indexes that lead to it."""
    out = [where]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*where, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*where, i))
    return out


@st.composite
def broken(draw: st.DrawFn, non_finite: bool = False) -> tuple[str, dict[str, Any]]:
    """A seed record with 0 to 3 changes: a value replaced, a key dropped or added."""
    version, record = draw(st.sampled_from(SEEDS))
    record = copy.deepcopy(record)
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(_paths(record)[1:]))
        parent: Any = record
        for part in where[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        # a copy of what is drawn: EDGES hands out the same list and dict objects every time, and
        # a later change inside one would change EDGES itself (a dict could come to hold itself)
        if action == "replace":
            parent[where[-1]] = copy.deepcopy(draw(NON_FINITE if non_finite else JSON))
        elif action == "drop" and isinstance(parent, dict):
            del parent[where[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8) | st.sampled_from(["p42", "extra", "kind"]))] = \
                copy.deepcopy(draw(JSON))
    return version, record


def walk_valid(record: dict[str, Any], version: str, *, lenient: bool) -> bool:
    """jsonschema's verdict (a reader's ignores additionalProperties errors)."""
    errors = records.validator(version).iter_errors(record)
    return not any(e.validator != "additionalProperties" or not lenient for e in errors)


def reference_problem(record: dict[str, Any], schema: str = SCHEMA, *,
                      unknown_fields: bool = False) -> str | None:
    """records.problem as it was before the compiled check: NaN and Infinity looked for by the
    walk that names where, then jsonschema's walk alone (records._walked)."""
    with mock.patch.object(records, "_compiled", return_value=None), \
            mock.patch.object(records, "_all_finite", return_value=False):
        return records.problem(record, schema, unknown_fields=unknown_fields)


def test_every_seed_is_valid_and_the_compiled_check_says_so():
    for version, record in SEEDS:
        for lenient in (False, True):
            assert walk_valid(record, version, lenient=lenient)
            check = records._compiled(version, None, lenient)
            assert check is not None and check(record) is True


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(broken())
def test_the_compiled_verdict_is_jsonschemas(case):
    version, record = case
    for lenient in (False, True):
        verdict = records._compiled(version, None, lenient)(record)
        if verdict is not None:  # None: no kind to dispatch on, the walk decides
            assert verdict == walk_valid(record, version, lenient=lenient), (lenient, record)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(broken() | broken(non_finite=True))
def test_problem_gives_the_message_it_always_gave(case):
    version, record = case
    for lenient in (False, True):
        assert records.problem(record, version, unknown_fields=lenient) == reference_problem(
            record, version, unknown_fields=lenient)


KEYS = ("a", "b", "c")
NUMBERS = st.integers(-3, 3) | st.sampled_from([-0.5, 0.0, 1.5, 2.0])
TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
VALUES = {
    "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3,
                                              unique=True),
    "enum": st.lists(st.none() | st.sampled_from(["", "a", "1"]), min_size=1, max_size=3),
    "const": st.none() | st.sampled_from(["", "a"]),
    "minimum": NUMBERS, "maximum": NUMBERS, "exclusiveMinimum": NUMBERS,
    "exclusiveMaximum": NUMBERS, "minLength": st.integers(0, 2), "maxLength": st.integers(0, 2),
    "minItems": st.integers(0, 2), "maxItems": st.integers(0, 2),
    "pattern": st.sampled_from(["^a", "a$", "[0-9]", "^x*$"]),
    "required": st.lists(st.sampled_from(KEYS), max_size=2, unique=True)}


def _keywords(values: dict[str, st.SearchStrategy]) -> st.SearchStrategy:
    """A schema of up to two of these keywords (more make schemas nothing satisfies)."""
    one = st.one_of([st.fixed_dictionaries({k: v}) for k, v in values.items()])
    return st.lists(one, max_size=2).map(lambda parts: {k: v for p in parts for k, v in p.items()})


def _nested(inner: st.SearchStrategy) -> st.SearchStrategy:
    return _keywords({**VALUES,
                      "properties": st.dictionaries(st.sampled_from(KEYS), inner, max_size=2),
                      "additionalProperties": st.booleans() | inner, "items": inner,
                      "allOf": st.lists(inner, min_size=1, max_size=2),
                      "anyOf": st.lists(inner, min_size=1, max_size=2),
                      "oneOf": st.lists(inner, min_size=1, max_size=2), "not": inner,
                      "if": inner, "then": inner, "else": inner})


SCHEMAS = st.recursive(_keywords(VALUES), _nested, max_leaves=6)
INSTANCES = st.recursive(
    st.none() | st.booleans() | NUMBERS | st.sampled_from(["", "a", "ab", "a1", "x", "xx\n"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from((*KEYS, "d")), inner, max_size=3), max_leaves=8)


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(SCHEMAS, INSTANCES)
@example({"type": "integer"}, 2.0)  # an integer in JSON Schema, a float in Python
@example({"type": ["number", "string"]}, True)  # a bool is no number
@example({"minimum": 1}, False)  # nor compared as one
@example({"enum": [None, "1"]}, 1)
@example({"if": {"type": "string"}, "else": {"type": "null"}}, 1)  # an else without a then
@example({"then": {"type": "null"}}, 1)  # a then without an if: no effect
@example({"pattern": "a$"}, "xa\n")  # re.search: $ before a final newline
@example({"required": ["a"], "properties": {"a": {"type": "null"}}}, {"a": None})
@example({"properties": {"a": {}}, "additionalProperties": {"type": "null"}}, {"a": 1, "b": 1})
@example({"items": {"type": "number", "minimum": 0, "exclusiveMaximum": 2}}, [0, 1.5, 2])
@example({"items": {"type": "number", "minimum": 0}}, [0, True, 1.0])
@example({"items": {"type": ["number"], "maximum": 0}}, [])
def test_any_schema_of_the_compiled_keywords_judges_as_jsonschema_does(schema, instance):
    """Beyond schema.json: schemas made of every keyword compiled, nested every way."""
    errors = list(records._finite_class()(schema).iter_errors(instance))
    for lenient in (False, True):
        check = compiled.compile_check(schema, lenient=lenient)
        if check is None:
            assert lenient  # only a reader's check of an additionalProperties under anyOf...
            continue
        valid = not any(e.validator != "additionalProperties" or not lenient for e in errors)
        assert check(instance) is valid, (lenient, errors)


def test_a_value_of_no_exact_json_type_is_left_to_the_walk():
    class Number(float):
        pass
    check = compiled.compile_check({"properties": {"a": {"not": {"minimum": 0}}}})
    assert check is not None and check({"a": -1.0}) is True and check({"a": 1.0}) is False
    assert check({"a": Number(1.0)}) is None


def test_a_ref_with_siblings_applies_both():
    """2020-12 applies a $ref's sibling keywords (draft 7 ignored them)."""
    schema = {"$defs": {"count": {"type": "integer"}},
              "properties": {"n": {"$ref": "#/$defs/count", "minimum": 5}}}
    check = compiled.compile_check(schema)
    assert check is not None
    assert check({"n": 7}) is True and check({"n": 1}) is False and check({"n": 7.5}) is False


@pytest.mark.parametrize("schema", [
    {"properties": {"a": {"format": "date-time"}}},  # a keyword not compiled
    {"properties": {"a": {"enum": [1, "x"]}}},  # 1 == True in Python, not in JSON Schema
    {"$defs": {"n": {"items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"},  # recursive
    {"properties": {"a": {"$ref": "other.json#/x"}}},
    {"items": [{"type": "string"}]},
])
def test_what_is_not_compiled_is_walked(schema):
    assert compiled.compile_check(schema) is None


def test_a_reader_check_is_not_compiled_where_dropping_additional_properties_changes_it():
    """jsonschema reports an additionalProperties error under anyOf as an anyOf error: a
    reader does not ignore it, so that schema is compiled for writers only."""
    schema = {"anyOf": [{"properties": {"a": {}}, "additionalProperties": False}]}
    assert compiled.compile_check(schema, lenient=True) is None
    strict = compiled.compile_check(schema)
    assert strict is not None and strict({"a": 1}) is True and strict({"b": 1}) is False


def test_a_record_without_a_kind_is_left_to_the_walk():
    check = records._compiled(SCHEMA, None, False)
    assert check is not None and check({"run_id": "x"}) is None and check([]) is None
    assert records.problem({"run_id": "x"}) == reference_problem({"run_id": "x"})


@pytest.mark.parametrize("kind", [[], {}, ["run"]])
def test_a_kind_that_is_no_string_is_refused_in_one_line(kind):
    record = {**examples()["summary"].to_json(), "kind": kind}
    kinds = records._schema(SCHEMA)["properties"]["kind"]["enum"]
    assert records.problem(record, unknown_fields=True) == f"kind: {kind!r} is not one of {kinds}"
