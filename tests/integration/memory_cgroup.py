"""A command run under a memory limit as a pod's container is: in a memory cgroup of its own (a
child of the cgroup this test process runs in), the limit its hard limit, no swap, the kernel's
OOM killer ending a process that would go past it; then what the cgroup counted (OOM kills, its
peak usage) and what the command's processes held (wait4's peak RSS of the largest). cgroup v2
(memory.max, memory.swap.max, memory.events, memory.peak) or the v1 memory controller
(memory.limit_in_bytes, memory.memsw.limit_in_bytes, memory.oom_control,
memory.max_usage_in_bytes), whichever holds this process's memory controller. The cgroup is
removed on leaving, after a failure too; the command's processes are ended by their process
group at its deadline. Needs root."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path


class NoMemoryCgroup(Exception):
    """No memory cgroup can be made here (the reason)."""


@dataclass(frozen=True)
class Ran:
    """A command's end: exit code (a signal: 128 + its number), output, seconds, whether its
    deadline ended it, the peak RSS of its largest process in bytes, and what the cgroup
    counted."""

    code: int
    out: str
    err: str
    seconds: float
    timed_out: bool
    max_rss: int
    oom_kills: int
    peak: int | None  # the cgroup's peak usage in bytes, page cache included (None: not kept)


def _mounts() -> list[tuple[str, str, str, str]]:
    """(root, mount point, fstype, super options) of each mount of /proc/self/mountinfo."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mine, _, theirs = line.partition(" - ")
        fields, (fstype, _source, options) = mine.split(), theirs.split()[:3]
        out.append((fields[3], fields[4], fstype, options))
    return out


def _own_memory_cgroup() -> tuple[Path, int]:
    """The directory of the cgroup this process's memory is counted in, and the version."""
    mounts = _mounts()
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        v2 = hierarchy == "0" and not controllers
        if not v2 and "memory" not in controllers.split(","):
            continue
        for root, point, fstype, options in mounts:
            if (fstype == "cgroup2") != v2 or not (v2 or "memory" in options.split(",")):
                continue
            if path != root and not path.startswith(root.rstrip("/") + "/"):
                continue
            where = Path(point) / os.path.relpath(path, root)
            if v2 and "memory" not in (where / "cgroup.controllers").read_text().split():
                continue
            return where, 2 if v2 else 1
    raise NoMemoryCgroup("this process's cgroup has no memory controller (/proc/self/cgroup)")


@contextmanager
def memory_cgroup(limit: int, name: str) -> Iterator[Path]:
    """A fresh child of this process's memory cgroup whose memory limit is ``limit`` bytes,
    swap none; removed on leaving (its processes must have ended)."""
    parent, version = _own_memory_cgroup()
    if version == 2 and "memory" not in (parent / "cgroup.subtree_control").read_text().split():
        try:
            (parent / "cgroup.subtree_control").write_text("+memory")
        except OSError as exc:  # EBUSY: the cgroup holds processes (cgroup v2's rule)
            raise NoMemoryCgroup(f"cannot give the children of {parent} the memory controller: "
                                 f"{exc.strerror}") from None
    where = parent / f"{name}-{os.getpid()}"
    try:
        where.mkdir()
    except OSError as exc:
        raise NoMemoryCgroup(f"cannot make a cgroup under {parent}: {exc.strerror}") from None
    try:
        if version == 2:
            (where / "memory.max").write_text(str(limit))
            if (where / "memory.swap.max").exists():
                (where / "memory.swap.max").write_text("0")
        else:
            (where / "memory.limit_in_bytes").write_text(str(limit))
            if (where / "memory.memsw.limit_in_bytes").exists():  # memory and swap together
                (where / "memory.memsw.limit_in_bytes").write_text(str(limit))
        yield where
    finally:
        _remove(where)


def _remove(where: Path, deadline_s: float = 30.0) -> None:
    """rmdir the cgroup once its processes (the command's, ended already) have left it."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            where.rmdir()
            return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


def _counted(where: Path) -> tuple[int, int | None]:
    """OOM kills and peak usage the cgroup counted."""
    if (where / "memory.events").exists():  # v2
        events = dict(line.split() for line in (where / "memory.events").read_text().splitlines())
        peak = where / "memory.peak"
        return int(events.get("oom_kill", 0)), int(peak.read_text()) if peak.exists() else None
    control = dict(line.split() for line in (where / "memory.oom_control").read_text().splitlines())
    if "oom_kill" not in control:  # kernels before 4.13
        raise NoMemoryCgroup(f"{where}/memory.oom_control does not count OOM kills")
    return int(control["oom_kill"]), int((where / "memory.max_usage_in_bytes").read_text())


def run_limited(argv: Sequence[str], env: Mapping[str, str], limit: int, *, cwd: Path,
                deadline_s: float, name: str = "fabbench-test") -> Ran:
    """Run ``argv`` in a fresh memory cgroup of ``limit`` bytes: a shell joins the cgroup and
    execs it, so nothing of it runs outside. Past ``deadline_s`` its process group is killed."""
    with memory_cgroup(limit, name) as where:
        join = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(where / "cgroup.procs"),
                *argv]
        out, err = cwd / f"{name}.out", cwd / f"{name}.err"
        start = time.monotonic()
        with out.open("w") as stdout, err.open("w") as stderr:
            proc = subprocess.Popen(join, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                    env=dict(env), cwd=cwd, start_new_session=True)
        try:
            status, usage, timed_out = _wait(proc.pid, start + deadline_s)
        finally:
            _end_group(proc.pid, where)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - start
        oom_kills, peak = _counted(where)
    code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    return Ran(code=code, out=out.read_text(), err=err.read_text(), seconds=seconds,
               timed_out=timed_out, max_rss=usage.ru_maxrss * 1024, oom_kills=oom_kills,
               peak=peak)


def _wait(pid: int, end: float) -> tuple[int, resource.struct_rusage, bool]:
    """wait4 until the process ends or ``end`` (monotonic) passes, then SIGKILL its group: its
    status, its usage, whether the deadline ended it."""
    while time.monotonic() < end:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, usage, False
        time.sleep(0.05)
    os.killpg(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    return status, usage, True


def _end_group(pgid: int, where: Path) -> None:
    """The command's processes that outlive it (its group, then any left in its cgroup: all
    started by it) killed, so that the cgroup can go."""
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    for pid in (where / "cgroup.procs").read_text().split():
        with suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
