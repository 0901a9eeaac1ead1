"""`fabbench trace --out DIR -- COMMAND`: run a training job as it is, recording its
communication, and write DIR/trace.json (fabbench-trace/1) with each rank's raw files kept in
DIR/raw (et-R.json, kineto-R.json, groups-R.json; rank_hook says what each holds).

The job is not changed: COMMAND runs with a folder of fabbench's first on PYTHONPATH, holding a
``sitecustomize`` that installs rank_hook in every Python process of the job and then imports
the job's own ``sitecustomize``, if any. DIR must be new or empty: a trace is never
overwritten."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fabbench.errors import RunError, UsageError
from fabbench.procs import wait_group
from fabbench.trace import et, rank_hook
from fabbench.trace.document import Trace

TRACE = "trace.json"
RAW = "raw"
MAX_TIME_S = 6 * 3600.0  # --max-time's default, as `fabbench emulate run`'s
STOP_GRACE_S = 10.0  # a stopped job's ranks get this long to end before SIGKILL
_SITE = '''"""fabbench trace: record this process's communication (fabbench.trace.rank_hook), then
run the job's own sitecustomize, if it has one."""
import os as _os
import sys as _sys

_here = _os.path.dirname(_os.path.abspath(__file__))
try:
    import _fabbench_rank_hook
    _fabbench_rank_hook.install()
except Exception as _exc:  # the job runs on, unrecorded; the trace then lacks this rank
    print(f"fabbench trace: not recording this process: {_exc}", file=_sys.stderr)
_mine = _sys.modules.pop("sitecustomize", None)
_path = list(_sys.path)
_sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
try:
    import sitecustomize  # noqa: F401  (the job's own, if any)
except ImportError:
    if _mine is not None:
        _sys.modules["sitecustomize"] = _mine
finally:
    _sys.path[:] = _path
'''


@dataclass(frozen=True)
class Recording:
    """What a recording did: the command's exit code, and the trace written (None: none)."""

    code: int
    trace: Path | None
    warnings: tuple[str, ...] = ()
    summary: str = ""


def claim(out: Path) -> Path:
    """DIR, made (or found empty) for this recording; an existing trace refused."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} already exists and is not an empty directory: a trace is "
                         "never overwritten (choose a new --out)")
    try:
        (out / RAW).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write the trace to {out}: {exc.strerror}") from None
    return out


def record(out: Path, command: Sequence[str], steps: int = 0,
           max_time_s: float = MAX_TIME_S) -> Recording:
    """Run ``command`` recorded into ``out`` (claimed already), in a session of its own,
    stopped (its whole process group) at ``max_time_s`` or when this process is interrupted;
    combine its ranks' files."""
    if not 0 < max_time_s < math.inf:  # NaN too: a deadline that never comes
        raise UsageError(f"--max-time must be a number of seconds above 0, not {max_time_s:g}")
    if not command:
        raise UsageError("no command to record: fabbench trace --out DIR -- COMMAND ...")
    raw = (out / RAW).resolve()
    with tempfile.TemporaryDirectory(prefix="fabbench-trace-") as hook:
        shutil.copyfile(rank_hook.__file__, Path(hook) / "_fabbench_rank_hook.py")
        (Path(hook) / "sitecustomize.py").write_text(_SITE)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (hook, os.environ.get("PYTHONPATH", "")) if p)
        env[rank_hook.ENV_DIR] = str(raw)
        env[rank_hook.ENV_STEPS] = str(steps)
        try:
            proc = subprocess.Popen(list(command), env=env, start_new_session=True)
        except OSError as exc:
            _remove_empty(raw, out)
            raise UsageError(f"cannot run {command[0]}: {exc.strerror}") from None
        code = wait_group(proc, max_time_s, STOP_GRACE_S)
        if code is None:
            _remove_empty(raw, out)
            raise RunError(f"{' '.join(command)} ran past --max-time {max_time_s:g} s; "
                           "stopped it (its process group), no trace written")
    if code != 0 or not any(raw.iterdir()):
        _remove_empty(raw, out)
    if code != 0:
        return Recording(code=code, trace=None)
    if not raw.exists():
        raise UsageError(f"{' '.join(command)} ran, but no process of it started "
                         "torch.distributed (init_process_group): nothing to record")
    reading = et.read(et.files_in(raw), source={
        "recorder": "fabbench trace", "command": " ".join(command),
        "python": sys.version.split()[0]})
    reading.trace.write(out / TRACE)
    return Recording(code=0, trace=out / TRACE, warnings=reading.warnings,
                     summary=summary(reading.trace))


def _remove_empty(*folders: Path) -> None:
    """Nothing recorded: leave no empty directory behind (a folder that holds anything stays)."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def summary(trace: Trace) -> str:
    """One line on a trace: ranks, groups, steps, operations and bytes per step of rank 0."""
    steps = trace.ranks[0].steps
    ops = sum(len(s.ops) for s in steps)
    size = sum(o.bytes for s in steps for o in s.ops)
    return (f"{trace.world} ranks, {len(trace.groups)} process groups, {len(steps)} steps; "
            f"rank 0: {ops} operations, {size / 1e6:.3g} MB")
