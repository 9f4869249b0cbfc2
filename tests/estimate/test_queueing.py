"""Inference queueing: Erlang C, the Allen–Cunneen M/G/c waits, replica sizing, a simulation.

Expected numbers are worked by hand from the formulas in
docs/design/0004-inference-queueing.md (literals, or independent oracles:
exact rational sums for small c, scipy's Poisson distribution for large c),
not calls into the module, so a change that moves a result fails here.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm, poisson

from gpufleet.estimate import queueing as qm
from gpufleet.estimate.queueing import (
    QueueResult,
    erlang_c,
    mgc_wait,
    replicas_needed,
    simulate_mgc,
)

# ---------------------------------------------------------------- Erlang C


def _erlang_c_exact(c: int, a: Fraction) -> Fraction:
    """The textbook closed form, in exact rationals (fine for small c):
    C = [a^c / c! · c / (c − a)] / [Σ_{k<c} a^k / k! + a^c / c! · c / (c − a)]."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def _erlang_c_poisson(c: int, a: float) -> float:
    """Oracle for large c: Erlang B is the Poisson(a) pmf at c over its cdf at c,
    evaluated in logs by scipy; then C = c B / (c − a (1 − B))."""
    b = math.exp(float(poisson.logpmf(c, a)) - float(poisson.logcdf(c, a)))
    return c * b / (c - a * (1.0 - b))


@pytest.mark.parametrize(
    ("servers", "load", "expected"),
    [
        pytest.param(1, 0.3, 0.3, id="c1-rho0.3"),
        pytest.param(1, 0.9, 0.9, id="c1-rho0.9"),
        pytest.param(2, 1.0, 1 / 3, id="c2-a1"),
        # c = 2: C = 2ρ² / (1 + ρ); ρ = 0.75 -> 1.125 / 1.75
        pytest.param(2, 1.5, 1.125 / 1.75, id="c2-a1.5"),
        # The standard table value (e.g. Cooper 1981): C(10, 8) ≈ 0.4092.
        pytest.param(10, 8.0, 0.409180, id="c10-a8"),
        pytest.param(3, 0.0, 0.0, id="no-load"),
        pytest.param(4, 4.0, 1.0, id="rho1-everyone-waits"),
        pytest.param(4, 9.0, 1.0, id="overload"),
    ],
)
def test_erlang_c_textbook_values(servers: int, load: float, expected: float) -> None:
    assert erlang_c(servers, load) == pytest.approx(expected, rel=1e-6, abs=1e-15)


@pytest.mark.parametrize(
    ("servers", "load"),
    [
        pytest.param(1, Fraction(1, 2), id="c1"),
        pytest.param(5, Fraction(7, 2), id="c5"),
        pytest.param(20, Fraction(18), id="c20-rho0.9"),
        pytest.param(60, Fraction(30), id="c60-rho0.5"),
    ],
)
def test_erlang_c_matches_the_exact_rational_sum(servers: int, load: Fraction) -> None:
    exact = float(_erlang_c_exact(servers, load))
    assert erlang_c(servers, float(load)) == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize(
    ("servers", "rho"),
    [
        pytest.param(1_000, 0.98, id="c1k"),
        pytest.param(10_000, 0.99, id="c10k"),
        pytest.param(50_000, 0.9, id="c50k-rho0.9"),
        pytest.param(50_000, 0.998, id="c50k-rho0.998"),
        pytest.param(100_000, 0.99, id="c100k"),
    ],
)
def test_erlang_c_is_stable_for_large_server_counts(servers: int, rho: float) -> None:
    value = erlang_c(servers, rho * servers)
    assert math.isfinite(value)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(_erlang_c_poisson(servers, rho * servers), rel=1e-8, abs=1e-300)


def test_erlang_c_at_fifty_thousand_servers_and_rho_0_9_is_negligible() -> None:
    # 5,000 spare servers is 23.6 standard deviations of the busy count (√45,000):
    # essentially nobody waits, and the recursion must say so without overflow.
    value = erlang_c(50_000, 45_000.0)
    assert 0.0 <= value < 1e-100


def test_erlang_c_approaches_the_halfin_whitt_limit() -> None:
    # Halfin & Whitt (1981): with c = a + β√a, C → 1 / (1 + β Φ(β) / φ(β)) as a → ∞.
    a, beta = 40_000.0, 1.0
    servers = round(a + beta * math.sqrt(a))
    limit = 1.0 / (1.0 + beta * float(norm.cdf(beta)) / float(norm.pdf(beta)))
    assert limit == pytest.approx(0.22336, abs=1e-5)
    assert erlang_c(servers, a) == pytest.approx(limit, rel=0.01)


@settings(max_examples=200, deadline=None)
@given(
    servers=st.integers(min_value=1, max_value=2_000),
    rho=st.floats(min_value=0.0, max_value=1.5),
    extra=st.integers(min_value=1, max_value=50),
)
def test_erlang_c_is_a_probability_falling_with_servers_rising_with_load(
    servers: int, rho: float, extra: int
) -> None:
    load = rho * servers
    value = erlang_c(servers, load)
    assert 0.0 <= value <= 1.0
    assert erlang_c(servers + extra, load) <= value + 1e-12
    assert erlang_c(servers, load * 1.05) >= value - 1e-12


# ---------------------------------------------------------------- M/G/c waits


@pytest.mark.parametrize(
    ("lam", "mean_s", "cv", "servers", "expected"),
    [
        # M/M/1, λ = 0.5, μ = 1: Wq = ρ / (μ − λ) = 1; P(W > t) = ρ e^{-(μ−λ)t},
        # so t99 = ln(0.5 / 0.01) / 0.5 = 2 ln 50.
        pytest.param(
            0.5, 1.0, 1.0, 1, QueueResult(1, 0.5, 0.5, 1.0, 2 * math.log(50.0), True), id="mm1"
        ),
        # M/M/1, λ = 9, E[S] = 0.1 s (μ = 10): ρ = 0.9, Wq = 0.9 / 1 = 0.9 s,
        # t99 = ln(90) / 1.
        pytest.param(
            9.0, 0.1, 1.0, 1, QueueResult(1, 0.9, 0.9, 0.9, math.log(90.0), True), id="mm1-hot"
        ),
        # M/D/1 (cv 0) is half of M/M/1 (Pollaczek–Khinchine): Wq = 0.5, t99 = ln 50.
        pytest.param(
            0.5, 1.0, 0.0, 1, QueueResult(1, 0.5, 0.5, 0.5, math.log(50.0), True), id="md1"
        ),
        # M/M/2, a = 1: C = 1/3, Wq = C / (2μ − λ) = 1/3, t99 = ln(100/3).
        pytest.param(
            1.0, 1.0, 1.0, 2, QueueResult(2, 0.5, 1 / 3, 1 / 3, math.log(100 / 3), True), id="mm2"
        ),
        # M/G/2, cv = 2: factor (1 + 4) / 2 = 2.5 on both.
        pytest.param(
            1.0,
            1.0,
            2.0,
            2,
            QueueResult(2, 0.5, 1 / 3, 2.5 / 3, 2.5 * math.log(100 / 3), True),
            id="mg2-cv2",
        ),
        # M/M/10, λ = 4, E[S] = 2 s: a = 8, C = 0.409180, c μ − λ = 5 − 4 = 1/s,
        # so Wq = C / 1 and t99 = ln(C / 0.01) / 1.
        pytest.param(
            4.0,
            2.0,
            1.0,
            10,
            QueueResult(10, 0.8, 0.409180, 0.409180, math.log(40.9180), True),
            id="mm10-a8",
        ),
        # Lightly loaded: C(10, 2) < 0.01, so the p99 wait is 0.
        pytest.param(1.0, 2.0, 1.0, 10, None, id="mm10-light"),
    ],
)
def test_mgc_wait_hand_worked(
    lam: float, mean_s: float, cv: float, servers: int, expected: QueueResult | None
) -> None:
    got = mgc_wait(lam, mean_s, cv, servers)
    if expected is None:
        assert got.wait_probability < 0.01
        assert got.p99_wait_s == 0.0
        assert got.mean_wait_s > 0.0
        return
    assert got.servers == expected.servers
    assert got.stable is expected.stable
    for field in ("utilisation", "wait_probability", "mean_wait_s", "p99_wait_s"):
        assert getattr(got, field) == pytest.approx(getattr(expected, field), rel=1e-5), field


@pytest.mark.parametrize(
    ("lam", "mean_s", "servers"),
    [
        pytest.param(1.0, 1.0, 1, id="rho1"),
        pytest.param(2.0, 1.0, 1, id="rho2"),
        pytest.param(10.0, 4.0, 40, id="rho1-c40"),
        pytest.param(1000.0, 1.0, 999, id="rho1.001"),
    ],
)
def test_unstable_queue_reports_infinite_waits(lam: float, mean_s: float, servers: int) -> None:
    got = mgc_wait(lam, mean_s, 1.0, servers)
    assert got.stable is False
    assert got.utilisation == pytest.approx(lam * mean_s / servers)
    assert got.wait_probability == 1.0
    assert got.mean_wait_s == math.inf
    assert got.p99_wait_s == math.inf


def test_no_traffic_means_no_wait() -> None:
    got = mgc_wait(0.0, 3.0, 1.0, 4)
    assert got == QueueResult(4, 0.0, 0.0, 0.0, 0.0, True)


WORKLOAD = st.fixed_dictionaries(
    {
        "mean_s": st.floats(min_value=0.05, max_value=60.0),
        "cv": st.floats(min_value=0.0, max_value=3.0),
        "servers": st.integers(min_value=1, max_value=3_000),
        "rho": st.floats(min_value=0.01, max_value=0.999),
    }
)


@settings(max_examples=200, deadline=None)
@given(WORKLOAD, st.integers(min_value=1, max_value=200))
def test_more_servers_never_raise_the_wait(w: dict[str, float], extra: int) -> None:
    servers = int(w["servers"])
    lam = w["rho"] * servers / w["mean_s"]
    few = mgc_wait(lam, w["mean_s"], w["cv"], servers)
    many = mgc_wait(lam, w["mean_s"], w["cv"], servers + extra)
    assert few.stable
    assert many.stable
    assert many.p99_wait_s <= few.p99_wait_s * (1 + 1e-12)
    assert many.mean_wait_s <= few.mean_wait_s * (1 + 1e-12)
    assert many.wait_probability <= few.wait_probability + 1e-12


@settings(max_examples=200, deadline=None)
@given(WORKLOAD, st.floats(min_value=1.0001, max_value=3.0))
def test_more_traffic_or_variability_never_lowers_the_wait(
    w: dict[str, float], factor: float
) -> None:
    servers = int(w["servers"])
    lam = w["rho"] * servers / w["mean_s"]
    base = mgc_wait(lam, w["mean_s"], w["cv"], servers)
    busier = mgc_wait(lam * factor, w["mean_s"], w["cv"], servers)
    assert busier.mean_wait_s >= base.mean_wait_s * (1 - 1e-12)
    assert busier.p99_wait_s >= base.p99_wait_s * (1 - 1e-12)
    assert busier.stable == (busier.utilisation < 1.0)
    burstier = mgc_wait(lam, w["mean_s"], w["cv"] + factor - 1.0, servers)
    assert burstier.mean_wait_s >= base.mean_wait_s
    assert burstier.p99_wait_s >= base.p99_wait_s


# ---------------------------------------------------------------- replicas_needed


def _meets(lam: float, mean_s: float, cv: float, c: int, *, prefill: float, slo: float) -> bool:
    r = mgc_wait(lam, mean_s, cv, c)
    return r.stable and r.p99_wait_s + prefill <= slo


@pytest.mark.parametrize(
    ("lam", "mean_s", "cv", "slots", "prefill", "slo", "expected"),
    [
        # Illustrative chat service (docs/design/0004): S = 0.3 s prefill + 250 tokens
        # × 40 ms = 10.3 s, cv 0.8, a = 206 Erlangs. 7 × 32 slots: ρ = 0.92,
        # C = 0.148, p99 wait 0.82 ln(14.8) / (18 / 10.3) = 1.26 s, too slow;
        # 8 × 32: ρ = 0.80, C = 0.0005 ≤ 0.01, so the p99 wait is 0.
        pytest.param(20.0, 10.3, 0.8, 32, 0.3, 1.0, 8, id="chat-32-slots"),
        # Same traffic on 4-slot replicas: the SLO, not stability, binds. 52 is the
        # first stable count (ρ = 0.99); 57 still has a 1.13 s p99 TTFT, 58 has 0.81 s.
        pytest.param(20.0, 10.3, 0.8, 4, 0.3, 1.0, 58, id="chat-4-slots"),
        # One slot per replica is M/G/c with c = replicas.
        pytest.param(0.5, 1.0, 1.0, 1, 0.0, 2 * math.log(50.0) * 1.0001, 1, id="mm1-just-fits"),
        pytest.param(0.5, 1.0, 1.0, 1, 0.0, 2 * math.log(50.0) * 0.9999, 2, id="mm1-just-misses"),
        pytest.param(0.0, 5.0, 1.0, 8, 0.5, 0.5, 1, id="no-traffic"),
        # prefill == SLO is feasible: it needs C ≤ 0.01 (a zero p99 wait);
        # a = 200 on 16-slot replicas: C = 0.061 at 14, 0.0036 at 15.
        pytest.param(100.0, 2.0, 1.0, 16, 0.4, 0.4, 15, id="prefill-equals-slo"),
    ],
)
def test_replicas_needed_is_minimal(
    *,
    lam: float,
    mean_s: float,
    cv: float,
    slots: int,
    prefill: float,
    slo: float,
    expected: int,
) -> None:
    replicas, result = replicas_needed(lam, mean_s, cv, slots, prefill, slo)
    assert replicas == expected
    assert result == mgc_wait(lam, mean_s, cv, replicas * slots)
    assert result.stable
    assert result.p99_wait_s + prefill <= slo
    assert replicas == 1 or not _meets(
        lam, mean_s, cv, (replicas - 1) * slots, prefill=prefill, slo=slo
    )


@settings(max_examples=150, deadline=None)
@given(
    lam=st.floats(min_value=0.0, max_value=500.0),
    mean_s=st.floats(min_value=0.05, max_value=30.0),
    cv=st.floats(min_value=0.0, max_value=2.5),
    slots=st.integers(min_value=1, max_value=64),
    prefill=st.floats(min_value=0.0, max_value=2.0),
    headroom=st.floats(min_value=0.0, max_value=10.0),
)
def test_replicas_needed_meets_the_slo_and_one_fewer_does_not(
    *, lam: float, mean_s: float, cv: float, slots: int, prefill: float, headroom: float
) -> None:
    slo = prefill + headroom if prefill + headroom > 0 else 0.1
    replicas, result = replicas_needed(lam, mean_s, cv, slots, prefill, slo)
    assert result.servers == replicas * slots
    assert _meets(lam, mean_s, cv, replicas * slots, prefill=prefill, slo=slo)
    assert replicas == 1 or not _meets(
        lam, mean_s, cv, (replicas - 1) * slots, prefill=prefill, slo=slo
    )


def test_replicas_needed_rejects_a_prefill_longer_than_the_slo() -> None:
    with pytest.raises(ValueError, match=r"prefill_s \(1\.5 s\) exceeds ttft_p99_s \(1\.0 s\)"):
        replicas_needed(1.0, 10.0, 1.0, 8, prefill_s=1.5, ttft_p99_s=1.0)


def test_replicas_needed_rejects_a_cap_too_low() -> None:
    # a = 1,000 Erlangs on 8-slot replicas needs more than 125 replicas just to be stable.
    with pytest.raises(ValueError, match="max_replicas=125"):
        replicas_needed(100.0, 10.0, 1.0, 8, 0.2, 2.0, max_replicas=125)
    # And with the cap at the stable minimum, the SLO still fails there.
    replicas, _ = replicas_needed(100.0, 10.0, 1.0, 8, 0.2, 2.0)
    with pytest.raises(ValueError, match="max_replicas"):
        replicas_needed(100.0, 10.0, 1.0, 8, 0.2, 2.0, max_replicas=replicas - 1)
    assert replicas_needed(100.0, 10.0, 1.0, 8, 0.2, 2.0, max_replicas=replicas)[0] == replicas


# ---------------------------------------------------------------- input checks


@pytest.mark.parametrize(
    ("call", "name"),
    [
        pytest.param(lambda: erlang_c(0, 1.0), "servers", id="erlang-zero-servers"),
        pytest.param(lambda: erlang_c(2.0, 1.0), "servers", id="erlang-float-servers"),  # type: ignore[arg-type]
        pytest.param(lambda: erlang_c(True, 0.5), "servers", id="erlang-bool-servers"),
        pytest.param(lambda: erlang_c(2, -1.0), "offered_load", id="erlang-negative-load"),
        pytest.param(lambda: erlang_c(2, math.nan), "offered_load", id="erlang-nan-load"),
        pytest.param(lambda: mgc_wait(-1.0, 1.0, 1.0, 2), "arrival_rate_per_s", id="neg-rate"),
        pytest.param(lambda: mgc_wait(1.0, 0.0, 1.0, 2), "mean_service_s", id="zero-service"),
        pytest.param(lambda: mgc_wait(1.0, math.inf, 1.0, 2), "mean_service_s", id="inf-svc"),
        pytest.param(lambda: mgc_wait(1.0, 1.0, -0.1, 2), "service_cv", id="neg-cv"),
        pytest.param(
            lambda: replicas_needed(1.0, 1.0, 1.0, 0, 0.1, 1.0), "slots_per_replica", id="slots"
        ),
        pytest.param(
            lambda: replicas_needed(1.0, 1.0, 1.0, 4, -0.1, 1.0), "prefill_s", id="prefill"
        ),
        pytest.param(lambda: replicas_needed(1.0, 1.0, 1.0, 4, 0.1, 0.0), "ttft_p99_s", id="slo"),
        pytest.param(
            lambda: replicas_needed(1.0, 1.0, 1.0, 4, 0.1, 1.0, max_replicas=0),
            "max_replicas",
            id="cap",
        ),
        pytest.param(
            lambda: simulate_mgc(1.0, 1.0, 1.0, 2, 0, np.random.default_rng(0)),
            "requests",
            id="sim-requests",
        ),
        pytest.param(
            lambda: simulate_mgc(0.0, 1.0, 1.0, 2, 10, np.random.default_rng(0)),
            "arrival_rate_per_s",
            id="sim-zero-rate",
        ),
        pytest.param(
            lambda: simulate_mgc(
                1.0,
                1.0,
                1.0,
                2,
                10,
                np.random.default_rng(0),
                distribution="pareto",  # type: ignore[arg-type]
            ),
            "distribution",
            id="sim-distribution",
        ),
        pytest.param(
            lambda: simulate_mgc(
                1.0, 1.0, 1.0, 2, 10, np.random.default_rng(0), warmup_fraction=1.0
            ),
            "warmup_fraction",
            id="sim-warmup",
        ),
    ],
)
def test_bad_inputs_raise_naming_the_argument(call: object, name: str) -> None:
    assert callable(call)
    with pytest.raises(ValueError, match=name):
        call()


# ---------------------------------------------------------------- simulation


@pytest.mark.parametrize("distribution", ["gamma", "lognormal"])
@pytest.mark.parametrize("cv", [0.0, 0.5, 1.0, 2.0])
def test_service_times_have_the_requested_mean_and_cv(distribution: str, cv: float) -> None:
    draws = qm._service_times(3.0, cv, 400_000, np.random.default_rng(7), distribution)
    assert float(draws.mean()) == pytest.approx(3.0, rel=0.02)
    assert float(draws.std() / draws.mean()) == pytest.approx(cv, abs=0.06 * max(cv, 0.1))
    assert bool(np.all(draws >= 0.0))


def test_simulation_of_mm1_waits_with_probability_rho() -> None:
    got = simulate_mgc(0.6, 1.0, 1.0, 1, 50_000, np.random.default_rng(11))
    assert got.wait_probability == pytest.approx(0.6, abs=0.02)
    assert got.utilisation == pytest.approx(0.6, rel=0.03)
    assert got.stable
    assert got.servers == 1


def test_simulation_with_spare_servers_never_waits() -> None:
    got = simulate_mgc(5.0, 1.0, 1.0, 200, 20_000, np.random.default_rng(3))
    assert got.wait_probability == 0.0
    assert got.mean_wait_s == 0.0
    assert got.p99_wait_s == 0.0


# Each case: 4 independent runs of 50,000 requests (seeds 0-3), the first 10 % of
# each discarded as warm-up, the 4 means (and p99s) averaged. The tolerances come
# from running every case with 15 disjoint seed groups (design note 0004): the
# approximation's median error was within ±7 % in all of them and the worst group
# within ±23 %; cases where the model is exact (c = 1, or cv = 1) vary only by
# sampling noise, under ±7 % at c ≤ 4.
SIM_CASES = [
    pytest.param(1, 0.7, 0.5, "gamma", 0.10, id="mg1-exact-PK"),
    pytest.param(1, 0.8, 1.5, "gamma", 0.15, id="mg1-cv1.5-exact-PK"),
    pytest.param(4, 0.7, 1.0, "gamma", 0.10, id="mm4-exact"),
    pytest.param(4, 0.8, 0.5, "lognormal", 0.10, id="mg4-lognormal"),
    pytest.param(16, 0.85, 0.5, "gamma", 0.15, id="mg16-cv0.5"),
    pytest.param(16, 0.8, 1.5, "gamma", 0.25, id="mg16-cv1.5"),
    pytest.param(16, 0.8, 1.0, "lognormal", 0.25, id="mg16-lognormal-cv1"),
    pytest.param(64, 0.88, 1.0, "gamma", 0.25, id="mm64-exact"),
]


def _simulated(
    c: int, rho: float, cv: float, distribution: qm.ServiceDistribution
) -> tuple[float, float]:
    runs = [
        simulate_mgc(
            rho * c, 1.0, cv, c, 50_000, np.random.default_rng(seed), distribution=distribution
        )
        for seed in range(4)
    ]
    return (
        float(np.mean([r.mean_wait_s for r in runs])),
        float(np.mean([r.p99_wait_s for r in runs])),
    )


@pytest.mark.parametrize(("servers", "rho", "cv", "distribution", "tolerance"), SIM_CASES)
def test_allen_cunneen_agrees_with_simulation(
    servers: int, rho: float, cv: float, distribution: qm.ServiceDistribution, tolerance: float
) -> None:
    model = mgc_wait(rho * servers, 1.0, cv, servers)
    mean_wait, p99_wait = _simulated(servers, rho, cv, distribution)
    assert model.mean_wait_s == pytest.approx(mean_wait, rel=tolerance)
    assert model.p99_wait_s == pytest.approx(p99_wait, rel=max(tolerance, 0.20))


def test_allen_cunneen_is_optimistic_for_constant_service_on_many_servers() -> None:
    # A known weakness, pinned so it stays documented: with cv = 0 on 16 servers at
    # ρ = 0.7 the model's mean wait is 10-20 % below the simulated one in every seed
    # group tried (median 17 %). Plans with near-constant service times should add margin.
    model = mgc_wait(0.7 * 16, 1.0, 0.0, 16)
    mean_wait, _ = _simulated(16, 0.7, 0.0, "gamma")
    assert 0.75 * mean_wait < model.mean_wait_s < 0.95 * mean_wait


@pytest.mark.parametrize("cap", [0.5, 0.85, 1.0])
def test_replicas_respect_the_utilisation_cap_and_are_minimal(cap: float) -> None:
    lam, es, slots = 40.0, 10.0, 16
    replicas, q = replicas_needed(lam, es, 1.0, slots, 0.1, 5.0, max_utilisation=cap)
    assert q.utilisation <= cap
    fewer = mgc_wait(lam, es, 1.0, (replicas - 1) * slots)
    assert (not fewer.stable) or fewer.utilisation > cap or fewer.p99_wait_s + 0.1 > 5.0


def test_utilisation_cap_must_be_a_fraction() -> None:
    with pytest.raises(ValueError, match="max_utilisation must be in"):
        replicas_needed(1.0, 1.0, 1.0, 1, 0.0, 1.0, max_utilisation=1.5)
