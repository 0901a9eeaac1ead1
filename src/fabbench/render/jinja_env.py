"""The Jinja2 environment every template renders in: StrictUndefined (a missing value is an
error, never an empty string), no autoescape, and the filters that quote values for their target:
``sh`` / ``shjoin`` for bash, ``k8s`` for a Kubernetes command argument, ``yaml`` for a scalar."""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabbench.errors import UsageError

if TYPE_CHECKING:
    import jinja2


def sh(value: Any) -> str:
    """One shell word, whatever the value holds ($(...), backticks, quotes, newlines)."""
    if isinstance(value, bool) or value is None or isinstance(value, list | tuple | dict):
        raise UsageError(f"template error: cannot quote {type(value).__name__} {value!r} for bash")
    return shlex.quote(str(value))


def shjoin(values: Iterable[Any]) -> str:
    return " ".join(sh(v) for v in values)


def k8s_arg(value: Any) -> str:
    """A literal container argument: Kubernetes expands $(VAR) in command/args, $$ is a '$'."""
    return str(value).replace("$", "$$")


def yaml_scalar(value: Any) -> str:
    """A YAML scalar: JSON's string/number/boolean syntax is valid YAML flow syntax."""
    if isinstance(value, list | tuple | dict) or value is None:
        raise UsageError(f"template error: {value!r} is not a scalar")
    return json.dumps(value)


@functools.cache
def environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("fabbench.render", "templates"),
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True)
    env.filters.update(sh=sh, shjoin=shjoin, k8s=k8s_arg, yaml=yaml_scalar)
    return env


@functools.cache
def _beside(folder: Path) -> jinja2.Environment:
    """The environment with ``folder``'s templates found first, then fabbench's."""
    import jinja2

    env: jinja2.Environment = environment()
    assert env.loader is not None  # fabbench's templates
    return env.overlay(loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(folder), env.loader]))


def render(template: str, *, folder: Path | None = None, **context: Any) -> str:
    """``template`` filled in; ``folder``: a folder of templates of one's own (a scheduler's,
    launch.schedulers), searched before fabbench's."""
    import jinja2

    env = environment() if folder is None else _beside(folder)
    try:
        return env.get_template(template).render(**context)
    except jinja2.UndefinedError as exc:  # a bug in a template or its context, not user input
        raise RuntimeError(f"template {template}: {exc}") from exc
