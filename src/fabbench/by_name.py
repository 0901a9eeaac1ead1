"""Small explicit registries: things of one kind by name, in registration order, a second of one
name refused, an unknown name refused with the known ones listed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, Self, TypeVar

from fabbench.errors import UsageError


class _Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=_Named)


class ByName(Generic[T]):
    """``kind``: the word the refusals use ("primitive", "launcher")."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._by_name: dict[str, T] = {}

    def add(self, item: T) -> T:
        if item.name in self._by_name:
            raise UsageError(f"{self.kind} {item.name!r} is registered twice")
        self._admit(item)
        self._by_name[item.name] = item
        return item

    def _admit(self, item: T) -> None:
        """A subclass's own check of a new entry, after the name's (refuse: UsageError)."""

    def get(self, name: str) -> T:
        if name not in self._by_name:
            raise UsageError(f"unknown {self.kind} {name!r} (known: {', '.join(self._by_name)})")
        return self._by_name[name]

    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def __iter__(self) -> Iterator[T]:
        return iter(tuple(self._by_name.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @contextmanager
    def scoped(self) -> Iterator[Self]:
        """Things registered inside the block are gone after it (a test's own)."""
        before = dict(self._by_name)
        try:
            yield self
        finally:
            self._by_name = before
