"""horovodrun as fabbench starts it: `python -m fabbench.launch.horovodrun ARGS` is `horovodrun
ARGS` (Horovod's own launcher, in this process), except for how it says that a rank failed:
horovodrun raises a RuntimeError for that, which Python prints as a traceback of horovodrun's
frames after the ranks' lines. Here the failure is one line in Horovod's words ("horovodrun:
error: Horovod detected that one or more processes exited with non-zero status ... Process name:
1 Exit code: 137") and the exit code horovodrun's own (1). So is an exception in one of its
threads (stopping the ranks, a thread may look for a child another one already ended:
psutil.NoSuchProcess).

And SIGTERM stops the ranks, always. horovodrun --gloo stops them from its signal handler, which
sets a threading.Event, and Python runs a handler in the main thread between two of its
bytecodes: a second signal that came while the first handler was inside Event.set ran the
handler again there, which waited for the Event's lock that the handler under it held, for good
(py-spy of a horovodrun the fault matrix's launcher-kill row left running: the main thread's
stack holds set_event_on_signal twice; the ranks measured on and wrote ok: true, and horovodrun
never ended). Here the handler takes no lock: it writes a byte to a pipe, and a thread of its
own sets the event (_shutdown_event, in place of gloo_run.register_shutdown_event). And a
signal the kernel hands to another of horovodrun's threads does not wake the main thread where
it waits for the ranks in a lock, so the handler would run only once they had ended:
relay_signals passes every signal on, through Python's wakeup fd, to a thread that calls the
handler itself."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable

RELAYED = (signal.SIGTERM, signal.SIGINT)  # those horovodrun --gloo handles (gloo_run.py)


def _thread_failed(args: threading.ExceptHookArgs) -> None:
    name = args.thread.name if args.thread is not None else "a thread"
    print(f"horovodrun: warning: {name}: {args.exc_type.__name__}: {args.exc_value}",
          file=sys.stderr, flush=True)


def _shutdown_event() -> threading.Event:
    """gloo_run.register_shutdown_event's event, set on SIGINT or SIGTERM by a handler that is
    safe to run anywhere, even inside itself: it only writes to a pipe, and a thread sets the
    event."""
    event = threading.Event()
    r, w = os.pipe()
    os.set_blocking(w, False)

    def setter() -> None:
        os.read(r, 1)  # the first signal's byte
        event.set()

    def on_signal(_signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):  # a full pipe: a byte is there already
            os.write(w, b"s")

    threading.Thread(target=setter, name="fabbench-shutdown", daemon=True).start()
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return event


def _until_replaced(signum: int, _frame: object) -> None:
    """SIGTERM before horovodrun has its handler: as the default action, the process ends."""
    os._exit(128 + signum)


def relay_signals() -> Callable[[], None]:
    """From the main thread: each signal a Python handler takes is written to a pipe (Python's
    wakeup fd, from whichever thread took it), and a thread reading it calls the handler of
    SIGTERM and SIGINT at once (horovodrun's sets an event; called again by the main thread
    later, it writes one byte more). Until horovodrun installs its own, SIGTERM ends the process
    as its default action would. Returns what undoes it (tests)."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    previous = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _until_replaced)

    def relay() -> None:
        while True:
            try:
                got = os.read(r, 64)
            except OSError:
                got = b""
            if not got:
                os.close(r)
                return
            for signum in set(got) & set(RELAYED):
                handler = signal.getsignal(signum)
                if callable(handler) and handler is not signal.default_int_handler:
                    with contextlib.suppress(Exception):
                        handler(signum, None)

    threading.Thread(target=relay, name="fabbench-signal-relay", daemon=True).start()

    def undo() -> None:
        signal.set_wakeup_fd(previous)
        os.close(w)  # the relay reads the end of the pipe and returns
    return undo


def main() -> int:
    from horovod.runner import gloo_run
    from horovod.runner.launch import run_commandline

    gloo_run.register_shutdown_event = _shutdown_event
    sys.argv[0] = "horovodrun"
    threading.excepthook = _thread_failed
    relay_signals()
    try:
        run_commandline()
    except RuntimeError as exc:
        print(f"horovodrun: error: {' '.join(str(exc).split())}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
