"""`fabbench emulate run`: a fabbench command on an emulated cluster, on the host or with its
ranks in an image, or a study whose every cell runs on such a cluster."""

from __future__ import annotations

import math
import sys

from fabbench.emulate import Emulation, session
from fabbench.emulate.site import Site
from fabbench.errors import UsageError
from fabbench.launch import containers
from fabbench.procs import Terminated


def run_command(emulation: Emulation, argv: list[str], max_time_s: float, *,
                image: str | None = None, runtime: str | None = None) -> int:
    """`fabbench emulate run`: ``argv`` (a fabbench command) on a cluster of ``emulation``'s
    shape, its ranks in ``image`` under ``runtime`` where given (both or neither), or a study
    each of whose cells runs on such a cluster. The command's exit code; 128 + the signal's
    number when one stopped it (the cluster removed)."""
    if not 0 < max_time_s < math.inf:  # NaN too: a deadline that never came
        raise UsageError(f"--max-time must be a number of seconds above 0, not {max_time_s:g}")
    if (image is None) != (runtime is None):
        raise UsageError("--image and --runtime go together, with `-- run ...` or "
                         "`-- study run ...`")
    if argv[:1] in (["up"], ["down"]):
        raise UsageError(f"the word goes first: `fabbench emulate {argv[0]} --nodes ...`")
    try:
        if argv[:1] == ["study"]:  # the study's cells each run on a cluster of this shape
            if emulation.ranks_per_node != 1:
                raise UsageError("--ranks-per-node: a study's cells set their own ranks per "
                                 "node")
            if image is not None and runtime is not None:
                containers.check_image(runtime, image)
            return session.run_study(Site(emulation=emulation, image=image, runtime=runtime),
                             argv, max_time_s)
        if image is None or runtime is None:
            return session.run_under(emulation, argv, max_time_s)
        return containers.run_in_image(emulation, runtime, image, argv, max_time_s)
    except Terminated as exc:  # torn down already; the shell's code for the signal
        print(f"fabbench: emulate: stopped by signal {exc.signum}; the cluster is removed",
              file=sys.stderr)
        return 128 + exc.signum
