"""Decayed usage: exact integration, half-life, steady state, and bad input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.sched.fairshare import DecayedUsage

DAY = 86_400.0
KEY = ("research", "h100-sxm5-80gb")


def test_usage_halves_after_one_half_life() -> None:
    u = DecayedUsage(half_life_s=DAY, gpu_s={KEY: 1000.0})
    assert u.advance(DAY, {}).gpu_s[KEY] == pytest.approx(500.0)
    assert u.mean_gpus(*KEY, now_s=DAY) == pytest.approx(500.0 * math.log(2) / DAY)


def test_holding_g_gpus_forever_converges_to_g() -> None:
    u = DecayedUsage(half_life_s=DAY)
    for i in range(1, 60):
        u = u.advance(i * DAY, {KEY: 8.0})
    assert u.mean_gpus(*KEY) == pytest.approx(8.0, rel=1e-6)


@given(st.lists(st.floats(1.0, 5 * DAY), min_size=1, max_size=6), st.floats(0.0, 64.0))
def test_advancing_in_steps_equals_one_step(steps: list[float], gpus: float) -> None:
    """Piecewise-constant holdings integrate exactly: splitting an interval changes nothing."""
    one = DecayedUsage(half_life_s=DAY).advance(sum(steps), {KEY: gpus})
    many = DecayedUsage(half_life_s=DAY)
    t = 0.0
    for dt in steps:
        t += dt
        many = many.advance(t, {KEY: gpus})
    assert many.gpu_s.get(KEY, 0.0) == pytest.approx(one.gpu_s.get(KEY, 0.0), rel=1e-9, abs=1e-6)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="half_life_s"):
        DecayedUsage(half_life_s=0)
    with pytest.raises(ValueError, match="backwards"):
        DecayedUsage(at_s=10.0).advance(5.0, {})
