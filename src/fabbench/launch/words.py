"""Words of a launch command: plain strings (quoted for their target when written out) or
``Shell`` text (a shell variable, a Kubernetes $(VAR)), placed as it is. A line someone else
fills in too (the Helm chart cannot call Python) is a ``Line``: words with {name} placeholders
and ``Each`` groups."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType


class Shell(str):
    """Text already in its target's syntax ("$results_dir", "$(MASTER_PORT)"): never quoted."""


def shell_line(words: Sequence[str]) -> str:
    """``words`` as one line of bash: literals quoted, Shell text as it is."""
    return " ".join(w if isinstance(w, Shell) else shlex.quote(w) for w in words)


@dataclass(frozen=True)
class Each:
    """Words written once per item of one of a line's lists: ``mca`` (an MCA parameter: {key},
    {value}) or ``exports`` (a variable exported to every rank: {key})."""

    items: str
    words: tuple[str, ...]


Line = tuple[str | Each, ...]  # words with {name} placeholders, and Each groups
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _fill_word(word: str, values: Mapping[str, object]) -> str:
    text = _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), word)
    return Shell(text) if isinstance(word, Shell) else text


def fill(line: Line, values: Mapping[str, object],
         lists: Mapping[str, Sequence[Mapping[str, str]]] = MappingProxyType({})) -> list[str]:
    """``line``'s words with {name} filled from ``values``, each Each group once per item of
    ``lists[group.items]`` (filled from the item); Shell words stay Shell."""
    out: list[str] = []
    for part in line:
        if isinstance(part, Each):
            for item in lists.get(part.items, ()):
                out += [_fill_word(w, item) for w in part.words]
        else:
            out.append(_fill_word(part, values))
    return out


def lists(mca: Mapping[str, str], exports: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    """A line's Each lists: the MCA parameters ({key}, {value}) and exports ({key}), in order."""
    return {"mca": [{"key": k, "value": v} for k, v in mca.items()],
            "exports": [{"key": k} for k in exports]}
