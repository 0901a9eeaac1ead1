"""The schema check of records, compiled: fastjsonschema's generated Python in place of
jsonschema's walk of the schema for every record (the walk cost about 8 ms a record; reading a
results file was mostly that). It answers only "valid or not": records.problem walks a record
the compiled check refuses with jsonschema again, for the one-line message users have always
seen, so a refusal reads as before and a compiled check that is stricter than the walk only
costs time.

Its verdict is jsonschema's (Draft 2020-12) on JSON values (what ``json.loads`` makes; a tuple
is an array here, not there) for the schemas it compiles, which the unit tests check on
generated records (tests/unit/test_records_compiled.py). What makes it so:

- only the keywords of KEYWORDS are compiled, whose meaning is the same in both libraries (a
  schema with any other, or an enum or const of other than strings and null, where equality
  differs, is not compiled: ``compile_check`` returns None and the caller walks it);
- ``$ref``s to the same document are inlined (the schemas here are not recursive); one with
  sibling keywords, which 2020-12 applies beside it and fastjsonschema's draft 7 ignores,
  becomes an ``allOf`` of the two;
- a reader's check, which ignores fields the schema does not list (a newer writer's:
  ``problem(unknown_fields=True)`` drops jsonschema's ``additionalProperties`` errors), is
  compiled without ``additionalProperties: false``; that is the same only where such an error
  would be reported as itself, so a schema with one under ``anyOf``, ``oneOf``, ``not`` or
  ``if`` is not compiled for readers;
- fastjsonschema's ``pattern`` anchors ``$`` at the very end, where Python's ``re`` also
  accepts a final newline: stricter, so only slower for such a string.

A schema of the form of schema.json, an ``allOf`` of ``if kind is K then ...``, is compiled
once per kind, lazily (the kind's branch alone): a record is checked by its own kind's code
only, and a process that reads collectives never compiles the train branch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema

Check = Callable[[Any], bool]

# keywords compiled, and how their values are read
_SUBSCHEMA = {"items", "if", "then", "else", "not"}
_SUBSCHEMA_LISTS = {"allOf", "anyOf", "oneOf"}
_SUBSCHEMA_MAPS = {"properties", "$defs"}
_VALUES = {"type", "required", "enum", "const", "minimum", "maximum", "exclusiveMinimum",
           "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems", "pattern",
           "title", "description", "$comment", "$schema", "$id", "$ref",
           "additionalProperties"}
KEYWORDS = frozenset(_SUBSCHEMA | _SUBSCHEMA_LISTS | _SUBSCHEMA_MAPS | _VALUES)
_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}
# where an error of a subschema is not reported as itself (jsonschema wraps it, or drops it)
_WRAPPING = {"anyOf", "oneOf", "not", "if"}


class NotCompiled(Exception):
    """The schema uses what this module does not compile the same as jsonschema walks it."""


def _same_values(values: list[Any]) -> bool:
    """Values whose equality is the same in both libraries (no 1 == True, 1 == 1.0)."""
    return all(v is None or isinstance(v, str) for v in values)


def _prepared(schema: Any, root: Mapping[str, Any], *, lenient: bool, reported: bool,
              seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """``schema`` with its ``$ref``s inlined, checked against KEYWORDS; for a reader
    (``lenient``), without ``additionalProperties: false``. NotCompiled where that would change
    its meaning."""
    if not isinstance(schema, dict):
        raise NotCompiled(f"a schema that is not an object: {schema!r}")
    unknown = set(schema) - KEYWORDS
    if unknown:
        raise NotCompiled(f"keyword {sorted(unknown)[0]!r}")
    out: dict[str, Any] = {}
    for key, value in schema.items():
        wraps = reported and key not in _WRAPPING
        if key in _SUBSCHEMA:
            out[key] = _prepared(value, root, lenient=lenient, reported=wraps, seen=seen)
        elif key in _SUBSCHEMA_LISTS:
            if not isinstance(value, list):
                raise NotCompiled(f"{key} is not a list")
            out[key] = [_prepared(v, root, lenient=lenient, reported=wraps, seen=seen)
                        for v in value]
        elif key == "properties":
            if not isinstance(value, dict):
                raise NotCompiled("properties is not an object")
            out[key] = {name: _prepared(v, root, lenient=lenient, reported=reported, seen=seen)
                        for name, v in value.items()}
        elif key in ("$defs", "$schema", "title", "description", "$comment"):
            continue  # what a $ref names is inlined where it is used
        elif key == "$id" and schema is not root:
            raise NotCompiled("$id below the root (another base for $refs)")
        elif key == "additionalProperties":
            if value is False:
                if lenient and not reported:
                    raise NotCompiled("additionalProperties: false under " + "/".join(_WRAPPING))
                if not lenient:
                    out[key] = False
            elif value is not True:
                out[key] = _prepared(value, root, lenient=lenient, reported=reported, seen=seen)
        elif key in ("enum", "const"):
            if not _same_values(value if key == "enum" else [value]):
                raise NotCompiled(f"{key} of other than strings and null")
            out[key] = value
        elif key == "type":
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list) or not set(names) <= _TYPES:
                raise NotCompiled(f"type {value!r}")
            out[key] = value
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise NotCompiled(f"required: {value!r}")
            out[key] = value
        elif key == "pattern":
            if not isinstance(value, str):
                raise NotCompiled(f"pattern: {value!r}")
            out[key] = value
        elif key not in ("$ref", "$id"):  # a bound: minimum, maxLength, ...
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise NotCompiled(f"{key}: {value!r}")
            out[key] = value
    if "$ref" in schema:
        target = _inlined(schema["$ref"], root, lenient=lenient, reported=reported, seen=seen)
        out = {"allOf": [target, out]} if out else target
    return out


def _inlined(ref: Any, root: Mapping[str, Any], *, lenient: bool, reported: bool,
             seen: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise NotCompiled(f"$ref {ref!r} to another document")
    if ref in seen:
        raise NotCompiled(f"$ref {ref!r} is recursive")
    target: Any = root
    for part in filter(None, ref[1:].split("/")):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, dict) or part not in target:
            raise NotCompiled(f"$ref {ref!r} names nothing")
        target = target[part]
    return _prepared(target, root, lenient=lenient, reported=reported, seen=(*seen, ref))


def _compiled(schema: dict[str, Any]) -> Check:
    validate = fastjsonschema.compile({"$schema": "http://json-schema.org/draft-07/schema#",
                                       **schema}, use_default=False, use_formats=False,
                                      detailed_exceptions=True)  # False: KeyError on const

    def check(record: Any) -> bool:
        try:
            validate(record)
        except fastjsonschema.JsonSchemaValueException:
            return False
        return True
    return check


def _branches(schema: dict[str, Any]) -> tuple[str, dict[str, list[Any]]] | None:
    """The field and, per value, the ``then``s of a schema whose ``allOf`` is only ``if
    <field> is <value> then ...`` (schema.json's dispatch on ``kind``); else None."""
    entries = schema.get("allOf")
    if not entries:
        return None
    field_name: str | None = None
    branches: dict[str, list[Any]] = {}
    for entry in entries:
        cond = entry.get("if")
        if set(entry) != {"if", "then"} or not isinstance(cond, dict) or set(cond) != {
                "properties"} or len(cond["properties"]) != 1:
            return None
        (name, test), = cond["properties"].items()
        if set(test) != {"const"} or not isinstance(test["const"], str) or name != (
                field_name or name):
            return None
        field_name = name
        branches.setdefault(test["const"], []).append(entry["then"])
    assert field_name is not None
    return field_name, branches


class CompiledCheck:
    """A compiled check of one schema: ``check(record)`` is True where jsonschema finds the
    record valid, False where it does not, None where this check cannot tell (the caller walks
    the record then). A dispatching schema (see _branches) compiles the branch of each value of
    its field the first time a record has that value."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._schema = schema
        self._dispatch = _branches(schema)
        self._checks: dict[str | None, Check] = {}

    def _of(self, value: str | None) -> Check:
        check = self._checks.get(value)
        if check is None:
            if self._dispatch is None:
                check = _compiled(self._schema)
            else:
                base = {k: v for k, v in self._schema.items() if k != "allOf"}
                then = self._dispatch[1].get(value or "", [])
                check = _compiled({**base, "allOf": then} if then else base)
            self._checks[value] = check
        return check

    def __call__(self, record: Any) -> bool | None:
        if self._dispatch is None:
            return self._of(None)(record)
        value = record.get(self._dispatch[0]) if isinstance(record, dict) else None
        if not isinstance(value, str):
            return None  # every branch applies (an absent field) or none: the walk decides
        return self._of(value if value in self._dispatch[1] else None)(record)


def compile_check(schema: Mapping[str, Any], *, lenient: bool = False) -> CompiledCheck | None:
    """The compiled check of a JSON schema (Draft 2020-12), or None where it is not compiled
    (see the module's docstring). ``lenient``: fields a schema does not list are not refused
    (a reader's check). The caller keeps it: each branch is compiled on its first record."""
    try:
        prepared = _prepared(schema, schema, lenient=lenient, reported=True)
    except NotCompiled:
        return None
    return CompiledCheck(prepared)
