import math

import pytest

from fabbench.timing.stats import median_ci_halfwidth, percentile, summarize


def test_percentile_interpolates_like_numpy():
    import numpy as np

    values = sorted([3.0, 1.0, 4.0, 1.5, 9.0, 2.6])
    for q in (0, 10, 50, 90, 99, 100):
        assert percentile(values, q) == pytest.approx(np.percentile(values, q))


def test_summarize():
    s = summarize([4.0, 2.0, 3.0, 1.0, 5.0])
    assert (s["min"], s["p50"], s["mean"], s["max"]) == (1.0, 3.0, 3.0, 5.0)
    assert s["p99"] == pytest.approx(4.96)


def test_ci_needs_samples_and_shrinks_with_stability():
    assert math.isinf(median_ci_halfwidth([1.0] * 5))
    assert median_ci_halfwidth([1.0] * 20) == 0.0
    noisy = [1.0 + 0.1 * (i % 5) for i in range(40)]
    assert 0 < median_ci_halfwidth(noisy) < 0.2


def test_percentile_of_nothing_raises():
    with pytest.raises(ValueError):
        percentile([], 50)
