"""Read results files: schema-checked records, a truncated last line reported, not fatal."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from fabbench.errors import UsageError
from fabbench.results import SUPPORTED_SCHEMAS


@functools.cache
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(resources.files("fabbench.results").joinpath("schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def validate(record: dict[str, Any]) -> None:
    """Raise UsageError naming the first problem of a record."""
    error = jsonschema.exceptions.best_match(validator().iter_errors(record))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "record"
        raise UsageError(f"{where}: {error.message}")


@dataclass
class ResultsFile:
    path: Path
    records: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["kind"] == kind]


def read_results(path: str | Path) -> ResultsFile:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    lines = data.decode(errors="replace").split("\n")
    records, warnings = [], []
    truncated = not data.endswith(b"\n") and lines[-1] != ""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if truncated and number == len(lines):
                warnings.append(f"{path}:{number}: last line is truncated (killed run?); ignored")
                continue
            raise UsageError(f"{path}:{number}: not a fabbench results file "
                             "(a line is not JSON)") from None
        if not isinstance(record, dict) or "kind" not in record:
            raise UsageError(f"{path}:{number}: not a fabbench results record (no 'kind')")
        if record["kind"] == "run" and record.get("schema") not in SUPPORTED_SCHEMAS:
            raise UsageError(f"{path}:{number}: schema {record.get('schema')!r} is not one this "
                             f"fabbench reads ({', '.join(SUPPORTED_SCHEMAS)}); upgrade fabbench")
        try:
            validate(record)
        except UsageError as exc:
            raise UsageError(f"{path}:{number}: {exc}") from None
        records.append(record)
    if not records:
        raise UsageError(f"{path}: no results records (empty file)")
    if records[0]["kind"] != "run":
        raise UsageError(f"{path}: the first record is not a 'run' record")
    return ResultsFile(path, records, warnings)
