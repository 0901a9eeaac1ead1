"""launch/horovodrun.py: horovodrun --gloo's shutdown event set by a handler that takes no lock
(Horovod's own, run again by a second signal while inside Event.set, waited for good on the lock
it held), and the relay: a SIGTERM the kernel hands to any of horovodrun's threads still reaches
the handler while the main thread sleeps in a lock (where Python would run the handler only once
the lock is released: the ranks' end)."""

from __future__ import annotations

import signal
import threading
import time

from fabbench.launch.horovodrun import _shutdown_event, relay_signals


def test_a_signal_another_thread_takes_reaches_the_handler_while_the_main_thread_waits():
    called: list[float] = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: called.append(time.monotonic()))
    undo = relay_signals()
    try:
        other = threading.Thread(target=time.sleep, args=(3,), daemon=True)
        other.start()
        blocked = threading.Lock()
        blocked.acquire()
        t0 = time.monotonic()
        signal.pthread_kill(other.ident, signal.SIGTERM)  # the kernel's choice, made here
        # the main thread asleep in a lock, as horovodrun's waits for its ranks: a signal
        # another thread took does not wake it (Python would run the handler at 2 s, once the
        # lock gives up), so a call within the wait is the relay's
        blocked.acquire(timeout=2)
        assert called and called[0] - t0 < 1.0, \
            f"the handler ran {called[0] - t0 if called else None} s into the wait, not at once"
    finally:
        undo()
        signal.signal(signal.SIGTERM, before)


def test_until_horovod_has_its_handler_sigterm_stays_fatal():
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    undo = relay_signals()
    try:
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler) and handler.__name__ == "_until_replaced"
    finally:
        undo()
        signal.signal(signal.SIGTERM, before)


def test_the_shutdown_handler_takes_no_lock_so_it_may_run_inside_itself():
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        event = _shutdown_event()
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler) and signal.getsignal(signal.SIGINT) is handler
        with event._cond:  # held, as by a first handler interrupted inside Event.set
            handler(signal.SIGTERM, None)  # Horovod's would wait here for good
            handler(signal.SIGINT, None)
        assert event.wait(5), "the event was not set"
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
