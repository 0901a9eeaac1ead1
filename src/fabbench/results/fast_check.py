"""The fast verdict on a record: jsonschema-rs (a maintained validator, in Rust) says whether a
record satisfies a JSON schema (Draft 2020-12); records.problem walks a record it refuses with
jsonschema, whose best-matching error is the one-line message, so the walk stays the authority.

Its verdict is the walk's, compared on records of every kind broken in generated ways and on
generated schemas of every keyword of TRUSTED (tests/unit/test_records_check.py), where these
differences between the two libraries are closed here:

- ``pattern``: Rust's regular expressions are not Python's (``$`` before a final newline,
  ``\\d``, ``\\w``, ``.``, flags). A pattern of plain parts (see _PLAIN) is given to Rust with
  a final ``$`` written ``\\n?$``, which then means the same; a schema with any other pattern
  has every pattern searched by Python's re (a keyword of jsonschema-rs's that calls it; every
  record's check then costs about a quarter more);
- a value of no exact JSON type (a float subclass such as numpy's, a str subclass, a key that is
  not a string; a writer's record may hold one, a reader's, made by json, does not): the check
  answers None (the walk decides). jsonschema-rs would raise ValueError, count a float subclass
  as no number, or read a str subclass inside a list or object as no string (its maxLength
  unchecked: laxer); a schema that asks for a number's type under ``not``, ``oneOf``, an
  ``if``'s condition or ``contains`` still gets no fast check;
- a schema with a keyword outside TRUSTED, a ``$ref`` to another document or an ``$id`` below
  its root gets no fast check (None): the walk decides every record;
- a reader's check (``lenient``: fields a schema does not list are not refused) judges a
  variant of the schema made here, ``additionalProperties: false`` dropped wherever jsonschema
  reports its error as its own (a reader ignores those) and kept under ``anyOf``, ``oneOf``,
  ``not``, ``if`` and ``contains``, whose own errors they become; a subschema reached both ways
  gets no lenient check."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], "bool | None"]

# keywords whose subschemas' errors jsonschema reports as their own (reported) or as the
# keyword's (wrapped), by how their values hold subschemas
_ONE = {"items", "additionalProperties", "then", "else", "propertyNames", "not", "if",
        "contains"}
_MANY = {"allOf", "prefixItems", "anyOf", "oneOf"}
_MAP = {"properties", "dependentSchemas"}
_WRAPPED = {"not", "if", "contains", "anyOf", "oneOf"}
# keywords whose verdict a subschema's may turn either way (not monotone)
_TURNING = {"not", "if", "contains", "oneOf"}
_NUMBERS = {"number", "integer"}
_VALUES = {"type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
           "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "minContains",
           "maxContains", "pattern", "required", "minProperties", "maxProperties",
           "dependentRequired", "format", "$ref", "$id", "$schema", "$defs", "$comment", "title",
           "description", "default", "examples", "deprecated", "readOnly", "writeOnly"}
TRUSTED = frozenset(_ONE | _MANY | _MAP | _VALUES)

# A pattern that Rust's regular expressions and Python's re.search read alike, but for a final
# "$": a leading "^"; ASCII letters, digits and punctuation that is no metacharacter; escaped
# metacharacters; classes of those (no "--", "&&" or "~~", which Rust reads as set operations);
# the quantifiers ? * + {m} {m,} {m,n}; groups ( ) (?: ); alternation |; a final "$".
_LITERAL = r"[A-Za-z0-9 _/:@,;=!'\"#%<>-]"
_ESCAPED = r"\\[\\.^$|?*+()\[\]{}/-]"
_PLAIN = re.compile(rf"\^?(?:{_LITERAL}|{_ESCAPED}|\[\^?(?:{_LITERAL}|{_ESCAPED})+\]|[?*+|)]"
                    rf"|\((?!\?)|\(\?:|\{{[0-9]+(?:,[0-9]*)?\}})*(?P<end>\$?)")


def rust_pattern(pattern: str) -> str | None:
    """``pattern`` as Rust's regular expressions read it alike, or None where that is not known
    (_PLAIN). Python's final ``$`` matches before a final newline too: ``\\n?$``."""
    plain = _PLAIN.fullmatch(pattern)
    if plain is None or "--" in pattern:
        return None
    return pattern[:-1] + "\\n?$" if plain["end"] else pattern


class _Untrusted(Exception):
    """The schema uses what the fast check does not judge as the walk does."""


class _Pattern:
    """jsonschema-rs's ``pattern`` keyword as jsonschema judges it: Python's re.search."""

    def __init__(self, parent_schema: Any, value: str, schema_path: Any) -> None:
        self._search = re.compile(value).search

    def validate(self, instance: Any) -> None:
        if isinstance(instance, str) and self._search(instance) is None:
            raise ValueError(f"{instance!r} does not match")


@dataclasses.dataclass
class _Found:
    """What a walk of a schema found: for each subschema with ``additionalProperties: false``
    (by id), whether jsonschema reports its error as its own (True) or under another keyword
    (False), each way it is reached; the subschemas with a ``pattern`` (by id)."""

    closed: dict[int, set[bool]] = dataclasses.field(default_factory=dict)
    patterns: dict[int, str] = dataclasses.field(default_factory=dict)
    seen: set[tuple[str, bool, bool]] = dataclasses.field(default_factory=set)


def _subschemas(key: str, value: Any) -> list[Any]:
    if key in _ONE:
        return [value]
    if key in _MANY and isinstance(value, list):
        return value
    if key in _MAP and isinstance(value, dict):
        return list(value.values())
    raise _Untrusted(f"{key}: {value!r}")


def _resolved(ref: Any, root: Mapping[str, Any]) -> Any:
    """What a ``$ref`` within the schema names (a JSON pointer from its root)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise _Untrusted(f"$ref {ref!r} to another document")
    target: Any = root
    for part in filter(None, ref[1:].split("/")):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, dict) or part not in target:
            raise _Untrusted(f"$ref {ref!r} names nothing")
        target = target[part]
    return target


def _visit(schema: Any, root: Mapping[str, Any], reported: bool, turning: bool,
           found: _Found) -> None:
    """Check a schema's keywords against TRUSTED (and no number's type where a verdict may turn:
    ``turning``); note what _Found holds."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise _Untrusted(f"a schema that is not an object: {schema!r}")
    unknown = schema.keys() - TRUSTED
    if unknown:
        raise _Untrusted(f"keyword {sorted(unknown)[0]!r}")
    if "$id" in schema and schema is not root:
        raise _Untrusted("$id below the root (another base for $refs)")
    types = schema.get("type")
    names = [types] if isinstance(types, str) else types if isinstance(types, list) else []
    if turning and any(name in _NUMBERS for name in names):
        raise _Untrusted(f"type {types!r} under {'/'.join(sorted(_TURNING))}")
    if schema.get("additionalProperties") is False:
        found.closed.setdefault(id(schema), set()).add(reported)
    if isinstance(schema.get("pattern"), str):
        found.patterns[id(schema)] = schema["pattern"]
    for key, value in schema.items():
        if key in _ONE or key in _MANY or key in _MAP:
            for sub in _subschemas(key, value):
                _visit(sub, root, reported and key not in _WRAPPED,
                       turning or key in _TURNING, found)
    ref = schema.get("$ref")
    if ref is not None and (ref, reported, turning) not in found.seen:
        found.seen.add((ref, reported, turning))
        _visit(_resolved(ref, root), root, reported, turning, found)


def _copy(value: Any, opened: set[int], patterns: Mapping[int, str]) -> Any:
    """A copy of a schema, ``additionalProperties: false`` dropped from the subschemas whose id
    ``opened`` holds, the ``pattern`` of those ``patterns`` holds replaced."""
    if isinstance(value, dict):
        made = {k: _copy(v, opened, patterns) for k, v in value.items()
                if not (k == "additionalProperties" and id(value) in opened)}
        if id(value) in patterns:
            made["pattern"] = patterns[id(value)]
        return made
    if isinstance(value, list):
        return [_copy(v, opened, patterns) for v in value]
    return value


def judged(schema: Mapping[str, Any], *, lenient: bool) -> tuple[dict[str, Any], bool] | None:
    """The schema the fast check judges records by (``schema``; for a reader, ``lenient``, its
    variant that does not refuse unknown fields; its patterns Rust's where all are plain), and
    whether its patterns are to be searched by Python's re; None where the fast check would not
    judge as the walk does (see the module's docstring)."""
    found = _Found()
    try:
        _visit(schema, schema, True, False, found)
    except _Untrusted:
        return None
    opened: set[int] = set()
    if lenient:
        if any(len(ways) > 1 for ways in found.closed.values()):
            return None
        opened = {node for node, ways in found.closed.items() if ways == {True}}
    rust = {node: rust_pattern(pattern) for node, pattern in found.patterns.items()}
    plain = {node: pattern for node, pattern in rust.items() if pattern is not None}
    python = len(plain) < len(rust)
    made: dict[str, Any] = _copy(schema, opened, {} if python else plain)
    return made, python


def fast_check(schema: Mapping[str, Any], *, lenient: bool, parsed: bool = False
               ) -> Check | None:
    """The fast check of a JSON schema: ``check(record)`` is True where jsonschema finds the
    record valid, False where it does not, None where the check cannot tell (the caller walks
    the record then); or None where the schema gets none (see ``judged``). ``parsed``: the
    caller's records are json's (a reader's), of exact JSON types, so none is looked over for
    a value of another type first."""
    made = judged(schema, lenient=lenient)
    if made is None:
        return None
    source, python = made
    import jsonschema_rs

    try:
        valid = jsonschema_rs.Draft202012Validator(
            source, keywords={"pattern": _Pattern} if python else None).is_valid
    except jsonschema_rs.ValidationError:  # a pattern Rust does not take as a regex: walked
        return None

    def check(record: Any) -> bool | None:
        if not parsed and not _exact(record):  # a value of no exact JSON type: walked
            return None
        try:
            return valid(record)
        except ValueError:  # a value jsonschema-rs does not read: walked
            return None
    return check


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def _exact(value: Any) -> bool:
    """Does a record hold values of exact JSON types only (str, int, float, bool, None, lists,
    tuples, dicts with str keys)? jsonschema-rs reads a str subclass inside a list or an object
    as no string (a maxLength, pattern or enum of it unchecked: a laxer verdict), so a record
    holding one, or a float subclass (numpy's), is walked instead."""
    exact = type(value)
    if exact in _JSON_SCALARS:
        return True
    if exact is dict:
        return all(type(k) is str for k in value) and all(map(_exact, value.values()))
    if exact is list or exact is tuple:
        return all(map(_exact, value))
    return False
