"""Running and stopping what fabbench starts: a child is started in its own session (its own
process group), so that it and everything it starts in turn (mpirun's ranks, a launcher's
children) go with one signal to the group; a short-lived tool is run through `run_tool`."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass


def stop_groups(procs: Sequence[subprocess.Popen[str] | subprocess.Popen[bytes] | None],
                first: int = signal.SIGTERM, grace_s: float = 5.0,
                kill_grace_s: float = 5.0) -> None:
    """Signal each live process's group with ``first``; SIGKILL the groups of those still alive
    after ``grace_s``. Returns when all have ended or ``kill_grace_s`` more has passed."""
    for sig, grace in ((first, grace_s), (signal.SIGKILL, kill_grace_s)):
        alive = [p for p in procs if p is not None and p.poll() is None]
        if not alive:
            return
        for p in alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, sig)
        end = time.monotonic() + grace
        for p in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.0, end - time.monotonic()))


def wait_group(proc: subprocess.Popen[str] | subprocess.Popen[bytes], timeout_s: float,
               grace_s: float = 5.0) -> int | None:
    """Wait for ``proc``, started in a session of its own, up to ``timeout_s``: its exit code,
    or None when it ran past (its group stopped). Interrupted (Ctrl-C, or SIGTERM/SIGHUP as
    Terminated), its group gets that signal and the exception goes on; whatever it left in
    its group is stopped on the way out, whichever way that is."""
    try:
        with signals_unwind():
            return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    except KeyboardInterrupt:
        stop_groups([proc], signal.SIGINT, grace_s)
        raise
    except Terminated as exc:
        stop_groups([proc], exc.signum, grace_s)
        raise
    finally:
        stop_groups([proc], signal.SIGTERM, grace_s)


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def dies_with_this_process(sig: int = signal.SIGTERM, parent: int | None = None
                           ) -> Callable[[], None]:
    """A Popen ``preexec_fn``: the child gets ``sig`` when this process (``parent``: that one)
    ends, however it ends (SIGKILL too, when no `finally` of ours runs), through Linux's
    PR_SET_PDEATHSIG, which survives the child's exec (of a program that is not set-uid).
    Strictly, when the thread that started the child ends: start it from a thread that outlives
    it (the launcher's waits)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the forked child
    parent = os.getpid() if parent is None else parent

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # this process ended before the line above
            os.kill(os.getpid(), sig)

    return arm


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """This process gets ``sig`` when its parent ends (at once if it has already ended): a rank
    whose launcher's session on its node (the shell horovodrun's ssh runs it in) is killed."""
    dies_with_this_process(sig, parent=os.getppid())()


def marked(name: str, value: str, *, prefix: bool = False) -> list[tuple[int, str]]:
    """Every process but this one whose environment holds ``name=value`` (``prefix``: a value
    that starts with ``value``), as (pid, comm)."""
    needle = b"\0" + f"{name}={value}".encode() + (b"" if prefix else b"\0")
    found: list[tuple[int, str]] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                env = b"\0" + f.read()
            if needle not in (env if env.endswith(b"\0") else env + b"\0"):
                continue
            with open(f"/proc/{entry.name}/comm") as f:
                found.append((int(entry.name), f.read().strip()))
        except OSError:  # gone meanwhile, or a zombie
            continue
    return found


def stop_marked(name: str, value: str, grace_s: float = 5.0) -> list[str]:
    """SIGKILL every process but this one whose environment holds ``name=value`` (a run's own
    marker, which its launcher gives every rank and daemon it starts, on any node of this host,
    in a container or a namespace), and wait up to ``grace_s`` for them to be gone. Returns what
    was stopped, "comm (pid N)" each: the processes a run left behind."""
    found = marked(name, value)
    for pid, _ in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + grace_s
    while time.monotonic() < end and any(_running(pid) for pid, _ in found):
        time.sleep(0.05)
    return [f"{comm} (pid {pid})" for pid, comm in found]


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


class Terminated(BaseException):
    """SIGTERM (or SIGHUP) arrived: unwind and tear down."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def signals_unwind() -> Iterator[None]:
    """SIGTERM/SIGHUP raise Terminated (SIGINT already raises KeyboardInterrupt), so every
    `finally` runs. Only the main thread can take signals: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    saved = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Within: SIGTERM/SIGHUP, where signals_unwind would raise Terminated, are held until the
    end, so that what runs here (a rank's summary, written on its way out) is not cut short by
    a signal that came while it unwound from another failure. On leaving, a signal held raises
    Terminated, unless an exception is already on its way out (the process is ending anyway).
    A signal with its default action (no handler of Python's) is left as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, _frame: object) -> None:
        held.append(signum)

    saved = {s: signal.signal(s, hold) for s in (signal.SIGTERM, signal.SIGHUP)
             if callable(signal.getsignal(s))}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
        if held and sys.exc_info()[1] is None:
            raise Terminated(held[0])


@dataclass(frozen=True)
class ToolRun:
    """One run of a short-lived tool: its exit status and what it wrote, or why it has none."""

    argv: tuple[str, ...]
    returncode: int | None  # None: it timed out or could not be started (see `problem`)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    problem: str = ""  # when returncode is None: the OS's or subprocess's own words

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_tool(argv: Sequence[str], timeout_s: float, *, env: Mapping[str, str] | None = None,
             input: str | None = None) -> ToolRun | None:
    """Run a tool to its end, its text captured; None when the program is not on PATH (``env``'s
    PATH when given). It runs in its own process group, and past ``timeout_s`` the whole group
    is killed and the run comes back ``timed_out`` (as is the group when fabbench itself is
    interrupted meanwhile; the exception goes on). A non-zero exit is a result, not an error."""
    args = tuple(argv)
    path = None if env is None else env.get("PATH", os.defpath)
    if shutil.which(args[0], path=path) is None:
        return None
    try:
        proc = subprocess.Popen(list(args), stdin=None if input is None else subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=None if env is None else dict(env), start_new_session=True)
    except OSError as exc:
        return ToolRun(args, None, problem=str(exc))
    with proc:
        try:
            out, err = proc.communicate(input, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            stop_groups([proc], signal.SIGKILL)
            return ToolRun(args, None, timed_out=True, problem=str(exc))
        except BaseException:
            stop_groups([proc], signal.SIGKILL)
            raise
    return ToolRun(args, proc.returncode, out or "", err or "")
