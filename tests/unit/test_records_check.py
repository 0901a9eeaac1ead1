"""The fast schema check (results.fast_check: jsonschema-rs) gives jsonschema's verdict, and
problem() the message it always gave: records of every kind and both schema versions, valid and
broken by hypothesis in every way a line can be (a value replaced by any JSON value, a field
dropped or added, several at once), are judged by the fast check and by jsonschema's walk of the
schema, writer's (strict) and reader's (unknown fields ignored) alike, and problem() is compared
with jsonschema's walk alone (reference_problem below); beyond schema.json, schemas made of every
keyword the fast check trusts (a workload package's own schema may use any of them)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any
from unittest import mock

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import property_examples
from fabbench.results import SCHEMA, SUPPORTED_SCHEMAS, fast_check, records
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
    """records.problem by jsonschema's walk alone: NaN and Infinity looked for by the walk that
    names where, then records._walked (no fast check)."""
    with mock.patch.object(records, "_fast", return_value=None), \
            mock.patch.object(records, "_all_finite", return_value=False):
        return records.problem(record, schema, unknown_fields=unknown_fields)


def test_every_seed_is_valid_and_the_fast_check_says_so():
    for version, record in SEEDS:
        for lenient in (False, True):
            assert walk_valid(record, version, lenient=lenient)
            check = records._fast(version, None, lenient)
            assert check is not None and check(record) is True


def test_the_fast_check_refuses_a_broken_record_of_every_kind():
    """A wrong type, a missing field: refused by writers and readers; an unknown field: by
    writers only (fabbench/2 lists every field; fabbench/1 left most records open)."""
    for version, record in SEEDS:
        for broken_record in ({**record, "run_id": 5},
                              {k: v for k, v in record.items() if k != "kind"}):
            for lenient in (False, True):
                assert records._fast(version, None, lenient)(broken_record) is False
        extra = {**record, "p42": 1}
        assert records._fast(version, None, False)(extra) is (version != SCHEMA)
        assert records._fast(version, None, True)(extra) is True


@settings(max_examples=property_examples(600), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(broken())
def test_the_fast_verdict_is_jsonschemas(case):
    version, record = case
    for lenient in (False, True):
        verdict = records._fast(version, None, lenient)(record)
        assert verdict == walk_valid(record, version, lenient=lenient), (lenient, record)


@settings(max_examples=property_examples(400), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(broken() | broken(non_finite=True))
def test_problem_gives_the_message_it_always_gave(case):
    version, record = case
    for lenient in (False, True):
        assert records.problem(record, version, unknown_fields=lenient) == reference_problem(
            record, version, unknown_fields=lenient)


KEYS = ("a", "b", "c")
NUMBERS = st.integers(-3, 3) | st.sampled_from([-0.5, 0.0, 1.5, 2.0, True])
TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
SMALL = st.recursive(st.none() | st.booleans() | NUMBERS | st.sampled_from(["", "a", "1"]),
                     lambda inner: st.lists(inner, max_size=2)
                     | st.dictionaries(st.sampled_from(KEYS), inner, max_size=2), max_leaves=3)
COUNTS = st.integers(0, 2)
VALUES = {
    "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3,
                                              unique=True),
    "enum": st.lists(SMALL, min_size=1, max_size=3), "const": SMALL,
    "minimum": NUMBERS.filter(lambda n: n is not True), "maximum": st.integers(-3, 3),
    "exclusiveMinimum": st.sampled_from([-0.5, 0, 1.5]), "exclusiveMaximum": st.integers(-1, 2),
    "minLength": COUNTS, "maxLength": COUNTS, "minItems": COUNTS, "maxItems": COUNTS,
    "minProperties": COUNTS, "maxProperties": COUNTS, "uniqueItems": st.booleans(),
    "minContains": COUNTS, "maxContains": COUNTS,
    # patterns given to Rust (a final $ rewritten), then ones Python's re searches, where
    # Rust's regular expressions differ: \D \d \w \s . and (?i)
    "pattern": st.sampled_from(["^a", "a$", "[0-9]", "^x*$", "(a|x)$", "^[^a]+$", "a\\\\$",
                                "^(?:a1)?$", "x{2}$", "\\($", "^\\D+$", "\\d", "^\\w$",
                                "\\s", "^.$", "(?i)A$"]),
    "required": st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
    "dependentRequired": st.dictionaries(st.sampled_from(KEYS), st.lists(
        st.sampled_from(KEYS), max_size=2, unique=True), max_size=2),
    "format": st.sampled_from(["date-time", "ipv4", "regex"])}


def _keywords(values: dict[str, st.SearchStrategy]) -> st.SearchStrategy:
    """A schema of up to two of these keywords (more make schemas nothing satisfies)."""
    one = st.one_of([st.fixed_dictionaries({k: v}) for k, v in values.items()])
    return st.lists(one, max_size=2).map(lambda parts: {k: v for p in parts for k, v in p.items()})


def _nested(inner: st.SearchStrategy) -> st.SearchStrategy:
    many = st.lists(inner, min_size=1, max_size=2)
    some = st.dictionaries(st.sampled_from(KEYS), inner, max_size=2)
    return _keywords({**VALUES, "properties": some, "dependentSchemas": some,
                      "additionalProperties": st.booleans() | inner, "items": inner,
                      "prefixItems": many, "contains": inner, "propertyNames": inner,
                      "allOf": many, "anyOf": many, "oneOf": many, "not": inner,
                      "if": inner, "then": inner, "else": inner})


SCHEMAS = st.recursive(_keywords(VALUES), _nested, max_leaves=6)
STRINGS = st.sampled_from(["", "a", "ab", "a1", "x", "xx\n", "xa\n", "\u0663", "é", " ", "1",
                           "2026-01-01T00:00:00Z", "1.2.3.4", "(", "\ud800", "a\udfff", "a\\",
                           "\n", "a\r", "a\u2028", "A\n"])
INSTANCES = st.recursive(
    st.none() | st.booleans() | NUMBERS | STRINGS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from((*KEYS, "d")) | STRINGS, inner, max_size=3), max_leaves=8)


@settings(max_examples=property_examples(1500), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(SCHEMAS, INSTANCES)
@example({"type": "integer"}, 2.0)  # an integer in JSON Schema, a float in Python
@example({"type": ["number", "string"]}, True)  # a bool is no number
@example({"minimum": 1}, False)  # nor compared as one
@example({"enum": [None, "1"]}, 1)
@example({"enum": [1]}, True)
@example({"const": [1]}, [1.0])  # 1 and 1.0 are the same number
@example({"uniqueItems": True}, [1, 1.0])
@example({"uniqueItems": True}, [1, True])
@example({"if": {"type": "string"}, "else": {"type": "null"}}, 1)  # an else without a then
@example({"then": {"type": "null"}}, 1)  # a then without an if: no effect
@example({"pattern": "a$"}, "xa\n")  # re.search: $ before a final newline
@example({"pattern": "^\\D+$"}, "\u0663")  # a digit to Python, not to Rust's \d
@example({"required": ["a"], "properties": {"a": {"type": "null"}}}, {"a": None})
@example({"properties": {"a": {}}, "additionalProperties": {"type": "null"}}, {"a": 1, "b": 1})
@example({"anyOf": [{"properties": {"a": {}}, "additionalProperties": False}]}, {"b": 1})
@example({"not": {"additionalProperties": False}}, {"b": 1})
@example({"contains": {"const": 1}, "minContains": 0}, [])
@example({"format": "date-time"}, "x")  # an annotation in both
def test_any_schema_of_the_trusted_keywords_judges_as_jsonschema_does(schema, instance):
    """Beyond schema.json: schemas made of every keyword the fast check trusts, nested every
    way, writer's and reader's."""
    errors = list(records._finite_class()(schema).iter_errors(instance))
    for lenient in (False, True):
        check = fast_check.fast_check(schema, lenient=lenient)
        if check is None:
            # a number's type under not, oneOf, if or contains, or a reader's additionalProperties
            # false reached both ways (the tests of each below)
            assert fast_check.judged(schema, lenient=lenient) is None
            continue
        valid = not any(e.validator != "additionalProperties" or not lenient for e in errors)
        verdict = check(instance)
        # None: jsonschema-rs does not read a lone surrogate where it meets one first (walked)
        assert verdict is valid or (verdict is None and "\\ud" in json.dumps(instance)), (
            lenient, errors)


class Number(float):
    """A float of no exact JSON type (numpy's float64 is one)."""


class Text(str):
    pass


ODD = st.recursive(
    st.none() | NUMBERS | STRINGS | st.builds(Number, NUMBERS) | st.builds(Text, STRINGS),
    lambda inner: st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3), max_leaves=6)


@settings(max_examples=property_examples(1000), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(SCHEMAS, ODD)
@example({"not": {"items": {"type": "number"}}}, [Number(1.0)])
@example({"oneOf": [{"items": {"type": "number"}}, {}]}, [Number(1.0)])
@example({"type": "array", "minItems": 1}, (1,))  # json writes a tuple as an array
# jsonschema-rs reads a str subclass inside a list or an object as no string: unchecked
@example({"items": {"maxLength": 0}}, [Text("a")])
@example({"properties": {"k": {"enum": ["b"]}}}, {"k": Text("a")})
def test_a_value_of_no_exact_json_type_never_passes_what_the_walk_refuses(schema, instance):
    """jsonschema-rs does not read a float or str subclass (a writer's record may hold one):
    its check then answers None or False (walked), never True where the walk refuses."""
    errors = list(records._finite_class()(schema).iter_errors(instance))
    for lenient in (False, True):
        check = fast_check.fast_check(schema, lenient=lenient)
        if check is not None and check(instance):
            assert not any(e.validator != "additionalProperties" or not lenient for e in errors)


@pytest.mark.parametrize(("keyword", "trusted"), [
    ("not", False), ("oneOf", False), ("if", False), ("contains", False),
    ("anyOf", True), ("allOf", True), ("items", True), ("then", True)])
def test_a_number_type_where_a_verdict_may_turn_gets_no_fast_check(keyword, trusted):
    """jsonschema-rs counts a float subclass as no number: under not, oneOf, an if or contains
    that could pass what the walk refuses."""
    inner = {"items": {"type": "number"}}
    schema = {keyword: [inner] if keyword.endswith("Of") else inner}
    assert (fast_check.fast_check(schema, lenient=False) is not None) is trusted


def test_patterns_are_judged_as_python_does():
    """jsonschema searches with Python's re; Rust's regular expressions alone would judge
    these otherwise (an invalid record valid, or a valid one invalid)."""
    for schema, text, valid in (({"pattern": "^\\D+$"}, "\u0663", False),
                                ({"pattern": "^fabbench/[0-9]+$"}, "fabbench/2\n", True),
                                ({"pattern": "^\\w$"}, "é", True),
                                ({"pattern": "^.$"}, "\r", True)):
        assert jsonschema_rs.Draft202012Validator(schema).is_valid(text) is not valid
        check = fast_check.fast_check(schema, lenient=False)
        assert check is not None and check(text) is valid
        assert records._finite_class()(schema).is_valid(text) is valid


@pytest.mark.parametrize(("pattern", "rust"), [
    ("^fabbench/[0-9]+$", "^fabbench/[0-9]+\\n?$"), ("(a|b)$", "(a|b)\\n?$"),
    ("a\\$", "a\\$"), ("a\\\\$", "a\\\\\\n?$"), ("^[^a-z]{2,}", "^[^a-z]{2,}"),
    ("a$b", None), ("^.$", None), ("\\d", None), ("(?i)a", None), ("[a--b]", None),
    ("[]a]", None), ("(^a)", None)])
def test_a_plain_pattern_is_rusts_with_its_final_dollar_rewritten(pattern, rust):
    assert fast_check.rust_pattern(pattern) == rust


def test_one_pattern_python_alone_reads_alike_has_every_pattern_searched_by_python():
    schema = {"properties": {"a": {"pattern": "^x$"}, "b": {"pattern": "^\\w$"}}}
    made = fast_check.judged(schema, lenient=False)
    assert made == (schema, True)
    check = fast_check.fast_check(schema, lenient=False)
    assert check is not None and check({"a": "x\n", "b": "é"}) is True
    assert check({"a": "y", "b": "é"}) is False


def test_a_value_jsonschema_rs_does_not_read_is_left_to_the_walk():
    check = fast_check.fast_check({"properties": {"a": {"not": {"minimum": 0}}}}, lenient=False)
    assert check is not None and check({"a": -1.0}) is True and check({"a": 1.0}) is False
    assert check({"a": Number(1.0)}) is None
    assert check({1: 2}) is None  # a key that is not a string


def test_a_record_jsonschema_rs_does_not_read_gets_the_walks_message():
    record = examples()["collective"].to_json()
    for field, value in (("busbw_gbyte_s", Number(-1.0)), ("busbw_gbyte_s", Number(1.0)),
                         ("samples_us", [Number(1.0), -1.0]), ("samples_us", [Number(1.0)]),
                         ("transport", json.loads('"\\ud800"')), ("op", Text("allreduce"))):
        odd = {**record, field: value}
        assert records.problem(odd) == reference_problem(odd)


def test_a_tuple_is_an_array_as_json_writes_it():
    """jsonschema-rs takes a tuple for an array (json.dumps writes one): the walk does too."""
    record = examples()["collective"].to_json()
    assert records.problem({**record, "samples_us": (1.0, 2.0)}) is None
    assert records.problem({**record, "samples_us": (1.0, -2.0)}) == (
        "samples_us/1: -2.0 is less than the minimum of 0")


def test_a_ref_with_siblings_applies_both():
    """2020-12 applies a $ref's sibling keywords (draft 7 ignored them)."""
    schema = {"$defs": {"count": {"type": "integer"}},
              "properties": {"n": {"$ref": "#/$defs/count", "minimum": 5}}}
    check = fast_check.fast_check(schema, lenient=False)
    assert check is not None
    assert check({"n": 7}) is True and check({"n": 1}) is False and check({"n": 7.5}) is False


@pytest.mark.parametrize("schema", [
    {"properties": {"a": {"multipleOf": 0.1}}},  # a keyword not trusted (floats' remainders)
    {"patternProperties": {"^a": {}}},  # Rust's regular expressions on keys
    {"unevaluatedProperties": False},
    {"properties": {"a": {"$ref": "other.json#/x"}}},
    {"properties": {"a": {"$ref": "#/$defs/none"}}},
    {"properties": {"a": {"$id": "https://example.org/a", "type": "string"}}},
    {"items": [{"type": "string"}]},
])
def test_what_the_fast_check_does_not_trust_is_walked(schema):
    for lenient in (False, True):
        assert fast_check.fast_check(schema, lenient=lenient) is None


def test_a_reader_keeps_additional_properties_where_jsonschema_reports_another_keyword():
    """jsonschema reports an additionalProperties error under anyOf as an anyOf error: a reader
    does not ignore it, so its check keeps it there and drops it where it is its own."""
    schema = {"$defs": {"closed": {"properties": {"a": {}}, "additionalProperties": False}},
              "properties": {"x": {"anyOf": [{"$ref": "#/$defs/closed"}]},
                             "y": {"properties": {"a": {}}, "additionalProperties": False}}}
    reader = fast_check.fast_check(schema, lenient=True)
    assert reader is not None
    assert reader({"x": {"a": 1}, "y": {"b": 1}}) is True
    assert reader({"x": {"b": 1}}) is False
    strict = fast_check.fast_check(schema, lenient=False)
    assert strict is not None and strict({"y": {"b": 1}}) is False


def test_a_reader_gets_no_fast_check_where_one_subschema_is_reached_both_ways():
    schema = {"$defs": {"closed": {"properties": {"a": {}}, "additionalProperties": False}},
              "properties": {"x": {"anyOf": [{"$ref": "#/$defs/closed"}]},
                             "y": {"$ref": "#/$defs/closed"}}}
    assert fast_check.fast_check(schema, lenient=True) is None
    strict = fast_check.fast_check(schema, lenient=False)
    assert strict is not None and strict({"y": {"b": 1}}) is False


def test_the_reader_schema_is_made_from_the_schema_not_copied():
    """Every results schema gets a reader's check: its additionalProperties: false are all
    reported as their own."""
    for version in SUPPORTED_SCHEMAS:
        schema = records._schema(version)
        made = fast_check.judged(schema, lenient=True)
        assert made is not None and "additionalProperties" in json.dumps(schema)
        reader, python = made
        assert '"additionalProperties": false' not in json.dumps(reader)
        assert not python  # its patterns are plain: no Python call per record


def test_a_record_without_a_kind_is_walked():
    assert records.problem({"run_id": "x"}) == reference_problem({"run_id": "x"})
    assert records.problem({"run_id": "x"}) is not None


@pytest.mark.parametrize("kind", [[], {}, ["run"]])
def test_a_kind_that_is_no_string_is_refused_in_one_line(kind):
    record = {**examples()["summary"].to_json(), "kind": kind}
    kinds = records._schema(SCHEMA)["properties"]["kind"]["enum"]
    assert records.problem(record, unknown_fields=True) == f"kind: {kind!r} is not one of {kinds}"


def test_a_workload_packages_kind_gets_a_writers_and_a_readers_check(monkeypatch):
    """A package's own schema (as tests/integration/test_workload_package.py's toy declares
    it), wrapped as records._own_schema wraps it: unknown fields refused by writers only."""
    monkeypatch.setitem(records.OWN_SCHEMAS, "toy", {
        "type": "object", "additionalProperties": False, "required": ["round", "time_us"],
        "properties": {"kind": {}, "run_id": {}, "round": {"type": "integer", "minimum": 0},
                       "time_us": {"type": "number", "minimum": 0}}})
    schema = records._own_schema("toy")
    writer = fast_check.fast_check(schema, lenient=False)
    reader = fast_check.fast_check(schema, lenient=True)
    assert writer is not None and reader is not None
    record = {"kind": "toy", "run_id": "r", "round": 1, "time_us": 2.5}
    assert writer(record) is True and reader(record) is True
    assert writer({**record, "new": 1}) is False and reader({**record, "new": 1}) is True
    for broken_record in ({**record, "round": -1}, {**record, "kind": "other"},
                          {k: v for k, v in record.items() if k != "run_id"}):
        assert writer(broken_record) is False and reader(broken_record) is False
