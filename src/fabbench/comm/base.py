"""The interface every primitive implements, and what they share."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np


class Communicator(ABC):
    """A group of ranks that can run the six collectives on buffers it allocates.

    Buffers are opaque to callers: ``array`` places host data where the primitive works (host
    memory, or GPU memory for CUDA-aware MPI and NCCL) and ``host`` brings it back.
    """

    name: str = ""
    rank: int = 0
    size: int = 1
    device: str = "cpu"
    in_place_reduce: bool = False  # reduces into the receive buffer (torch, horovod)

    @abstractmethod
    def array(self, host: np.ndarray, dtype: str) -> Any: ...

    @abstractmethod
    def host(self, buf: Any) -> np.ndarray: ...

    @abstractmethod
    def bind(self, op: str, send: Any, recv: Any) -> Callable[[], None]:
        """One operation with its buffers bound, ready to be called back to back."""

    @abstractmethod
    def synchronize(self) -> None: ...

    @abstractmethod
    def barrier(self) -> None: ...

    @abstractmethod
    def max_scalar(self, value: float) -> float: ...

    @abstractmethod
    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's object, on every rank (small metadata only)."""

    @abstractmethod
    def transport(self) -> str:
        """What carried the bytes, as the library itself reports it."""

    def close(self) -> None:  # noqa: B027 - optional
        pass


@contextlib.contextmanager
def captured_stderr() -> Iterator[list[str]]:
    """Capture what the process (C libraries included) writes to fd 2 inside the block.

    Yields a list that holds the captured text after the block. If the block raises, the text is
    written back to stderr so that the library's own error message is not lost.
    """
    holder: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield holder
        except BaseException:
            _restore(saved, tmp, holder)
            sys.stderr.write(holder[0])
            raise
        _restore(saved, tmp, holder)


def _restore(saved: int, tmp: Any, holder: list[str]) -> None:
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    tmp.seek(0)
    holder.append(tmp.read().decode(errors="replace"))


def np_dtype(dtype: str) -> np.dtype:
    return np.dtype({"float32": np.float32, "float64": np.float64, "float16": np.float16}[dtype])
