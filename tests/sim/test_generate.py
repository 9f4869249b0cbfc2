"""The synthetic workload generator: deterministic, faithful to its rates and mixes, and
its spec rejects what it cannot generate with a line a person can act on."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpufleet.errors import SpecError
from gpufleet.sim.generate import (
    DAY_S,
    HOUR_S,
    arrival_times,
    diurnal_load,
    generate,
    inference_replicas,
    mean_load,
)
from gpufleet.sim.workload import TraceJob, Workload
from gpufleet.specs.load import validate
from gpufleet.specs.workload import (
    Diurnal,
    InferenceEntry,
    WorkloadSpec,
    load_workload_spec,
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "sim-workload-mixed.yaml"


def spec(horizon: str, *workloads: dict[str, Any], team: str = "t", **extra: Any) -> WorkloadSpec:
    data = {"horizon": horizon, "teams": [{"name": team, "workloads": list(workloads), **extra}]}
    return validate(WorkloadSpec, data, "test")


def run(s: WorkloadSpec, seed: int = 0) -> Workload:
    return generate(s, np.random.default_rng(seed))


TRAINING: dict[str, Any] = {
    "kind": "training",
    "arrivals_per_day": 20,
    "gpus": {"choices": [8, 16, 32], "weights": [0.6, 0.3, 0.1]},
    "duration": {"lognormal_median": "4h", "sigma": 1.0},
    "runtime_estimate": {"factor": 1.5},
    "checkpoint_interval": "1h",
    "accelerators": ["a100-sxm4-80gb"],
}
INFERENCE: dict[str, Any] = {
    "kind": "inference",
    "services": 4,
    "mig_profile": "3g.40gb",
    "diurnal": {"peak_hour": 14, "trough_ratio": 0.3},
    "duration": {"fixed": "14d"},
    "slo": {"ttft_p99_ms": 800},
}
INTERACTIVE: dict[str, Any] = {
    "kind": "interactive",
    "arrivals_per_day": 30,
    "gpu_fraction": 0.25,
    "duration": {"lognormal_median": "2h", "sigma": 0.8},
}
MIXED = spec("3d", TRAINING, INFERENCE, INTERACTIVE, priority_class="standard")


def of(workload: Workload, kind: str) -> list[TraceJob]:
    return [j for j in workload.jobs if j.kind == kind]


# -- determinism -----------------------------------------------------------------------------


def test_same_seed_gives_identical_jobs_and_another_seed_differs() -> None:
    first, again, other = run(MIXED, 7), run(MIXED, 7), run(MIXED, 8)
    assert first.jobs == again.jobs
    assert first.jobs != other.jobs
    shared = np.random.default_rng(7)
    assert generate(MIXED, shared).jobs == first.jobs
    assert generate(MIXED, shared).jobs != first.jobs  # a second call spawns fresh streams
    assert first.report.source == "generator"
    assert first.report.rows == first.report.kept == len(first.jobs) > 0


def test_an_entry_added_at_the_end_leaves_earlier_entries_unchanged() -> None:
    """One child stream per entry: a sweep over one entry keeps the rest of the cluster."""
    base = run(spec("3d", TRAINING), 3)
    more = run(spec("3d", TRAINING, INTERACTIVE), 3)
    assert of(more, "training") == list(base.jobs)


# -- rates, sizes, durations -----------------------------------------------------------------


def test_long_run_counts_match_the_rates() -> None:
    days = 200
    w = run(spec(f"{days}d", TRAINING, INTERACTIVE), 11)
    for kind, per_day in (("training", 20), ("interactive", 30)):
        count = len(of(w, kind))
        assert abs(count - per_day * days) < 0.05 * per_day * days, (kind, count)
    assert all(0 <= j.submit_s < days * DAY_S for j in w.jobs)


def test_gang_sizes_follow_the_weights_and_split_into_whole_node_workers() -> None:
    jobs = of(run(spec("200d", TRAINING), 5), "training")
    totals = Counter(j.total_gpus for j in jobs)
    for size, weight in ((8, 0.6), (16, 0.3), (32, 0.1)):
        assert abs(totals[size] / len(jobs) - weight) < 0.03, (size, totals)
    shapes = {(j.gpus, j.workers) for j in jobs}
    assert shapes == {(8, 1), (8, 2), (8, 4)}


@pytest.mark.parametrize(
    ("choices", "per_worker", "shapes"),
    [
        pytest.param([1, 2, 4], 8, {(1, 1), (2, 1), (4, 1)}, id="under-a-node-is-one-worker"),
        pytest.param([8], 8, {(8, 1)}, id="exactly-one-node"),
        pytest.param([4, 16], 4, {(4, 1), (4, 4)}, id="four-gpu-workers"),
    ],
)
def test_workers_from_total_gpus(
    choices: list[int], per_worker: int, shapes: set[tuple[int, int]]
) -> None:
    entry = {**TRAINING, "gpus": {"choices": choices}, "gpus_per_worker": per_worker}
    jobs = run(spec("20d", entry)).jobs
    assert {(j.gpus, j.workers) for j in jobs} == shapes


def test_bare_gpu_count_is_a_single_size() -> None:
    jobs = run(spec("5d", {**TRAINING, "gpus": 16})).jobs
    assert {(j.gpus, j.workers) for j in jobs} == {(8, 2)}


def test_duration_distributions_and_bounds() -> None:
    def drawn(duration: dict[str, Any]) -> np.ndarray[Any, np.dtype[np.float64]]:
        jobs = run(spec("100d", {**INTERACTIVE, "arrivals_per_day": 50, "duration": duration}))
        return np.array([j.duration_s for j in jobs.jobs])

    lognormal = drawn({"lognormal_median": "2h", "sigma": 0.8})
    assert abs(np.median(lognormal) / 7200 - 1) < 0.06
    assert abs(np.std(np.log(lognormal)) - 0.8) < 0.05
    exponential = drawn({"exponential_mean": "30min"})
    assert abs(exponential.mean() / 1800 - 1) < 0.05
    assert set(drawn({"fixed": "45min"})) == {2700.0}
    bounded = drawn({"lognormal_median": "2h", "sigma": 2, "min": "10min", "max": "6h"})
    assert bounded.min() == 600.0
    assert bounded.max() == 6 * 3600.0


def test_jobs_carry_the_entry_fields() -> None:
    w = run(MIXED, 2)
    training = of(w, "training")
    assert training
    for j in training:
        assert j.runtime_estimate_s == pytest.approx(1.5 * j.duration_s)
        assert j.checkpoint_interval_s == 3600.0
        assert j.accelerators == ("a100-sxm4-80gb",)
        assert j.preemptible
        assert j.priority_class == "standard"
    for j in of(w, "inference"):
        assert (j.mig_profile, j.gpus, j.slo_ttft_ms) == ("3g.40gb", None, 800.0)
        assert not j.preemptible
        assert j.runtime_estimate_s is None
    for j in of(w, "interactive"):
        assert (j.gpu_fraction, j.gpus, j.preemptible) == (0.25, None, False)
    names = [j.name for j in w.jobs]
    assert len(set(names)) == len(names)
    assert {n.rsplit("-", 1)[0] for n in names} == {"t-training", "t-inference", "t-interactive"}


def test_entry_overrides_team_defaults_and_names_its_jobs() -> None:
    eval_jobs = {
        **TRAINING,
        "kind": "batch",
        "name": "eval",
        "priority_class": "opportunistic",
        "preemptible": False,
        "busy_fraction": 0.4,
        "project": "p1",
    }
    jobs = run(spec("2d", eval_jobs, TRAINING, priority_class="standard")).jobs
    batch = [j for j in jobs if j.kind == "batch"]
    assert batch
    assert all(j.name.startswith("t-eval-") for j in batch)
    assert {(j.priority_class, j.preemptible, j.busy_fraction, j.project) for j in batch} == {
        ("opportunistic", False, 0.4, "p1")
    }
    assert {j.priority_class for j in jobs if j.kind == "training"} == {"standard"}


def test_every_generated_job_is_a_valid_scheduler_job() -> None:
    for j in run(MIXED, 4).jobs:
        job = j.to_job_spec()
        assert (job.name, job.kind, job.workers) == (j.name, j.kind, j.workers)


# -- diurnal load ----------------------------------------------------------------------------


def running_at(jobs: list[TraceJob], t: float) -> int:
    return sum(1 for j in jobs if j.submit_s <= t < j.submit_s + j.duration_s)


def test_inference_replicas_peak_at_the_peak_hour() -> None:
    jobs = of(run(spec("3d", INFERENCE)), "inference")
    peak = [running_at(jobs, d * DAY_S + 14 * HOUR_S + 1) for d in range(3)]
    trough = [running_at(jobs, d * DAY_S + 2 * HOUR_S + 1) for d in range(3)]
    assert peak == [4, 4, 4]  # services at the peak
    assert trough == [2, 2, 2]  # ceil(4 × 0.3) base replicas all day
    assert sum(1 for j in jobs if j.submit_s == 0 and j.duration_s == 14 * DAY_S) == 2


def test_inference_replica_arithmetic() -> None:
    entry = InferenceEntry.model_validate(
        {**INFERENCE, "services": 10, "diurnal": {"peak_hour": 0, "trough_ratio": 0.3}}
    )
    base, extra = inference_replicas(entry, DAY_S)
    assert base == 3  # 10 × 0.3 is 3, not 3.0000000000000004 rounded up to 4
    assert len(extra) == 24
    assert extra[0] == 7  # round(10 × 1.0) − 3
    assert extra[12] == 0  # the trough: base replicas only
    flat = InferenceEntry.model_validate({**INFERENCE, "diurnal": None})
    assert inference_replicas(flat, DAY_S) == (4, [])


def test_without_diurnal_services_run_for_the_horizon_by_default() -> None:
    entry = {**INFERENCE, "diurnal": None, "duration": None, "services": 3}
    jobs = run(spec("2d", entry)).jobs
    assert [(j.submit_s, j.duration_s) for j in jobs] == [(0.0, 2 * DAY_S)] * 3


def test_load_curve_shape() -> None:
    d = Diurnal(peak_hour=14, trough_ratio=0.3)
    hours = np.array([14.0, 2.0, 38.0, 8.0])
    assert diurnal_load(d, hours) == pytest.approx([1.0, 0.3, 1.0, 0.65])
    day = diurnal_load(d, np.linspace(0, 24, 24 * 60, endpoint=False))
    assert day.mean() == pytest.approx(mean_load(d)) == pytest.approx(0.65)


def test_diurnal_arrivals_keep_the_daily_mean_and_crowd_the_peak() -> None:
    d = Diurnal(peak_hour=15, trough_ratio=0.1)
    times = arrival_times(40, 200 * DAY_S, d, np.random.default_rng(9))
    assert abs(len(times) / (40 * 200) - 1) < 0.05
    hours = Counter(int(t // HOUR_S) % 24 for t in times)
    assert hours[15] > 3 * hours[3]
    assert list(times) == sorted(times)


# -- the spec --------------------------------------------------------------------------------


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        validate(WorkloadSpec, data, "w.yaml")
    return info.value.problems


def one_entry(entry: dict[str, Any], horizon: str = "1d") -> dict[str, Any]:
    return {"horizon": horizon, "teams": [{"name": "t", "workloads": [entry]}]}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            one_entry({**TRAINING, "gpus": {"choices": [8, 16], "weights": [1.0]}}),
            "gpus: 1 weights for 2 choices; give one weight per choice",
            id="weights-mismatch",
        ),
        pytest.param(
            one_entry({**TRAINING, "gpus": {"choices": [8, 16], "weights": [0, 0]}}),
            "gpus: weights must not all be 0",
            id="weights-zero",
        ),
        pytest.param(
            one_entry({**INFERENCE, "gpu_fraction": 0.5}),
            "give exactly one of mig_profile, gpu_fraction or gpus (got mig_profile and "
            "gpu_fraction)",
            id="two-request-forms",
        ),
        pytest.param(
            one_entry({**INTERACTIVE, "gpu_fraction": None}),
            "give exactly one of mig_profile, gpu_fraction or gpus (got none)",
            id="no-request",
        ),
        pytest.param(
            one_entry(TRAINING, horizon="0"), "horizon: must be greater than 0", id="horizon"
        ),
        pytest.param(
            one_entry({**TRAINING, "duration": {"fixed": "1h", "exponential_mean": "2h"}}),
            "duration: give exactly one of fixed, lognormal_median or exponential_mean "
            "(got fixed and exponential_mean)",
            id="two-distributions",
        ),
        pytest.param(
            one_entry({**TRAINING, "duration": {"fixed": "1h", "sigma": 1}}),
            "duration: sigma applies only to lognormal_median",
            id="stray-sigma",
        ),
        pytest.param(
            one_entry({**TRAINING, "gpus": {"choices": [8, 12]}}),
            "gpus: 12 is not a multiple of gpus_per_worker (8); a gang is whole workers",
            id="partial-worker",
        ),
        pytest.param(
            one_entry({**INFERENCE, "mig_profile": "3g.45gb"}),
            "mig_profile: '3g.45gb' is not a MIG profile of any accelerator in the catalog; "
            "did you mean ",
            id="mig-typo",
        ),
        pytest.param(
            one_entry({**INFERENCE, "mig_profile": "3g.40gb", "accelerators": ["a100"]}),
            "mig_profile: '3g.40gb' is not a MIG profile of a100-sxm4-40gb; known: 1g.10gb, ",
            id="mig-not-on-this-gpu",
        ),
        pytest.param(
            one_entry({**INFERENCE, "diurnal": {"peak_hour": 24, "trough_ratio": 0.3}}),
            "diurnal.peak_hour: must be less than 24",
            id="peak-hour",
        ),
        pytest.param(
            one_entry({**INFERENCE, "kind": "inferance"}),
            "kind: unknown kind 'inferance'; did you mean 'inference'?",
            id="unknown-kind",
        ),
        pytest.param(
            {
                "horizon": "1d",
                "teams": [{"name": "a", "workloads": [TRAINING]}] * 2,
            },
            "teams: names must be unique; repeated: a",
            id="duplicate-team",
        ),
    ],
)
def test_spec_errors_say_what_to_fix(data: dict[str, Any], expected: str) -> None:
    found = problems(data)
    assert any(expected in p for p in found), found


def test_example_loads_generates_and_matches_its_schema() -> None:
    import jsonschema  # type: ignore[import-untyped]
    import yaml

    s = load_workload_spec(EXAMPLE)
    assert s.horizon == 2 * DAY_S
    assert len(s.teams) >= 2
    w = run(s, 1)
    kinds = Counter(j.kind for j in w.jobs)
    assert set(kinds) == {"training", "batch", "inference", "interactive"}
    assert any(j.mig_profile for j in w.jobs)
    assert any(j.workers > 1 for j in w.jobs)
    for j in w.jobs:
        j.to_job_spec()
    schema = json.loads(json.dumps(WorkloadSpec.model_json_schema()))
    jsonschema.validate(yaml.safe_load(EXAMPLE.read_text()), schema)


def test_loading_a_file_of_another_kind_says_so(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("kind: jobs\njobs: []\n")
    with pytest.raises(SpecError) as info:
        load_workload_spec(path)
    assert info.value.problems == [
        "kind: this command reads workload specs; this file is kind 'jobs'"
    ]


def test_mean_jobs_over_seeds_match_the_expected_total() -> None:
    """Across seeds, Poisson counts average to rate × horizon (no bias from the thinning)."""
    s = spec("10d", {**INTERACTIVE, "diurnal": {"peak_hour": 12, "trough_ratio": 0.2}})
    counts = [len(run(s, seed).jobs) for seed in range(40)]
    expected = 30 * 10
    assert abs(np.mean(counts) - expected) < 4 * math.sqrt(expected / 40)
