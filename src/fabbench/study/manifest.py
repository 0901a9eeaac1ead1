"""The study manifest: DIR/study.json, one entry per cell with its status and why.

It is rewritten after every cell, atomically (a temporary file, fsync, rename), and validated
against its schema before any byte is written, so a killed study leaves the last good manifest.
In memory it is a StudyManifest of CellEntry (and Attempt) objects, read from and written as
JSON by ``read`` and ``to_json``; they are not frozen: a study's runner updates its cells'
entries as they run, and writes the manifest again.

Format history (readers accept every version listed):
  fabbench-study/1  first version.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from fabbench import catalog
from fabbench.errors import UsageError
from fabbench.launch import schedulers
from fabbench.study.host import Place

FORMAT = "fabbench-study/1"
FORMATS = (FORMAT,)
NAME = "study.json"


def _validator() -> jsonschema.Draft202012Validator:
    """The manifest's validator; a cell's kind is one of the workloads fabbench knows (its
    own and the installed packages', fabbench.catalog), its place's scheduler one that a study
    runs in (launch.schedulers, where a scheduler may be registered later)."""
    return _compiled(schedulers.studied())


@functools.cache
def _compiled(places: tuple[str, ...]) -> jsonschema.Draft202012Validator:
    text = resources.files("fabbench.study").joinpath("manifest.schema.json").read_text()
    schema = json.loads(text)
    schema["properties"]["cells"]["items"]["properties"]["kind"]["enum"] = list(
        catalog.WORKLOADS)
    schema["properties"]["place"]["properties"]["scheduler"]["enum"] = list(places)
    return jsonschema.Draft202012Validator(schema)


@dataclass(kw_only=True)
class Attempt:
    """An earlier attempt of a cell that failed (a cell's ``history``); ``file``: where its
    partial results file was kept (None: it left none)."""

    attempt: int
    error: str | None
    exit_code: int | None
    wall_s: float | None
    transient: bool
    file: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "error": self.error, "exit_code": self.exit_code,
                "wall_s": self.wall_s, "transient": self.transient,
                **({"file": self.file} if self.file is not None else {})}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> Attempt:
        return cls(attempt=data["attempt"], error=data["error"],
                   exit_code=data.get("exit_code"), wall_s=data.get("wall_s"),
                   transient=data.get("transient", False), file=data.get("file"))


@dataclass(kw_only=True)
class CellEntry:
    """One cell of the manifest: what it is (its axes, workload kind, options and launch),
    its status (pending, running, ok, failed, skipped) and why (reason: skipped; error:
    failed), its files (relative to the study's directory) and its attempts so far; the
    attempts that failed before the last are in ``history`` (None: none failed yet)."""

    id: str
    axes: dict[str, Any]      # spec.Cell.axes(): workload, fabric, primitive, gpudirect, ...
    kind: str                 # the workload (fabbench.catalog)
    options: dict[str, Any]   # the cell's options, by their study keys
    argv: list[str]
    status: str = "pending"
    reason: str | None = None
    error: str | None = None
    exit_code: int | None = None
    file: str
    log: str | None
    started: str | None = None
    wall_s: float | None = None
    attempts: int = 0
    history: list[Attempt] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "axes": dict(self.axes), "kind": self.kind,
                "options": dict(self.options), "argv": list(self.argv), "status": self.status,
                "reason": self.reason, "error": self.error, "exit_code": self.exit_code,
                "file": self.file, "log": self.log, "started": self.started,
                "wall_s": self.wall_s, "attempts": self.attempts,
                **({"history": [a.to_json() for a in self.history]}
                   if self.history is not None else {})}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> CellEntry:
        history = data.get("history")
        return cls(id=data["id"], axes=dict(data["axes"]), kind=data["kind"],
                   options=dict(data["options"]), argv=list(data["argv"]),
                   status=data["status"], reason=data.get("reason"), error=data.get("error"),
                   exit_code=data.get("exit_code"), file=data["file"], log=data.get("log"),
                   started=data.get("started"), wall_s=data.get("wall_s"),
                   attempts=data.get("attempts", 0),
                   history=None if history is None else [Attempt.read(a) for a in history])


@dataclass(kw_only=True)
class StudyManifest:
    """DIR/study.json: the study (its name, description, source file and that file's hash),
    when and where it ran (started, finished: None while it runs or after it stopped; host,
    place, the fabbench that ran it), its axes and its cells."""

    format: str = FORMAT
    study: str
    description: str
    source: str
    source_sha256: str
    started: str
    finished: str | None = None
    host: str
    place: Place
    fabbench: str
    axes: dict[str, list[Any]]
    cells: list[CellEntry] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"format": self.format, "study": self.study, "description": self.description,
                "source": self.source, "source_sha256": self.source_sha256,
                "started": self.started, "finished": self.finished, "host": self.host,
                "place": self.place.to_json(), "fabbench": self.fabbench,
                "axes": {k: list(v) for k, v in self.axes.items()},
                "cells": [c.to_json() for c in self.cells]}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> StudyManifest:
        """The manifest of its JSON, one the schema accepted (``read`` below checks it)."""
        return cls(format=data["format"], study=data["study"],
                   description=data["description"], source=data["source"],
                   source_sha256=data["source_sha256"], started=data["started"],
                   finished=data.get("finished"), host=data["host"],
                   place=Place.read(data["place"]), fabbench=data["fabbench"],
                   axes={k: list(v) for k, v in data["axes"].items()},
                   cells=[CellEntry.read(c) for c in data["cells"]])


def validate(manifest: dict[str, Any], where: str) -> None:
    error = jsonschema.exceptions.best_match(_validator().iter_errors(manifest))
    if error is not None:
        path = "/".join(str(p) for p in error.absolute_path) or "manifest"
        raise UsageError(f"{where}: {path}: {error.message}")


def path_in(directory: str | os.PathLike[str]) -> Path:
    return Path(directory) / NAME


def is_study_dir(directory: str | os.PathLike[str]) -> bool:
    return Path(directory).is_dir() and path_in(directory).is_file()


def read(directory: str | os.PathLike[str]) -> StudyManifest:
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
    return StudyManifest.read(data)


def write(directory: str | os.PathLike[str], manifest: StudyManifest) -> None:
    path = path_in(directory)
    data = manifest.to_json()
    validate(data, str(path))
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"
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
