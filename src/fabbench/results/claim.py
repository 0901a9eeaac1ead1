"""A results file claimed by one run at a time, atomically.

The claim is an exclusive ``flock`` on the file itself, held for the whole run: a second run on
the same path finds it held and is refused at once, whatever the timing (an existence check
before writing races: two runs both see no file and both write). The kernel drops the lock when
its holder dies, so a killed run leaves no stale claim; a file that already holds records is
refused too, unless the run appends on purpose (--resume).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from fabbench.errors import UsageError


class Claim:
    """An open, locked results file. ``fd`` appends; ``release`` unlocks (and removes the file
    when this claim created it and nothing was written)."""

    def __init__(self, path: Path, fd: int, created: bool) -> None:
        self.path, self.fd, self._created = path, fd, created

    def release(self) -> None:
        if self.fd < 0:
            return
        try:
            if self._created and os.fstat(self.fd).st_size == 0:
                # still ours while locked: a run that wrote nothing leaves no file behind
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
        finally:
            os.close(self.fd)  # closing drops the lock
            self.fd = -1


def claim(path: str | os.PathLike[str], *, append: bool = False) -> Claim:
    """Open PATH for appending under an exclusive lock. Refuses (UsageError) when another run
    holds it, or when it already holds records and ``append`` is False."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write results to {path}: {exc.strerror}") from None
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
            created = True
        except FileExistsError:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            except FileNotFoundError:
                continue  # removed in between by the claim that made it: try again
            except OSError as exc:
                raise UsageError(f"cannot write results to {path}: {exc.strerror}") from None
            created = False
        except OSError as exc:
            raise UsageError(f"cannot write results to {path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise UsageError(f"{path} is being written by another run; choose another "
                                 "--out (fabbench never mixes two runs in one file)") from None
            raise UsageError(f"cannot lock {path}: {exc.strerror}") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # unlinked by its previous holder after we opened it: start over
            os.close(fd)
            continue
        if not append and os.fstat(fd).st_size > 0:
            os.close(fd)
            raise UsageError(f"{path} already holds results; choose another --out "
                             "(fabbench never overwrites results)")
        return Claim(path, fd, created)
