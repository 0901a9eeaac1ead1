"""horovodrun as fabbench starts it: `python -m fabbench.launch.horovodrun ARGS` is `horovodrun
ARGS` (Horovod's own launcher, in this process), except for how it says that a rank failed:
horovodrun raises a RuntimeError for that, which Python prints as a traceback of horovodrun's
frames after the ranks' lines. Here the failure is one line in Horovod's words ("horovodrun:
error: Horovod detected that one or more processes exited with non-zero status ... Process name:
1 Exit code: 137") and the exit code horovodrun's own (1). So is an exception in one of its
threads (stopping the ranks, a thread may look for a child another one already ended:
psutil.NoSuchProcess)."""

from __future__ import annotations

import sys
import threading


def _thread_failed(args: threading.ExceptHookArgs) -> None:
    name = args.thread.name if args.thread is not None else "a thread"
    print(f"horovodrun: warning: {name}: {args.exc_type.__name__}: {args.exc_value}",
          file=sys.stderr, flush=True)


def main() -> int:
    from horovod.runner.launch import run_commandline

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
