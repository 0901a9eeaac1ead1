"""launch/horovodrun_main.py: horovodrun --gloo's shutdown event, set on SIGTERM or SIGINT by a
thread that reads Python's wakeup fd. Horovod's own handler set the event itself: run again by a
second signal while inside Event.set, it waited for good on the lock it held; and a signal
another of horovodrun's threads took did not wake the main thread sleeping in a lock (the handler
ran only once the lock was released: the ranks' end)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from fabbench.launch.horovodrun_main import _shutdown_event


@pytest.fixture
def shutdown() -> Iterator[threading.Event]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    fd = signal.set_wakeup_fd(-1)
    try:
        yield _shutdown_event()
    finally:
        signal.set_wakeup_fd(fd)
        for s, h in saved.items():
            signal.signal(s, h)


def test_a_signal_another_thread_takes_sets_the_event_while_the_main_thread_waits(shutdown):
    set_at: list[float] = []
    watcher = threading.Thread(target=lambda: shutdown.wait(5) and set_at.append(time.monotonic()),
                               daemon=True)
    watcher.start()
    other = threading.Thread(target=time.sleep, args=(3,), daemon=True)
    other.start()
    blocked = threading.Lock()
    blocked.acquire()
    t0 = time.monotonic()
    signal.pthread_kill(other.ident, signal.SIGTERM)  # the kernel's choice, made here
    # the main thread asleep in a lock, as horovodrun's waits for its ranks: a signal another
    # thread took does not wake it, and Python would run a handler there only at 2 s
    blocked.acquire(timeout=2)
    watcher.join(5)
    assert set_at and set_at[0] - t0 < 1.0, \
        f"the event was set {set_at[0] - t0 if set_at else None} s into the wait, not at once"


def test_the_handlers_take_no_lock_so_a_signal_may_come_inside_another(shutdown):
    with shutdown._cond:  # held, as by a handler interrupted inside Event.set
        os.kill(os.getpid(), signal.SIGTERM)  # Horovod's handler would wait here for good
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
    assert shutdown.wait(5), "the event was not set"


def test_a_signal_of_another_kind_does_not_set_it(shutdown):
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)  # a Python handler: in the fd too
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        assert not shutdown.wait(0.5)
        os.kill(os.getpid(), signal.SIGTERM)
        assert shutdown.wait(5)
    finally:
        signal.signal(signal.SIGUSR1, previous)
