"""The watchdog ends a stuck process in bounded time, and only then."""

import subprocess
import sys
import time

SCRIPT = """
import time
from fabbench.timing.deadline import Watchdog
dog = Watchdog(3, lambda what, msg: print("expired:", what, flush=True))
{body}
print("survived", flush=True)
"""


def run(body: str) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-c", SCRIPT.format(body=body)], capture_output=True,
                       text=True, timeout=60)
    return p, time.monotonic() - start


def test_expiry_ends_the_process_naming_what_it_waited_for():
    p, elapsed = run('dog.arm(0.3, "allreduce of 8 bytes")\ntime.sleep(30)')
    assert p.returncode == 124
    assert elapsed < 10
    assert "expired: allreduce of 8 bytes (deadline 0.3 s)" in p.stdout
    assert "rank 3: timed out in allreduce of 8 bytes" in p.stderr
    assert "survived" not in p.stdout


def test_rearming_later_and_disarming_do_not_fire():
    body = ("for _ in range(20):\n    dog.arm(0.5, 'sample')\n    time.sleep(0.05)\n"
            "dog.disarm()\ntime.sleep(1.0)\ndog.close()")
    p, _ = run(body)
    assert p.returncode == 0 and "survived" in p.stdout and "expired" not in p.stdout


def test_an_earlier_deadline_wakes_the_watcher():
    p, elapsed = run('dog.arm(60, "long")\ntime.sleep(0.1)\ndog.arm(0.2, "short")\n'
                     'time.sleep(30)')
    assert p.returncode == 124 and "expired: short" in p.stdout
    assert elapsed < 10
