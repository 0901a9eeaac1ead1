"""Find the line of a key in TOML source text, so that an error can name it.

tomllib keeps no positions, so this scans the text the way TOML lays it out: table headers
(``[a.b]``, ``[[a]]``, counted per array of tables), ``key = value`` lines (dotted and quoted keys
too) and inline tables on one line. It answers the line of the deepest part of a key path it can
find, and for a value inside an array (``fabric = ["ethernet", "ib"]``, even over several lines)
the line holding that value. It never guesses beyond what the text shows: a path it cannot place
gets the line of its nearest parent that it can (line 1 for the document).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Path = Sequence[str | int]  # keys; an int is the index in an array of tables

_HEADER = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|"""
                  r"""[A-Za-z0-9_-]+))*)\s*=""")
_PART = re.compile(r"""\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*(?:\.|$)""")


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(p.strip("\"'") for p in _PART.findall(dotted))


def _strip_comment(line: str) -> str:
    out, quote = [], None
    for ch in line:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        out.append(ch)
    return "".join(out)


def _keys(text: str) -> list[tuple[tuple[str | int, ...], int, str]]:
    """Every (full key path, line number, rest of the line after '=') in the document."""
    found: list[tuple[tuple[str | int, ...], int, str]] = []
    table: tuple[str | int, ...] = ()
    arrays: dict[tuple[str, ...], int] = {}
    depth = 0  # inside a multi-line array or inline table: its lines hold no keys of the table
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw)
        if depth == 0:
            header = _HEADER.match(line)
            if header and not _KEY.match(line):
                names = _parts(header.group(2))
                if header.group(1) == "[[":
                    arrays[names] = arrays.get(names, -1) + 1
                    table = (*names, arrays[names])
                else:
                    table = _with_indices(names, arrays)
                found.append((table, number, ""))
                continue
            key = _KEY.match(line)
            if key:
                rest = line[key.end():]
                path = (*table, *_parts(key.group(1)))
                found.append((path, number, rest))
                found += _inline(path, rest, number)
                depth = max(0, rest.count("[") + rest.count("{") - rest.count("]")
                            - rest.count("}"))
                continue
        else:
            depth = max(0, depth + line.count("[") + line.count("{") - line.count("]")
                        - line.count("}"))
    return found


def _with_indices(names: tuple[str, ...], arrays: dict[tuple[str, ...], int]
                  ) -> tuple[str | int, ...]:
    """[a.b] under [[a]] means the latest element of a: a.<index>.b."""
    out: list[str | int] = []
    for i, name in enumerate(names):
        out.append(name)
        if names[:i + 1] in arrays and i + 1 < len(names):
            out.append(arrays[names[:i + 1]])
    return tuple(out)


def _inline(path: tuple[str | int, ...], rest: str, number: int
            ) -> list[tuple[tuple[str | int, ...], int, str]]:
    """Keys of an inline table written on this line: ``match = { fabric = "shm" }``."""
    body = rest.strip()
    if not body.startswith("{"):
        return []
    out = []
    for m in re.finditer(r"""(?:^\{|,)\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*=""", body):
        out.append(((*path, m.group(1).strip("\"'")), number, body[m.end():]))
    return out


def line_of(text: str, path: Path, value: object = None) -> int:
    """The line of ``path`` (or of its nearest parent found); with ``value``, the line of that
    value when it is written inside the key's array (over several lines if need be)."""
    keys = _keys(text)
    target = tuple(path)
    while target:
        hits = [(number, rest) for key, number, rest in keys if key == target]
        if hits:
            number, _ = hits[0]
            if value is not None and target == tuple(path):
                return _value_line(text, number, value)
            return number
        # a table written only through its keys ([a] with no header but a.b = ...)
        under = [number for key, number, _ in keys if key[:len(target)] == target]
        if under:
            return min(under)
        target = target[:-1]
    return 1


def _value_line(text: str, start: int, value: object) -> int:
    """The first line from ``start`` on that writes ``value`` (a string quoted, else as is),
    within the key's own value (it stops at the next key)."""
    lines = text.splitlines()
    wanted = [f'"{value}"', f"'{value}'"] if isinstance(value, str) else [str(value).lower()
                                                                         if isinstance(value, bool)
                                                                         else str(value)]
    for offset, raw in enumerate(lines[start - 1:]):
        line = _strip_comment(raw)
        if offset and (_KEY.match(line) or _HEADER.match(line)):
            break
        body = line.split("=", 1)[1] if offset == 0 and "=" in line else line
        if any(w in body for w in wanted):
            return start + offset
    return start
