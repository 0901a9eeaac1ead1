"""The replay's options: its section of the configuration (``RunConfig.replay``, the "Replay
workload" panel of `fabbench run --help`, a study's keys)."""

from __future__ import annotations

from dataclasses import dataclass

from fabbench.option_fields import INT, TEXT, at_least, option, validate

__all__ = ["REPLAY_MODES", "ReplayConfig"]

#: gaps: the recorded compute gaps kept (overlap as the job had it); back-to-back: the
#: operations alone, each completed before the next
REPLAY_MODES = ("gaps", "back-to-back")


@dataclass(frozen=True, kw_only=True)
class ReplayConfig:
    """``--workload replay``: a recorded job's communication, replayed (docs/replay.md)."""

    trace: str = option("", TEXT, "--trace", "The job's recorded communication, a "
                        "fabbench-trace/1 file (docs/replay.md), read when the run is planned "
                        "and by every rank (a path every node sees).", metavar="PATH")
    replay_mode: str = option(
        "gaps", TEXT, "--replay-mode", "gaps: each operation issued after the compute time "
        "the job spent before it (slept: the host's cores stay free for the library's threads, "
        "as a GPU job's are), asynchronous ones waited at the step's end, as DDP waits its "
        "buckets, then the step's compute after its last operation (the optimizer's); "
        "back-to-back: the operations alone, each completed before the next.",
        choices=REPLAY_MODES, refusal="{flag} takes {known}, not {value!r}", study="mode")
    replay_steps: int = option(10, INT, "--replay-steps", "Timed steps: the trace's steps in "
                               "turn, from its first, again from the first when they run out.",
                               check=at_least(1, "--replay-steps"))
    replay_warmup: int = option(2, INT, "--replay-warmup", "Steps replayed before the timed "
                                "ones (connections made, buffers touched).",
                                check=at_least(0, "--replay-warmup"))

    def __post_init__(self) -> None:
        validate(self)
