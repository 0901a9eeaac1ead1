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
never ended). And a signal the kernel hands to another of horovodrun's threads does not wake
the main thread where it waits for the ranks in a lock, so the handler would run only once they
had ended. Here (_shutdown_event, in place of gloo_run.register_shutdown_event) the handlers do
nothing, and a thread of its own sets the event from what Python's wakeup fd says: the C-level
handler writes the signal there from whichever thread took it."""

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
