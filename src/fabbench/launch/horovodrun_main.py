"""`python -m fabbench.launch.horovodrun_main ARGS` is `horovodrun ARGS` (Horovod's launcher, in
this process) with two differences. A failed rank, or an exception in one of horovodrun's
threads, is one line in Horovod's words and horovodrun's exit code (1), not a traceback of its
frames. And SIGTERM always stops the ranks: the signal handlers do nothing but wake a thread of
its own (through Python's wakeup fd, whichever thread the kernel gave the signal to), which sets
horovodrun's shutdown event (_shutdown_event, in place of gloo_run.register_shutdown_event); a
handler that sets the event itself can deadlock on the event's lock when a second signal lands
inside it, and runs only once the ranks end when the signal reaches another thread."""

from __future__ import annotations

import os
import signal
import sys
import threading

SHUTDOWN = (signal.SIGTERM, signal.SIGINT)  # those horovodrun --gloo stops its ranks on


def _thread_failed(args: threading.ExceptHookArgs) -> None:
    name = args.thread.name if args.thread is not None else "a thread"
    print(f"horovodrun: warning: {name}: {args.exc_type.__name__}: {args.exc_value}",
          file=sys.stderr, flush=True)


def _shutdown_event() -> threading.Event:
    """gloo_run.register_shutdown_event's event (called from the main thread), set on SIGINT or
    SIGTERM whichever thread the kernel hands it to, by a thread of its own that reads the
    signals from Python's wakeup fd (written by the C-level handler in the thread that took
    the signal). The Python-level handlers do nothing: they take no lock, so they may run
    anywhere, even inside themselves."""
    event = threading.Event()
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)

    def setter() -> None:
        while got := os.read(r, 64):
            if set(got) & set(SHUTDOWN):
                event.set()
                return

    threading.Thread(target=setter, name="fabbench-shutdown", daemon=True).start()
    for signum in SHUTDOWN:
        signal.signal(signum, _noted)
    return event


def _noted(_signum: int, _frame: object) -> None:
    """A signal of SHUTDOWN: the wakeup fd has it already."""


def main() -> int:
    from horovod.runner import gloo_run
    from horovod.runner.launch import run_commandline

    gloo_run.register_shutdown_event = _shutdown_event
    sys.argv[0] = "horovodrun"
    threading.excepthook = _thread_failed
    try:
        run_commandline()
    except RuntimeError as exc:
        print(f"horovodrun: error: {' '.join(str(exc).split())}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
