"""α-β fits recover known parameters, report their quality, and refuse too few points."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from fabbench.errors import UsageError
from fabbench.scaling.costs import Params, busbw_gbyte_s, time_s
from fabbench.scaling.fit import fit_points, fit_records
from fabbench.workloads.collectives.record import Collective

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
SIZES = [8 * 4**k for k in range(12)]  # 8 B .. 32 MiB


def records(alpha, beta, op="allreduce", p=8, noise=0.0, seed=0, transport="ob1/tcp"):
    rng = np.random.default_rng(seed)
    alg = {"allreduce": "ring", "allgather": "ring", "broadcast": "chain"}[op]
    out = []
    for s in SIZES:
        t = time_s(op, alg, p, s, Params(alpha_s=alpha, beta_s_per_byte=beta))
        t *= 1 + noise * rng.standard_normal()
        out.append(Collective.read({"run_id": "r", "op": op, "bytes": s, "ranks": p,
                                    "transport": transport, "time_us": {"p50": t * 1e6},
                                    "busbw_gbyte_s": busbw_gbyte_s(op, p, s, t)}))
    return out


@pytest.mark.parametrize("op", ["allreduce", "allgather", "broadcast"])
def test_exact_data_recovers_alpha_and_beta(op):
    (fit,), skipped = fit_records(records(3e-6, 1 / 5e9, op=op))
    assert not skipped
    assert fit.alpha_s == pytest.approx(3e-6, rel=1e-6)
    assert fit.beta_s_per_byte == pytest.approx(1 / 5e9, rel=1e-6)
    assert fit.bandwidth_gbyte_s == pytest.approx(5.0, rel=1e-6)
    assert fit.rms_rel_err < 1e-9 and (fit.min_bytes, fit.max_bytes) == (8, SIZES[-1])
    assert fit.predict_s(1 << 20) == pytest.approx(
        time_s(op, fit.algorithm, 8, 1 << 20, fit.params))


def test_noisy_data_recovers_within_noise_and_reports_it():
    (fit,), _ = fit_records(records(10e-6, 1 / 2e9, noise=0.05, seed=3))
    assert fit.alpha_s == pytest.approx(10e-6, rel=0.1)
    assert fit.bandwidth_gbyte_s == pytest.approx(2.0, rel=0.1)
    assert 0.01 < fit.rms_rel_err < 0.1
    # 1/β is the asymptotic busbw: it matches the measured busbw at the largest size
    assert fit.bandwidth_gbyte_s == pytest.approx(fit.busbw_at_max_gbyte_s, rel=0.15)


def test_fit_is_weighted_by_relative_error():
    # one 32 MiB point 20% off must not swamp the 8-byte latency
    recs = records(5e-6, 1 / 10e9)
    object.__setattr__(recs[-1].time_us, "p50", recs[-1].time_us.p50 * 1.2)  # frozen: by force
    (fit,), _ = fit_records(recs)
    assert fit.alpha_s == pytest.approx(5e-6, rel=0.05)


def test_latency_only_sizes_leave_bandwidth_unresolved_and_nonnegative():
    fit = fit_points("allreduce", "ob1/tcp", 2, [8, 16, 32], [10e-6, 10e-6, 9.9e-6])
    assert fit.alpha_s > 0 and fit.beta_s_per_byte == 0
    assert math.isinf(fit.bandwidth_gbyte_s)
    assert any("bandwidth not resolved" in w for w in fit.warnings)


def test_too_few_points_refused():
    with pytest.raises(UsageError, match="at least 2"):
        fit_points("allreduce", "ob1/tcp", 2, [1024, 1024], [1e-5, 1.1e-5])
    with pytest.raises(UsageError, match="no collective records"):
        fit_records([])
    with pytest.raises(UsageError, match="enough points"):
        fit_records(records(1e-6, 1e-9)[:1])


def test_two_sizes_fit_exactly_with_unknown_quality():
    fit = fit_points("allreduce", "ob1/tcp", 2, [8, 4096], [10e-6, 12e-6])
    assert math.isnan(fit.rms_rel_err)
    assert any("only two sizes" in w for w in fit.warnings)


def test_groups_by_run_op_and_transport_and_skips_thin_groups():
    recs = records(1e-6, 1e-9) + records(2e-6, 2e-9, transport="ob1/vader")
    recs += records(1e-6, 1e-9, op="allgather")[:1]
    fits, skipped = fit_records(recs)
    assert {(f.op, f.transport) for f in fits} == {("allreduce", "ob1/tcp"),
                                                   ("allreduce", "ob1/vader")}
    assert len(skipped) == 1 and "allgather" in skipped[0]


def test_fixture_runs_fit_their_busbw():
    from fabbench.results.runs import load

    for s in load([FIXTURES / "siteA-ib.jsonl", FIXTURES / "siteB-ib.jsonl"]):
        fits, _ = fit_records(s.collectives)
        for f in fits:
            assert f.rms_rel_err < 0.05
            assert f.bandwidth_gbyte_s == pytest.approx(f.busbw_at_max_gbyte_s, rel=0.1)
