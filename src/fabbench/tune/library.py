"""What the library says it accepts: a search space is checked against it before anything runs.

Open MPI lists every MCA parameter with its type, default and (for enumerations) its values in
``ompi_info --param all all --level 9 --parsable``; coll_tuned registers its per-collective
algorithm parameters only when its dynamic rules are on, so they are asked for with
``OMPI_MCA_coll_tuned_use_dynamic_rules=1``. NCCL and UCX read their environment variables
themselves and reject an unknown value only when they start, so an environment axis is checked
for its library's prefix here and a value it rejects fails its trial, named.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabbench.errors import UsageError
from fabbench.fabrics.profile import Axis

# the environment an axis of each primitive may set: its library's own variables
ENV_PREFIXES = {"mpi": ("OMPI_", "UCX_", "FI_", "PSM2_"), "nccl": ("NCCL_",),
                "gloo": ("GLOO_", "TORCH_GLOO_")}
_INTEGER = ("int", "unsigned_int", "long", "unsigned_long", "size_t", "int64_t", "uint64_t")
_BOOL = ("0", "1", "true", "false")


@dataclass(frozen=True)
class Param:
    """One MCA parameter as ompi_info lists it."""

    name: str
    type: str = "string"
    default: str = ""
    values: Mapping[str, str] = field(default_factory=dict)  # enumerator: value -> name

    def refuses(self, value: str) -> str | None:
        """Why Open MPI would not take ``value``, or None."""
        if self.values:
            if value in self.values or value in self.values.values():
                return None
            known = ", ".join(f"{v} ({n})" for v, n in self.values.items())
            return f"not one of its values: {known}"
        if self.type == "bool":
            return None if value.lower() in _BOOL else "not a boolean (0, 1, true, false)"
        if self.type in _INTEGER:
            try:
                number = int(value)
            except ValueError:
                return f"not an integer ({self.type})"
            if number < 0 and (self.type.startswith("unsigned") or self.type == "size_t"):
                return f"negative, and it is {self.type}"
        return None


def parse_ompi_info(text: str) -> dict[str, Param]:
    """The parameters of ``ompi_info --parsable`` output."""
    found: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) < 7 or parts[0] != "mca" or parts[3] != "param":
            continue
        name, what = parts[4], parts[5]
        entry = found.setdefault(name, {"values": {}})
        if what == "value" and len(parts) >= 7:
            entry["default"] = ":".join(parts[6:])
        elif what == "type":
            entry["type"] = parts[6]
        elif what == "enumerator" and len(parts) >= 9 and parts[6] == "value":
            entry["values"][parts[7]] = parts[8]
    return {name: Param(name=name, type=e.get("type", "string"), default=e.get("default", ""),
                        values=e["values"]) for name, e in found.items()}


def ompi_params() -> dict[str, Param]:
    """Every MCA parameter of the Open MPI on PATH (UsageError when there is none)."""
    tool = shutil.which("ompi_info")
    if tool is None:
        raise UsageError("tuning Open MPI needs ompi_info on PATH (it lists the parameters a "
                         "search space may change)")
    env = {**os.environ, "OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}
    try:
        p = subprocess.run([tool, "--param", "all", "all", "--level", "9", "--parsable"],
                           capture_output=True, text=True, timeout=120, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise UsageError("ompi_info did not answer within 120 s") from None
    if p.returncode != 0:
        raise UsageError(f"ompi_info failed (exit {p.returncode}): "
                         f"{(p.stderr or p.stdout).strip()[-300:]}")
    return parse_ompi_info(p.stdout)


def check_space(axes: Sequence[Axis], primitive: str, where: str,
                params: Mapping[str, Param] | None) -> None:
    """UsageError, one line, for the first axis the library would not take: an MCA parameter
    Open MPI does not have, a value it refuses, an environment variable of another library."""
    for axis in axes:
        at = f"{where}: tune {axis.name}"
        if axis.kind == "mca":
            if primitive not in ("mpi", "horovod"):
                raise UsageError(f"{at}: an MCA parameter tunes Open MPI, not {primitive}")
            assert params is not None
            segment = (axis.segment_key,) if axis.segment_key else ()
            for key in (axis.key, *axis.needs_mca, *segment):
                if key not in params:
                    raise UsageError(f"{at}: Open MPI has no MCA parameter {key!r} "
                                     "(ompi_info --param all all --level 9 lists them)")
            for value in axis.values:
                for key, setting in axis.settings_of(value).items():
                    why = params[key].refuses(setting)
                    if why is not None:
                        shown = setting if key == axis.key else f"{setting} for {key}"
                        raise UsageError(f"{at}: Open MPI refuses {shown!r}: {why}")
        else:
            prefixes = ENV_PREFIXES.get("mpi" if primitive == "horovod" else primitive, ())
            if not axis.key.startswith(prefixes):
                raise UsageError(f"{at}: {axis.key} is not a setting of {primitive} (its "
                                 f"variables start with {', '.join(prefixes) or 'nothing'})")
