"""The emulated executor's busy profiles: realistic on average, and the same every time."""

from __future__ import annotations

from statistics import mean

import pytest

from gpufleet.telemetry.emulated import (
    CHECKPOINT_EVERY_S,
    PROFILES,
    EmulatedCollector,
    EmulatedJob,
    busy_pct,
)

DAY_S = 86_400.0


def day(profile: str, job: str, gpu: int = 0, start_s: float = 1_000.0) -> list[float]:
    return [busy_pct(profile, job, gpu, start_s, start_s + t) for t in range(0, int(DAY_S), 10)]


@pytest.mark.parametrize("job", ["1", "2", "77", "job-x"])
def test_idle_stays_below_5_percent(job: str) -> None:
    values = day("idle", job)
    assert max(values) < 5
    assert mean(values) < 5


@pytest.mark.parametrize("job", ["1", "2", "77", "job-x"])
def test_training_is_above_80_percent_on_average_with_checkpoint_dips(job: str) -> None:
    values = day("training", job)
    assert mean(values) > 80
    dip = busy_pct("training", job, 0, 0.0, CHECKPOINT_EVERY_S + 10)
    assert dip < 20
    assert busy_pct("training", job, 0, 0.0, 30.0) < 20  # loading


def test_notebooks_are_mostly_idle_with_bursts() -> None:
    values = day("notebook", "5")
    assert 3 < mean(values) < 20
    assert sum(v < 5 for v in values) / len(values) > 0.75
    assert max(values) > 40


def test_inference_sits_in_between() -> None:
    assert 30 < mean(day("inference", "9")) < 70


def test_readings_are_deterministic_and_differ_between_jobs() -> None:
    assert day("training", "3") == day("training", "3")
    assert day("training", "3") != day("training", "4")
    assert all(0 <= v <= 100 for p in PROFILES for v in day(p, "8")[:500])


def test_unknown_profile_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="training, inference, notebook, idle"):
        busy_pct("gaming", "1", 0, 0.0, 1.0)


def test_the_collector_reads_held_and_free_gpus() -> None:
    jobs = [
        EmulatedJob("11", "training", "n1", (0, 1), start_s=0.0),
        EmulatedJob("12", "idle", "n1", (3,), start_s=0.0),
    ]
    collector = EmulatedCollector(lambda: jobs, free_gpus=lambda: [("n1", 2)])
    samples = collector.collect(3_600.0 + 600)
    assert [(s.gpu_index, s.job_id) for s in samples] == [
        (0, "11"),
        (1, "11"),
        (2, None),
        (3, "12"),
    ]
    busy, _, free, idle = samples
    assert busy.sm_util_pct > 80
    assert free.sm_util_pct == 0.0
    assert idle.sm_util_pct < 5
    assert busy.power_w == pytest.approx(70 + 630 * busy.sm_util_pct / 100, abs=0.1)
    assert idle.power_w == pytest.approx(70 + 630 * idle.sm_util_pct / 100, abs=0.1)
    assert (busy.mem_used_bytes or 0) > 0.8 * 80 * 2**30
    assert collector.collect(4_200.0) == samples
