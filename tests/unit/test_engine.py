"""The timing engine on a real one-rank group (every collective of one rank is local)."""

import time

import pytest

from fabbench.errors import UsageError
from fabbench.timing.engine import TimingPolicy, measure


class OneRank:
    def __init__(self):
        self.barriers = 0

    def barrier(self):
        self.barriers += 1

    def synchronize(self):
        pass

    def max_scalar(self, value):
        return value


def test_budget_and_samples_bounds():
    calls = []
    policy = TimingPolicy(budget_s=0.02, min_samples=5, max_samples=50)
    m = measure(lambda: calls.append(1), OneRank(), policy, lambda s, w: None, 5.0, "noop")
    assert 5 <= len(m.samples_us) <= 50
    assert len(calls) == m.iters + m.warmup
    assert all(s > 0 for s in m.samples_us)


def test_slow_op_takes_min_samples_of_batch_one():
    policy = TimingPolicy(budget_s=0.001, min_samples=3, max_samples=10)
    m = measure(lambda: time.sleep(0.002), OneRank(), policy, lambda s, w: None, 5.0, "sleep")
    assert m.batch == 1 and len(m.samples_us) == 3
    assert min(m.samples_us) >= 2000


def test_every_blocking_stretch_is_armed():
    armed = []
    measure(lambda: None, OneRank(), TimingPolicy(budget_s=0.001), lambda s, w: armed.append(w),
            5.0, "allreduce of 8 bytes")
    assert armed[0].endswith("(first call)") and armed[1].endswith("(warm-up)")
    assert all(w.startswith("allreduce of 8 bytes") for w in armed)


@pytest.mark.parametrize("kwargs", [{"budget_s": 0}, {"min_samples": 0},
                                    {"min_samples": 10, "max_samples": 5}, {"max_batch": 0}])
def test_bad_policy(kwargs):
    with pytest.raises(UsageError):
        TimingPolicy(**kwargs)
