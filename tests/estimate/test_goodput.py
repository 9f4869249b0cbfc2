"""Goodput model: sourced defaults, Young/Daly, hand-worked cases, properties, a simulation.

Expected numbers here are worked by hand from the formulas in
docs/design/0002-goodput-model.md (literals, not calls into the module), so a
change to the module that moves a result fails here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import random
import types
import typing

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.catalog.columns import TEXT_COLUMNS, is_bool_column, unit_of
from gpufleet.catalog.storage import get_storage
from gpufleet.errors import CatalogError
from gpufleet.estimate import goodput as gp
from gpufleet.estimate.goodput import (
    DEFAULT_ROLES,
    REASON_MTBF,
    REASON_NEGATIVE,
    ReliabilityRow,
    daly_interval_s,
    default_reliability,
    goodput,
    job_mtbf_s,
    load_reliability,
    young_interval_s,
)

DAY_S = 86400.0


def _row(name: str) -> ReliabilityRow:
    return next(r for r in load_reliability() if r.name == name)


def _numeric(annotation: object) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return any(_numeric(a) for a in typing.get_args(annotation) if a is not type(None))
    return annotation in (int, float)


# ---------------------------------------------------------------- the data file


def test_every_row_has_provenance_and_the_snapshot_date() -> None:
    rows = load_reliability()
    assert len({r.name for r in rows}) == len(rows)
    for row in rows:
        assert row.source.strip(), row.name
        assert row.retrieved == dt.date(2026, 11, 29), row.name
        assert row.notes.strip(), row.name


def test_numeric_columns_carry_units_and_booleans_a_prefix() -> None:
    fields = ReliabilityRow.model_fields
    numeric = [n for n, f in fields.items() if _numeric(f.annotation)]
    assert numeric
    assert [n for n in numeric if unit_of(n) is None] == []
    bools = [n for n, f in fields.items() if f.annotation in (bool, bool | None)]
    assert all(is_bool_column(n) for n in bools)
    assert {"source", "retrieved", "notes", "derivation"} <= TEXT_COLUMNS


def test_each_default_role_comes_from_exactly_one_row() -> None:
    rows = load_reliability()
    for role in DEFAULT_ROLES:
        assert sum(role in r.default_for for r in rows) == 1, role


def test_assumptions_are_flagged_and_sourced_to_the_design_note() -> None:
    restart = next(r for r in load_reliability() if "restart" in r.default_for)
    assert restart.is_assumption
    assert "docs/design/0002-goodput-model.md" in restart.source
    published = [r for r in load_reliability() if r.name != restart.name]
    assert not any(r.is_assumption for r in published)


def test_derived_gpu_mtbf_follows_from_each_rows_own_columns() -> None:
    # Llama 3: 16,384 GPUs × 54 days / 419 unexpected interruptions.
    llama = _row("llama-3-405b-pretraining")
    assert llama.accelerators_count == 16384
    assert llama.duration_s == 54 * DAY_S
    assert llama.unexpected_interruptions_count == 419
    assert llama.interruptions_count == 466
    assert llama.derived_gpu_mtbf_s == pytest.approx(16384 * 54 * DAY_S / 419, rel=1e-9)
    # OPT-175B: at least 35 hardware restarts on 992 GPUs over "2 months" (mean months).
    opt = _row("opt-175b-training")
    assert opt.derived_gpu_mtbf_s == pytest.approx(992 * 2 * 2629746 / 35, rel=1e-9)
    assert pytest.approx(365.2425 * DAY_S / 12, abs=1e-6) == 2629746
    for row in load_reliability():
        if row.derived_gpu_mtbf_s is not None:
            assert row.derivation, row.name
            assert row.unexpected_interruptions_count, row.name


def test_default_rate_is_llama3_unexpected_interruptions_per_gpu_hour() -> None:
    d = default_reliability()
    assert d.interruption_rate_per_gpu_hour == pytest.approx(419 / (16384 * 54 * 24), rel=1e-9)
    assert d.interruption_rate_per_gpu_hour == pytest.approx(1.9733e-5, rel=1e-4)
    # The 16,384-GPU job then fails every 54 × 24 / 419 = 3.09 hours.
    assert job_mtbf_s(16384, d.gpu_mtbf_s) / 3600 == pytest.approx(3.0931, rel=1e-4)
    assert len(d.sources) == len(DEFAULT_ROLES)


def test_opt_rate_agrees_with_llama3_within_a_small_factor() -> None:
    """Independent sources should not disagree by orders of magnitude."""
    llama = _row("llama-3-405b-pretraining").derived_gpu_mtbf_s
    opt = _row("opt-175b-training").derived_gpu_mtbf_s
    assert llama is not None
    assert opt is not None
    assert 0.5 < llama / opt < 2.0


def test_default_storage_matches_the_storage_catalog() -> None:
    tectonic = get_storage("meta-tectonic").cluster_throughput_gbytes_per_s
    assert tectonic is not None
    assert default_reliability().checkpoint_write_bytes_per_s == tectonic * 1e9 == 2e12
    assert default_reliability().snapshot_bytes_per_s_per_gpu == 64e9
    assert default_reliability().restart_s == 600.0


def test_a_missing_default_row_is_a_catalog_error() -> None:
    rows = tuple(r for r in load_reliability() if "restart" not in r.default_for)
    with pytest.raises(CatalogError, match="restart"):
        gp._default_row(rows, "restart")


def test_unknown_default_role_is_rejected() -> None:
    values = _row("gpufleet-restart-assumption").model_dump()
    values["default_for"] = ("restart_time",)
    with pytest.raises(ValueError, match="restart_time"):
        ReliabilityRow.model_validate(values)


# ---------------------------------------------------------------- Young and Daly


@pytest.mark.parametrize(
    ("delta", "mtbf", "young", "daly"),
    [
        # 2δM = 10^6 -> 1000; δ/2M = 1/400 -> 1000 (1 + 1/60 + 1/3600) - 50
        (50.0, 1e4, 1000.0, 966.9444444444445),
        # 2δM = 40000 -> 200; δ/2M = 10^-4 -> 200 (1 + 0.01/3 + 10^-4/9) - 2
        (2.0, 1e4, 200.0, 198.66888888888889),
        # one minute per checkpoint, one failure a day: sqrt(10,368,000)
        # δ/2M = 60 / 172800, its root 0.0186339: 3219.938 × 1.0062499 - 60
        (60.0, DAY_S, 3219.937887599697, 3180.0621135984475),
        # δ >= 2M: Daly's rule is τ = M
        (30000.0, 1e4, 24494.897427831781, 1e4),
        (20000.0, 1e4, 20000.0, 1e4),
        # no checkpoint cost: checkpoint continuously
        (0.0, 1e4, 0.0, 0.0),
    ],
)  # fmt: skip
def test_young_and_daly_against_hand_values(
    delta: float, mtbf: float, young: float, daly: float
) -> None:
    assert young_interval_s(delta, mtbf) == pytest.approx(young, rel=1e-12)
    assert daly_interval_s(delta, mtbf) == pytest.approx(daly, rel=1e-12)


def test_daly_converges_to_young_when_checkpoints_are_cheap() -> None:
    for delta in (1e-3, 1e-1, 1.0):
        young = young_interval_s(delta, 1e6)
        assert isinstance(young, float)
        assert daly_interval_s(delta, 1e6) == pytest.approx(young, rel=2 * math.sqrt(delta / 1e6))


# ---------------------------------------------------------------- hand-worked goodput

# Job MTBF M = 10^7 / 1000 = 10^4 s, R = 300 s, ideal 10^6 s in every case.
CASES = [
    # sync, δ = 50e9 / 1e9 = 50 s, τ = Daly = 966.94 s:
    # f = 966.94 / 1016.94 × (1 - (1016.94 / 2 + 300) / 10^4)
    pytest.param({}, 966.9444444444445, 50.0, 508.47222222222223, 0.8739608903153359, id="sync"),
    # async: stall = 1e12 / 1000 GPUs / 1e9 = 1 s, write = 1e12 / 1e10 = 100 s;
    # τ = Daly(1, 10^4) = 140.755; rework = 141.755 / 2 + 100
    pytest.param(
        {"checkpoint_bytes": 1e12, "storage_bytes_per_s": 1e10, "async_checkpoint": True,
         "snapshot_bytes_per_s_per_gpu": 1e9},
        140.75547524484415, 1.0, 170.87773762242207, 0.9461900010496876, id="async",
    ),
    # sync, interval given: f = 3600 / 3650 × (1 - (1825 + 300) / 10^4)
    pytest.param({"checkpoint_interval_s": 3600.0}, 3600.0, 50.0, 1825.0, 0.7767123287671233,
                 id="sync-interval-given"),
    # async, interval 10 s given but the 100 s write must finish first: τ = 100 - 1 = 99;
    # f = 99 / 100 × (1 - (50 + 100 + 300) / 10^4)
    pytest.param(
        {"checkpoint_bytes": 1e12, "storage_bytes_per_s": 1e10, "async_checkpoint": True,
         "snapshot_bytes_per_s_per_gpu": 1e9, "checkpoint_interval_s": 10.0},
        99.0, 1.0, 150.0, 0.94545, id="async-interval-clamped",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("overrides", "tau", "stall", "rework", "fraction"), CASES)
def test_goodput_against_hand_values(
    overrides: dict[str, float | bool], tau: float, stall: float, rework: float, fraction: float
) -> None:
    args: dict[str, typing.Any] = {
        "gpus": 1000,
        "ideal_time_s": 1e6,
        "checkpoint_bytes": 50e9,
        "storage_bytes_per_s": 1e9,
        "gpu_mtbf_s": 1e7,
        "restart_s": 300.0,
    }
    result = goodput(**(args | overrides))
    assert result.mtbf_s == pytest.approx(1e4, rel=1e-12)
    assert result.checkpoint_interval_s == pytest.approx(tau, rel=1e-12)
    assert result.checkpoint_stall_s == pytest.approx(stall, rel=1e-12)
    assert result.lost_work_per_failure_s == pytest.approx(rework, rel=1e-12)
    assert result.fraction == pytest.approx(fraction, rel=1e-12)
    assert result.wall_clock_s == pytest.approx(1e6 / fraction, rel=1e-12)
    assert result.gpu_hours == pytest.approx(1000 * 1e6 / fraction / 3600, rel=1e-12)
    assert result.expected_failures == pytest.approx(1e6 / fraction / 1e4, rel=1e-12)
    assert result.checkpoint_count == pytest.approx(1e6 / tau, rel=1e-12)
    assert result.breakdown is False
    assert result.reason == ""


def test_scalars_in_give_python_scalars_out() -> None:
    result = goodput(gpus=8, ideal_time_s=DAY_S, checkpoint_bytes=1e11)
    for field in dataclasses.fields(result):
        value = getattr(result, field.name)
        assert isinstance(value, float | bool | str), field.name


def test_defaults_are_used_when_arguments_are_left_out() -> None:
    d = default_reliability()
    implicit = goodput(gpus=512, ideal_time_s=DAY_S, checkpoint_bytes=1e12)
    explicit = goodput(
        gpus=512,
        ideal_time_s=DAY_S,
        checkpoint_bytes=1e12,
        storage_bytes_per_s=d.checkpoint_write_bytes_per_s,
        gpu_mtbf_s=d.gpu_mtbf_s,
        restart_s=d.restart_s,
        defaults=d,
    )
    assert implicit == explicit


def test_a_per_job_rate_adds_to_the_per_gpu_rate() -> None:
    d = dataclasses.replace(default_reliability(), job_interruption_rate_per_hour=1.0)
    result = goodput(
        gpus=10, ideal_time_s=DAY_S, checkpoint_bytes=1e9, gpu_mtbf_s=36000.0, defaults=d
    )
    # 10 / 36000 + 1 / 3600 per second = 2 / 3600 -> M = 1800 s
    assert result.mtbf_s == pytest.approx(1800.0, rel=1e-12)


# ---------------------------------------------------------------- breakdown


def test_mtbf_shorter_than_checkpoint_plus_restart_is_a_breakdown() -> None:
    # M = 10^4 s; the write alone takes 2 × 10^4 s.
    result = goodput(
        gpus=1000, ideal_time_s=1e6, checkpoint_bytes=2e13, storage_bytes_per_s=1e9,
        gpu_mtbf_s=1e7, restart_s=300.0,
    )  # fmt: skip
    assert result.fraction == 0.0
    assert result.breakdown is True
    assert result.reason == REASON_MTBF
    assert result.wall_clock_s == math.inf
    assert result.gpu_hours == math.inf


def test_first_order_reaching_zero_is_a_breakdown_not_a_negative_fraction() -> None:
    # δ = 10 s, R = 1000 s < M = 10^4 s, but a 20,000 s interval loses more than M per failure.
    result = goodput(
        gpus=1000, ideal_time_s=1e6, checkpoint_bytes=1e10, storage_bytes_per_s=1e9,
        gpu_mtbf_s=1e7, restart_s=1000.0, checkpoint_interval_s=20000.0,
    )  # fmt: skip
    assert result.fraction == 0.0
    assert result.breakdown is True
    assert result.reason == REASON_NEGATIVE


def test_breakdown_is_per_candidate_in_arrays() -> None:
    result = goodput(
        gpus=np.array([8, 10**6]), ideal_time_s=DAY_S, checkpoint_bytes=1e13,
        storage_bytes_per_s=1e10, restart_s=600.0,
    )  # fmt: skip
    assert isinstance(result.fraction, np.ndarray)
    assert result.fraction[0] > 0.99
    assert result.fraction[1] == 0.0
    assert list(np.asarray(result.breakdown)) == [False, True]
    assert list(np.asarray(result.reason)) == ["", REASON_MTBF]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("gpus", 0),
        ("gpus", -1),
        ("ideal_time_s", 0.0),
        ("checkpoint_bytes", -1.0),
        ("storage_bytes_per_s", 0.0),
        ("gpu_mtbf_s", math.inf),
        ("restart_s", math.nan),
        ("checkpoint_interval_s", 0.0),
    ],
)
def test_bad_inputs_raise_naming_the_input(name: str, value: float) -> None:
    args: dict[str, typing.Any] = {"gpus": 8, "ideal_time_s": DAY_S, "checkpoint_bytes": 1e9}
    with pytest.raises(ValueError, match=name):
        goodput(**(args | {name: value}))


def test_defaults_reject_non_positive_rates() -> None:
    with pytest.raises(ValueError, match="interruption_rate_per_gpu_hour"):
        dataclasses.replace(default_reliability(), interruption_rate_per_gpu_hour=0.0)


# ---------------------------------------------------------------- properties

# One candidate layout; the properties vary one input of it at a time.
CANDIDATE = st.fixed_dictionaries(
    {
        "gpus": st.integers(min_value=1, max_value=200_000),
        "ideal_time_s": st.floats(min_value=1.0, max_value=1e8),
        "checkpoint_bytes": st.floats(min_value=0.0, max_value=1e14),
        "storage_bytes_per_s": st.floats(min_value=1e8, max_value=1e13),
        "gpu_mtbf_s": st.floats(min_value=1e5, max_value=1e10),
        "restart_s": st.floats(min_value=0.0, max_value=7200.0),
        "async_checkpoint": st.booleans(),
    }
)
SCALE = st.floats(min_value=1.0, max_value=100.0)


def _fraction(candidate: dict[str, typing.Any], **change: typing.Any) -> float:
    fraction = goodput(**(candidate | change)).fraction
    assert isinstance(fraction, float)
    return fraction


@settings(max_examples=300, deadline=None)
@given(CANDIDATE, SCALE)
def test_more_gpus_never_raise_goodput(candidate: dict[str, typing.Any], scale: float) -> None:
    many = _fraction(candidate, gpus=candidate["gpus"] * scale)
    assert many <= _fraction(candidate) + 1e-12
    assert 0.0 <= many <= 1.0


@settings(max_examples=300, deadline=None)
@given(CANDIDATE, SCALE)
def test_faster_storage_never_lowers_goodput(
    candidate: dict[str, typing.Any], scale: float
) -> None:
    fast = _fraction(candidate, storage_bytes_per_s=candidate["storage_bytes_per_s"] * scale)
    assert fast >= _fraction(candidate) - 1e-12


@settings(max_examples=200, deadline=None)
@given(CANDIDATE, SCALE)
def test_longer_restarts_never_raise_goodput(
    candidate: dict[str, typing.Any], scale: float
) -> None:
    longer = _fraction(candidate, restart_s=candidate["restart_s"] * scale + 1.0)
    assert longer <= _fraction(candidate) + 1e-12


@settings(max_examples=300, deadline=None)
@given(CANDIDATE)
def test_fraction_is_in_unit_interval_and_consistent(candidate: dict[str, typing.Any]) -> None:
    r = goodput(**candidate)
    assert isinstance(r.fraction, float)
    assert 0.0 <= r.fraction <= 1.0
    assert r.breakdown == (r.fraction == 0.0)
    assert (r.reason != "") == r.breakdown
    if not r.breakdown:
        ideal = candidate["ideal_time_s"]
        assert r.wall_clock_s >= ideal
        assert r.wall_clock_s == pytest.approx(ideal / r.fraction, rel=1e-12)


def test_vectorized_equals_a_scalar_loop() -> None:
    rng = np.random.default_rng(20261129)
    n = 400
    arrays: dict[str, typing.Any] = {
        "gpus": rng.integers(1, 100_000, n),
        "ideal_time_s": 10 ** rng.uniform(3, 7, n),
        "checkpoint_bytes": 10 ** rng.uniform(8, 14, n),
        "storage_bytes_per_s": 10 ** rng.uniform(8, 13, n),
        "gpu_mtbf_s": 10 ** rng.uniform(5, 9, n),
        "restart_s": rng.uniform(0, 3600, n),
        "async_checkpoint": rng.random(n) < 0.5,
    }
    vector = goodput(**arrays)
    assert np.asarray(vector.breakdown).any()
    assert not np.asarray(vector.breakdown).all()
    for i in range(n):
        scalar = goodput(**{k: v[i].item() for k, v in arrays.items()})
        for field in dataclasses.fields(scalar):
            got = np.asarray(getattr(vector, field.name))[i]
            want = getattr(scalar, field.name)
            if isinstance(want, float):
                assert got == pytest.approx(want, rel=1e-12), (i, field.name)
            else:
                assert got == want, (i, field.name)


def test_arrays_broadcast_against_scalars() -> None:
    result = goodput(
        gpus=np.array([[1024], [16384]]),
        ideal_time_s=30 * DAY_S,
        checkpoint_bytes=np.array([1e12, 1e13, 1e14]),
    )
    assert np.shape(result.fraction) == (2, 3)
    assert np.shape(result.checkpoint_write_s) == (2, 3)
    assert np.shape(result.reason) == (2, 3)


# ---------------------------------------------------------------- plausibility


def test_llama3_405b_like_run_lands_in_the_published_range() -> None:
    """16,384 GPUs, 54 days failure-free, 405e9 params × 16 bytes to the default 2 TB/s.

    With the sourced rate and storage and the assumed 600 s restart, the model
    gives 0.923: Meta reports "higher than 90%" effective training time.
    """
    result = goodput(gpus=16384, ideal_time_s=54 * DAY_S, checkpoint_bytes=405e9 * 16)
    assert isinstance(result.fraction, float)
    assert 0.85 < result.fraction < 0.99
    assert result.fraction == pytest.approx(0.9228, abs=5e-4)
    llama_min = _row("llama-3-405b-pretraining").goodput_min_fraction
    assert llama_min is not None
    assert result.fraction >= llama_min
    assert result.checkpoint_write_s == pytest.approx(3.24)
    assert result.mtbf_s / 3600 == pytest.approx(3.0931, rel=1e-4)
    # ~450 interruptions over the ~58.5 wall-clock days, against Meta's 419 in 54.
    assert 419 < result.expected_failures < 470


def test_small_jobs_barely_notice_failures() -> None:
    result = goodput(gpus=8, ideal_time_s=7 * DAY_S, checkpoint_bytes=7e9 * 16)
    assert isinstance(result.fraction, float)
    assert result.fraction > 0.999


# ---------------------------------------------------------------- simulation


def _simulate(
    *, ideal: float, tau: float, stall: float, lag: float, restart: float, mtbf: float, seed: int
) -> float:
    """Goodput of one simulated run: exponential failures, checkpoints every τ of compute.

    A synchronous checkpoint (lag 0) is durable when its stall ends; an
    asynchronous one `lag` seconds later. A failure rolls back to the newest
    durable checkpoint and costs `restart`, during which failures restart the restart.
    """
    rnd = random.Random(seed)
    t = progress = durable = 0.0
    pending: tuple[float, float] | None = None  # (progress saved, durable at)
    fail_at = rnd.expovariate(1 / mtbf)

    def settle(now: float) -> None:
        nonlocal durable, pending
        if pending is not None and pending[1] <= now:
            durable, pending = pending[0], None

    def fail() -> None:
        nonlocal t, progress, pending, fail_at
        settle(fail_at)
        t, progress, pending = fail_at, durable, None
        while True:
            fail_at = t + rnd.expovariate(1 / mtbf)
            if fail_at >= t + restart:
                t += restart
                return
            t = fail_at

    while progress < ideal:
        step = min(tau, ideal - progress)
        if fail_at < t + step:
            fail()
            continue
        t += step
        progress += step
        if progress >= ideal:
            break
        if fail_at < t + stall:
            fail()
            continue
        t += stall
        settle(t)
        if lag == 0:
            durable = progress
        else:
            pending = (progress, t + lag)
    return ideal / t


@pytest.mark.parametrize(
    ("checkpoint_bytes", "is_async", "gpu_mtbf_s", "tolerance"),
    [
        # M = 10^4 s, R = 300 s, sync δ = 10 s: (τ + δ + R) / M ≈ 0.075
        (1e10, False, 1e6, 0.005),
        # async: stall = 1e11 / 100 GPUs / 1e8 = 10 s, background write 100 s
        (1e11, True, 1e6, 0.005),
        # M = 3000 s: first-order terms are no longer small; the model stays pessimistic
        (1e10, False, 3e5, 0.015),
    ],
)
def test_first_order_model_matches_a_simulation(
    checkpoint_bytes: float, is_async: bool, gpu_mtbf_s: float, tolerance: float
) -> None:
    params: dict[str, typing.Any] = {
        "gpus": 100, "ideal_time_s": 4e7, "checkpoint_bytes": checkpoint_bytes,
        "storage_bytes_per_s": 1e9, "gpu_mtbf_s": gpu_mtbf_s, "restart_s": 300.0,
        "async_checkpoint": is_async, "snapshot_bytes_per_s_per_gpu": 1e8,
    }  # fmt: skip
    model = goodput(**params)
    lag = model.checkpoint_write_s if is_async else 0.0
    assert isinstance(model.fraction, float)
    assert isinstance(model.checkpoint_interval_s, float)
    assert isinstance(model.checkpoint_stall_s, float)
    assert isinstance(model.mtbf_s, float)
    assert isinstance(lag, float)
    simulated = _simulate(
        ideal=4e7,
        tau=model.checkpoint_interval_s,
        stall=model.checkpoint_stall_s,
        lag=lag,
        restart=300.0,
        mtbf=model.mtbf_s,
        seed=7,
    )
    assert simulated == pytest.approx(model.fraction, abs=tolerance)
    # First order charges rework even to failures that strike during a restart, so it
    # errs low; 0.001 covers the simulation's sampling noise.
    assert model.fraction <= simulated + 0.001


# ---------------------------------------------------------------- the storage a plan designs

LLAMA3_JOB_MTBF_S = 182_437_208.6 / 16_384  # 11,135.08 s: the default rate on 16,384 GPUs
CHECKPOINT_405B = 6_493_654_220_800.0  # 405.85e9 parameters x 16 bytes (what a plan writes)


def test_the_designed_write_takes_the_stated_share_by_hand() -> None:
    """x = 2s / (1 + 2s/3 + sqrt(1 + 4s/3)) = 0.02 / (1.0066667 + 1.0066446) = 0.0099339 at
    s = 1 %; δ = 2 M x² = 2 × 11,135.08 × 9.86824e-5 = 2.19766 s, within 1 % of Young's
    2 M s² = 2.22702 s; the 405B checkpoint then needs 6.49365e12 / 2.19766 = 2.95481e12 B/s
    (2,955 GB/s, not the 21.6 GB/s a 300 s write gives)."""
    write_s = gp.checkpoint_write_s_for_share(LLAMA3_JOB_MTBF_S, 0.01)
    assert write_s == pytest.approx(2.19766, rel=1e-5)
    assert write_s == pytest.approx(2 * LLAMA3_JOB_MTBF_S * 0.01**2, rel=0.015)
    assert daly_interval_s(write_s, LLAMA3_JOB_MTBF_S) == pytest.approx(219.766, rel=1e-5)
    rate = gp.designed_checkpoint_write_bytes_per_s(gpus=16_384, checkpoint_bytes=CHECKPOINT_405B)
    assert rate == pytest.approx(2.95481e12, rel=1e-5)
    assert gp.CHECKPOINT_WRITE_SHARE == 0.01
    assert gp.CHECKPOINT_WRITE_MAX_S == 300.0


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=10.0, max_value=1e9),
    st.floats(min_value=1e-4, max_value=0.5),
)
def test_the_designed_write_is_the_share_of_dalys_interval(mtbf_s: float, share: float) -> None:
    write_s = gp.checkpoint_write_s_for_share(mtbf_s, share)
    assert write_s / daly_interval_s(write_s, mtbf_s) == pytest.approx(share, rel=1e-9)


def test_goodput_at_the_designed_storage_pays_the_share_and_sustains_one_write_per_interval() -> (
    None
):
    """At the rate the design builds the goodput model stalls 1 % of the compute time, and the
    storage finishes each (synchronous) write well inside the interval; loss by hand:
    δ/τ + (τ + δ)/2M + R/M = 0.0100 + 0.0100 + 0.0539, goodput 0.99010 × 0.93615 = 0.92688."""
    rate = gp.designed_checkpoint_write_bytes_per_s(gpus=16_384, checkpoint_bytes=CHECKPOINT_405B)
    g = goodput(
        gpus=16_384,
        ideal_time_s=72 * DAY_S,
        checkpoint_bytes=CHECKPOINT_405B,
        storage_bytes_per_s=rate,
    )
    assert g.checkpoint_write_s / g.checkpoint_interval_s == pytest.approx(0.01, rel=1e-9)
    assert g.checkpoint_write_s < g.checkpoint_interval_s
    assert g.fraction == pytest.approx(0.92688, abs=1e-5)


def test_a_small_run_still_writes_within_the_rule_of_thumb() -> None:
    """On 8 GPUs the job MTBF is 264 days: 1 % of Daly's interval would allow a 1.3 h write;
    the floor holds it to 300 s (checkpoint / 300 s)."""
    rate = gp.designed_checkpoint_write_bytes_per_s(gpus=8, checkpoint_bytes=1.12e12)
    assert rate == pytest.approx(1.12e12 / 300.0)
    assert gp.checkpoint_write_s_for_share(182_437_208.6 / 8, 0.01) > 300.0


def test_a_fixed_interval_gets_the_share_of_it_and_arrays_broadcast() -> None:
    rate = gp.designed_checkpoint_write_bytes_per_s(
        gpus=1024, checkpoint_bytes=1e12, checkpoint_interval_s=3600.0
    )
    assert rate == pytest.approx(1e12 / 36.0)
    rates = np.asarray(
        gp.designed_checkpoint_write_bytes_per_s(
            gpus=np.array([8, 16_384]), checkpoint_bytes=CHECKPOINT_405B
        )
    )
    assert np.shape(rates) == (2,)
    assert rates[0] == pytest.approx(CHECKPOINT_405B / 300.0)
    assert rates[1] == pytest.approx(2.95481e12, rel=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpus": 8, "checkpoint_bytes": 0.0}, "checkpoint_bytes"),
        ({"gpus": 8, "checkpoint_bytes": 1e12, "write_share": 0.0}, "write_share"),
        ({"gpus": 8, "checkpoint_bytes": 1e12, "max_write_s": 0.0}, "max_write_s"),
    ],
)
def test_designed_storage_rejects_bad_inputs(kwargs: dict[str, typing.Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gp.designed_checkpoint_write_bytes_per_s(**kwargs)
