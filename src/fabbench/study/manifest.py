"""The study manifest: DIR/study.json, one entry per cell with its status and why.

It is rewritten after every cell, atomically (a temporary file, fsync, rename), and validated
against its schema before any byte is written, so a killed study leaves the last good manifest.

Format history (readers accept every version listed):
  fabbench-study/1  first version.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from fabbench import catalog
from fabbench.errors import UsageError

FORMAT = "fabbench-study/1"
FORMATS = (FORMAT,)
NAME = "study.json"


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    """The manifest's validator; a cell's kind is one of the workloads fabbench knows (its
    own and the installed packages', fabbench.catalog)."""
    text = resources.files("fabbench.study").joinpath("manifest.schema.json").read_text()
    schema = json.loads(text)
    schema["properties"]["cells"]["items"]["properties"]["kind"]["enum"] = list(
        catalog.WORKLOADS)
    return jsonschema.Draft202012Validator(schema)


def validate(manifest: dict[str, Any], where: str) -> None:
    error = jsonschema.exceptions.best_match(_validator().iter_errors(manifest))
    if error is not None:
        path = "/".join(str(p) for p in error.absolute_path) or "manifest"
        raise UsageError(f"{where}: {path}: {error.message}")


def path_in(directory: str | os.PathLike) -> Path:
    return Path(directory) / NAME


def is_study_dir(directory: str | os.PathLike) -> bool:
    return Path(directory).is_dir() and path_in(directory).is_file()


def read(directory: str | os.PathLike) -> dict[str, Any]:
    path = path_in(directory)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise UsageError(f"{path}: not a study manifest (not JSON)") from None
    if not isinstance(data, dict) or data.get("format") not in FORMATS:
        raise UsageError(f"{path}: not a study manifest this fabbench reads "
                         f"(format {data.get('format') if isinstance(data, dict) else None!r}; "
                         f"reads {', '.join(FORMATS)})")
    validate(data, str(path))
    return data


def write(directory: str | os.PathLike, manifest: dict[str, Any]) -> None:
    path = path_in(directory)
    validate(manifest, str(path))
    text = json.dumps(manifest, indent=1, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".study.", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
