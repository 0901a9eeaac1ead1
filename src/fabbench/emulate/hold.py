"""The holder of a standing emulated cluster (`fabbench emulate up`): builds it, owns it (its
pid is in every object's name) and tears it down on SIGTERM, SIGINT or SIGHUP."""

from __future__ import annotations

import signal
import sys

from fabbench.emulate.session import emulated, emulation_from_json
from fabbench.errors import FabbenchError
from fabbench.procs import Terminated


def main(argv: list[str]) -> int:
    emulation = emulation_from_json(argv[0])
    try:
        with emulated(emulation, standing=True):
            while True:
                signal.pause()
    except (Terminated, KeyboardInterrupt):
        return 0
    except FabbenchError as exc:
        print(f"fabbench: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
