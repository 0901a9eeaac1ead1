"""The schema check of records, compiled: the schema turned into Python source once (one function of
plain ``if``s per record kind, compiled lazily) in place of jsonschema's walk for every record
(about 8 ms a record). It answers only "valid or not"; records.problem walks a refused record with
jsonschema again for the usual one-line message. Its verdict is jsonschema's (Draft 2020-12),
compared on generated records and schemas by test_records_compiled.py: only the keywords of KEYWORDS
are compiled, each to jsonschema's own rule, and anything it cannot compile exactly (another
keyword, a non-string enum, a value of no exact JSON type, a reader's ``additionalProperties`` under
``anyOf``/``oneOf``/``not``/``if``) makes ``compile_check`` return None, or the check say None, so
the walk decides. NaN and Infinity are found before it."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

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


class Undecided(Exception):
    """A record holds a value of no exact JSON type: the compiled check does not judge it."""


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


_EXACT = frozenset({dict, list, str, int, float, bool, type(None)})  # JSON's values' types
_MISSING = object()
_NUMBERS = frozenset({int, float})
# a JSON type as a test of a value ``v`` whose exact type is ``t``, jsonschema's way: a bool
# is not a number, a float with no fraction is an integer
_TYPE_TESTS = {"object": "{t} is dict", "array": "{t} is list", "string": "{t} is str",
               "number": "{t} is int or {t} is float",
               "integer": "{t} is int or ({t} is float and {v}.is_integer())",
               "boolean": "{t} is bool", "null": "{v} is None"}
_BOUNDS = {"minimum": "<", "maximum": ">", "exclusiveMinimum": "<=", "exclusiveMaximum": ">="}
_LENGTHS = {"minLength": ("str", "<"), "maxLength": ("str", ">"),
            "minItems": ("list", "<"), "maxItems": ("list", ">")}


class _CheckSource:
    """Python source of a prepared schema's check: one function per schema that another's
    result depends on (anyOf, oneOf, not, if), every other keyword inline in its parent's
    function, each failing test a ``return False``. A value whose type is no exact JSON type
    (a subclass: an OrderedDict, a numpy float) raises Undecided: the walk decides."""

    def __init__(self) -> None:
        self.functions: list[str] = []
        self.names: dict[str, Any] = {"_EXACT": _EXACT, "_MISSING": _MISSING,
                                      "_NUMBERS": _NUMBERS,
                                      "Undecided": Undecided}
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def constant(self, value: Any) -> str:
        name = self.fresh("_c")
        self.names[name] = value
        return name

    def function(self, schema: dict[str, Any]) -> str:
        name = self.fresh("_check")
        body: list[str] = []
        self.body(schema, "v", "    ", body)
        self.functions.append("\n".join([f"def {name}(v):", *body, "    return True"]))
        return name

    def body(self, schema: dict[str, Any], v: str, ind: str, out: list[str]) -> None:
        if not schema:
            return
        t = self.fresh("t")
        out += [f"{ind}{t} = type({v})", f"{ind}if {t} not in _EXACT: raise Undecided"]
        if "type" in schema:
            names = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
            either = " or ".join(f"({_TYPE_TESTS[n].format(t=t, v=v)})" for n in names)
            out.append(f"{ind}if not ({either or 'False'}): return False")
        for key in ("enum", "const"):
            if key in schema:
                values = schema[key] if key == "enum" else [schema[key]]
                tests = [f"{v} is None"] if None in values else []
                strings = frozenset(x for x in values if isinstance(x, str))
                if strings:
                    tests.append(f"({t} is str and {v} in {self.constant(strings)})")
                out.append(f"{ind}if not ({' or '.join(tests) or 'False'}): return False")
        for key, op in _BOUNDS.items():
            if key in schema:
                out.append(f"{ind}if ({t} is int or {t} is float) and {v} {op} "
                           f"{self.constant(schema[key])}: return False")
        for key, (kind, op) in _LENGTHS.items():
            if key in schema:
                out.append(f"{ind}if {t} is {kind} and len({v}) {op} {schema[key]}: "
                           "return False")
        if "pattern" in schema:
            pattern = self.constant(re.compile(schema["pattern"]))
            out.append(f"{ind}if {t} is str and {pattern}.search({v}) is None: return False")
        if "required" in schema:
            out.append(f"{ind}if {t} is dict and not {v}.keys() >= "
                       f"{self.constant(frozenset(schema['required']))}: return False")
        self.object(schema, v, t, ind, out)
        if "items" in schema and schema["items"]:
            item, items = self.fresh("x"), schema["items"]
            out.append(f"{ind}if {t} is list:")
            if items.get("type") in ("number", ["number"]) and set(items) <= {"type", *_BOUNDS}:
                # a list of numbers (samples): its types, least and greatest found in C
                out.append(f"{ind}    if _NUMBERS.issuperset(map(type, {v})):")
                for key, op in _BOUNDS.items():
                    if key in items:
                        end = "min" if key.startswith(("min", "exclusiveMin")) else "max"
                        out.append(f"{ind}        if {v} and {end}({v}) {op} "
                                   f"{self.constant(items[key])}: return False")
                out += [f"{ind}        pass", f"{ind}    else:"]
                ind += "    "
            out.append(f"{ind}    for {item} in {v}:")
            inner: list[str] = []
            self.body(items, item, ind + "        ", inner)
            out += inner or [f"{ind}        pass"]
        for sub in schema.get("allOf", ()):
            self.body(sub, v, ind, out)
        if "anyOf" in schema:
            calls = " or ".join(f"{self.function(s)}({v})" for s in schema["anyOf"])
            out.append(f"{ind}if not ({calls}): return False")
        if "oneOf" in schema:
            calls = " + ".join(f"{self.function(s)}({v})" for s in schema["oneOf"])
            out.append(f"{ind}if ({calls}) != 1: return False")
        if "not" in schema:
            out.append(f"{ind}if {self.function(schema['not'])}({v}): return False")
        if "if" in schema and ("then" in schema or "else" in schema):
            out.append(f"{ind}if {self.function(schema['if'])}({v}):")
            then: list[str] = []
            self.body(schema.get("then", {}), v, ind + "    ", then)
            out += then or [f"{ind}    pass"]
            out.append(f"{ind}else:")
            other: list[str] = []
            self.body(schema.get("else", {}), v, ind + "    ", other)
            out += other or [f"{ind}    pass"]

    def object(self, schema: dict[str, Any], v: str, t: str, ind: str, out: list[str]) -> None:
        """properties and additionalProperties: each listed key's value checked where the
        object has it, the others by additionalProperties."""
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        inner: list[str] = []
        for name, sub in properties.items():
            if sub:
                x = self.fresh("x")
                inner += [f"{ind}    {x} = {v}.get({name!r}, _MISSING)",
                          f"{ind}    if {x} is not _MISSING:"]
                self.body(sub, x, ind + "        ", inner)
        if extra is not None:
            listed = self.constant(frozenset(properties))
            if extra is False:
                inner.append(f"{ind}    if not {v}.keys() <= {listed}: return False")
            elif extra:
                key, x = self.fresh("k"), self.fresh("x")
                inner += [f"{ind}    for {key} in {v}.keys() - {listed}:",
                          f"{ind}        {x} = {v}[{key}]"]
                self.body(extra, x, ind + "        ", inner)
        if inner:
            out += [f"{ind}if {t} is dict:", *inner]


def _compiled(schema: dict[str, Any]) -> Check:
    """The check of a prepared schema, compiled to Python (see _CheckSource)."""
    source = _CheckSource()
    name = source.function(schema)
    code = compile("\n\n".join(source.functions), "<fabbench schema check>", "exec")
    exec(code, source.names)  # noqa: S102 - our own source, made of the schema above
    check: Check = source.names[name]
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
            check = self._of(None)
        else:
            value = record.get(self._dispatch[0]) if isinstance(record, dict) else None
            if not isinstance(value, str):
                return None  # every branch applies (an absent field) or none: the walk decides
            check = self._of(value if value in self._dispatch[1] else None)
        try:
            return check(record)
        except Undecided:
            return None


def compile_check(schema: Mapping[str, Any], *, lenient: bool = False) -> CompiledCheck | None:
    """The compiled check of a JSON schema (Draft 2020-12), or None where it is not compiled
    (see the module's docstring). ``lenient``: fields a schema does not list are not refused
    (a reader's check). The caller keeps it: each branch is compiled on its first record."""
    try:
        prepared = _prepared(schema, schema, lenient=lenient, reported=True)
    except NotCompiled:
        return None
    return CompiledCheck(prepared)
