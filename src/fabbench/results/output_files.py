"""Every file a command writes at a path its user named goes through here: fabbench never
overwrites a file, except its own Prometheus textfile (docs/cli.md).

``check`` refuses, before any work, a path that exists (a directory, a file, a link, even a
dangling one), that is one of the command's inputs (the same file by resolved path or inode: a
symlink or hard link to it), that lies in an input directory among the files the command reads
there, whose folder does not exist or cannot be written (a file is made there and removed, as
the write will), or that holds a control character. ``write`` puts the bytes in a temporary
file beside the target and publishes it with a hard link, which fails on a file that appeared
meanwhile: the target is never clobbered, and never half-written. A file the caller marks as
its own kind (``own``: its first line) is replaced atomically (rename over it) instead, when it
is not one of the inputs. Every refusal is a UsageError: the user named the path (exit 2).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fabbench.errors import UsageError
from fabbench.value_rules import has_control

NEVER = "fabbench never overwrites a file"
RENEWED = "\0"  # Output.own of renew(): replaced whatever it holds
READS = "*.jsonl"  # the files a command reads from a directory it is given (results.runs.expand)


@dataclass(frozen=True)
class Output:
    """A checked output: the option that named it, its path, and the first line that marks a
    file fabbench may replace there (None: none may be)."""

    flag: str
    path: Path
    own: str | None = None

    def cannot(self, why: str) -> UsageError:
        return UsageError(f"cannot write {self.flag} {self.path}: {why}")


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _inside(path: Path, folder: Path) -> bool:
    where, top = os.path.realpath(path), os.path.realpath(folder)
    return where.startswith(top.rstrip("/") + "/")


def input_of(path: Path, inputs: Iterable[str | Path], reads: str = READS) -> Path | None:
    """The input ``path`` is (or, for a directory input, would be read from), if any."""
    for given in map(Path, inputs):
        if given.is_dir():
            if _inside(path, given) and fnmatch.fnmatch(path.name, reads):
                return given
        elif _same(path, given):
            return given
    return None


def is_own(path: Path, own: str | None) -> bool:
    """A regular file (not a link) whose first line is ``own``: one fabbench wrote itself."""
    if own is None:
        return False
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return False
        with open(path, "rb") as f:
            return f.read(len(own) + 1) == (own + "\n").encode()
    except OSError:
        return False


def _probe(out: Output) -> None:
    """Make (and remove) a file in the target's folder: what the write will do."""
    folder = out.path.parent
    if not folder.is_dir():
        raise out.cannot(f"no folder {folder}" if not os.path.lexists(folder) else
                         f"{folder} is not a folder")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.path.name[:64]}.", dir=folder)
    except OSError as exc:
        raise out.cannot(exc.strerror or str(exc)) from None
    os.close(fd)
    os.unlink(tmp)


def check(flag: str, path: str | Path, inputs: Iterable[str | Path] = (), *,
          own: str | None = None, reads: str = READS) -> Output:
    """``path`` as a new output of option ``flag``, refused (UsageError) as the module says."""
    out = Output(flag, Path(path), own)
    check_name(flag, path)
    found = input_of(out.path, inputs, reads)
    if found is not None:
        if _same(out.path, found):
            raise UsageError(f"{flag} {out.path} is one of the inputs: {NEVER}")
        raise UsageError(f"{flag} {out.path} is in the input directory {found}, whose "
                         f"{reads} files the command reads: give a path outside it")
    if os.path.lexists(out.path):
        if out.path.is_dir():
            raise UsageError(f"{flag} {out.path} is a directory: give a new file's name")
        if not is_own(out.path, own):
            raise UsageError(f"{flag} {out.path} exists: {NEVER}; give a new name")
    _probe(out)
    return out


def check_folder(flag: str, path: str | Path) -> Output:
    """A folder to write new files into (``into``), made when missing: refused when it is not a
    folder, or cannot be made or written; each file in it is refused when it exists."""
    out = Output(flag, Path(path))
    check_name(flag, path)
    if os.path.lexists(out.path):
        if not out.path.is_dir():
            raise UsageError(f"{flag} {out.path} is not a folder: {NEVER}")
        _probe(into(out, "new"))
    else:
        _probe(out)
    return out


def into(folder: Output, name: str) -> Output:
    """A file in a checked folder."""
    return Output(folder.flag, folder.path / name)


def check_name(flag: str, path: str | Path) -> None:
    if not str(path) or has_control(str(path)):
        raise UsageError(f"{flag} {str(path)!r}: not a file name (empty, or a control "
                         "character in it)")


def check_all(outputs: Sequence[tuple[str, str | Path | None]],
              inputs: Iterable[str | Path] = (), own: Mapping[str, str] | None = None
              ) -> list[Output]:
    """``check`` of every (flag, path) given (a None path: not asked for), each against the
    inputs and against the others (two options naming one file); ``own``: the first line of
    the files an option may replace, by option."""
    inputs = list(inputs)
    checked: list[Output] = []
    for flag, path in outputs:
        if path is None:
            continue
        for other in checked:
            if os.path.realpath(other.path) == os.path.realpath(path):
                raise UsageError(f"{flag} {path} is {other.flag} too: give each its own file")
        checked.append(check(flag, path, inputs, own=(own or {}).get(flag)))
    return checked


def write(out: Output, data: str | bytes) -> Path:
    """Publish ``data`` at the checked output: whole or not at all, never over a file (but
    fabbench's own, replaced atomically)."""
    body = data.encode() if isinstance(data, str) else data
    folder = out.path.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.path.name[:64]}.", dir=folder)
    except OSError as exc:
        raise out.cannot(exc.strerror or str(exc)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        _publish(out, tmp)
    except OSError as exc:
        raise out.cannot(exc.strerror or str(exc)) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return out.path


def renew(path: Path, data: str) -> Path:
    """A file fabbench keeps in a directory of its own and makes again each time (a study's
    report.html and report.json beside its study.json; no option names it), replaced whole."""
    return write(Output("to", path, own=RENEWED), data)


def _publish(out: Output, tmp: str) -> None:
    if out.own is RENEWED or is_own(out.path, out.own):
        os.replace(tmp, out.path)  # a reader sees the old file or the new, never half of one
        return
    try:
        os.link(tmp, out.path)  # fails on anything at the path: nothing is ever clobbered
    except FileExistsError:
        raise UsageError(f"{out.flag} {out.path} appeared while fabbench worked: "
                         f"{NEVER}") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        _copy_new(out, tmp)  # a file system without hard links: created new, or refused


def _copy_new(out: Output, tmp: str) -> None:
    try:
        fd = os.open(out.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    except FileExistsError:
        raise UsageError(f"{out.flag} {out.path} appeared while fabbench worked: "
                         f"{NEVER}") from None
    try:
        with os.fdopen(fd, "wb") as f, open(tmp, "rb") as src:
            f.write(src.read())
    except BaseException:
        os.unlink(out.path)
        raise


def write_all(pending: Sequence[tuple[Output, str | bytes]]) -> list[Path]:
    """Write several outputs, each checked again first (none written when one is refused); the
    folder of a file ``into`` a checked folder is made here."""
    for out, _ in pending:
        if os.path.lexists(out.path) and not is_own(out.path, out.own):
            raise UsageError(f"{out.flag} {out.path} exists: {NEVER}; give a new name")
    for out, _ in pending:
        try:
            out.path.parent.mkdir(exist_ok=True)
        except OSError as exc:
            raise out.cannot(exc.strerror or str(exc)) from None
    return [write(out, data) for out, data in pending]
