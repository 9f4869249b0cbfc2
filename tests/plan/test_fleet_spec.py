"""The multi-team plan spec: the issue's example loads, bad specs fail with their path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.errors import SpecError
from gpufleet.specs.fleet import FleetPlanSpec, load_plan, plan_model_for
from gpufleet.specs.kinds import load_spec
from gpufleet.specs.plan import PlanSpec

from .fleet_cases import ROOT, TINY, spec, tiny, write_spec

ISSUE_EXAMPLE = """
kind: plan
deployment: on-prem
accelerators: [h100-sxm5-80gb, h200-sxm-141gb]
horizon: 14d
teams:
  - name: vision
    targets: {wait_p95: 2h}
    workloads:
      - {kind: training, arrivals_per_day: 20,
         gpus: {choices: [8, 16, 32], weights: [0.6, 0.3, 0.1]},
         duration: {lognormal_median: 4h, sigma: 1.0}, preemptible: true, checkpoint_interval: 1h}
      - {kind: inference, model: {preset: llama-3-8b}, request_rate: 25, slo: {ttft_p99_ms: 800}}
  - name: research
    targets: {wait_p95: 6h}
    trace: {path: past_jobs.csv, format: sacct}
"""


def test_the_issue_example_is_a_multi_team_plan(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(ISSUE_EXAMPLE, encoding="utf-8")
    plan = load_plan(path)
    assert isinstance(plan, FleetPlanSpec)
    vision, research = plan.teams
    assert vision.targets.wait_p95 == 7200
    assert vision.targets.long_run_limit_s == 14400
    assert research.trace is not None
    assert research.trace.format == "sacct"
    assert plan.horizon == 14 * 86400
    assert plan.warmup_s == 86400
    assert isinstance(load_spec(path), FleetPlanSpec)  # `gpufleet check` reads it the same way


@pytest.mark.parametrize(
    ("path", "model"),
    [
        pytest.param("examples/plan-multi-team.yaml", FleetPlanSpec, id="multi-team-example"),
        pytest.param("examples/plan-multi-team-mix.yaml", FleetPlanSpec, id="mix-example"),
        pytest.param("examples/plan-shared-cluster.yaml", PlanSpec, id="workloads-example"),
    ],
)
def test_the_form_follows_teams(path: str, model: type) -> None:
    data = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))
    assert plan_model_for(data) is model
    assert isinstance(load_plan(ROOT / path), model)


def _team(i: int, **changes: Any) -> dict[str, Any]:
    data = tiny()
    data["teams"][i].update(changes)
    return data


def _entry(i: int, j: int, **changes: Any) -> dict[str, Any]:
    data = tiny()
    data["teams"][i]["workloads"][j].update(changes)
    return data


BAD = [
    pytest.param(
        _team(0, targets={}),
        "teams[0]: targets.wait_p95: required for a team with training",
        id="training-without-wait-target",
    ),
    pytest.param(_team(0, priority="urgent"), "unknown priority class 'urgent'", id="priority"),
    pytest.param(
        _team(1, workloads=[]), "teams[1]: give workloads, a trace, or both", id="nothing"
    ),
    pytest.param(
        tiny(profile="defualt"), "profile: unknown scheduling profile 'defualt'", id="profile"
    ),
    pytest.param(
        tiny(compare_profiles=["k8s"]),
        "compare_profiles: unknown scheduling profile 'k8s'",
        id="compare-profile",
    ),
    pytest.param(tiny(warmup="3d"), "warmup", id="warmup-past-horizon"),
    pytest.param(tiny(workloads=[]), "workloads: unknown field", id="teams-and-workloads-mixed"),
    pytest.param(
        tiny(teams=[TINY["teams"][0], TINY["teams"][0]]),
        "teams: names must be unique; repeated: alpha",
        id="duplicate-team",
    ),
    pytest.param(
        _entry(0, 0, accelerators=["h100-sxm5-80gb"]),
        "a multi-team plan chooses the accelerator",
        id="entry-accelerators",
    ),
    pytest.param(
        _team(0, targets={"wait_p95": "2h", "long_run_wait_p95": "1h"}),
        "long_run_wait_p95 (3600 s) is below wait_p95",
        id="long-run-tighter",
    ),
    pytest.param(_entry(0, 1, request_rate=0), "request_rate: must be greater than 0", id="rate"),
    pytest.param(tiny(accelerators=[]), "accelerators: needs at least 1 item", id="no-candidates"),
    pytest.param(tiny(accelerators=["h1000"]), "unknown accelerator 'h1000'", id="accelerator"),
    pytest.param(
        _team(0, trace={"path": "x.csv", "format": "slurm"}), "trace.format", id="trace-format"
    ),
    pytest.param(_team(0, name="has space"), "teams[0].name", id="team-name"),
    pytest.param(tiny(arrival_sensitivity=1.0), "arrival_sensitivity", id="sensitivity"),
]


@pytest.mark.parametrize(("data", "message"), BAD)
def test_bad_specs_say_where(tmp_path: Path, data: dict[str, Any], message: str) -> None:
    path = write_spec(tmp_path, data)
    with pytest.raises(SpecError) as err:
        load_plan(path)
    assert message in str(err.value)


def test_a_file_of_another_kind_is_one_line(tmp_path: Path) -> None:
    path = write_spec(tmp_path, {"kind": "teams", "teams": [{"name": "a"}]})
    with pytest.raises(SpecError, match="this command reads plan specs; this file is kind 'teams'"):
        load_plan(path)


def test_defaults() -> None:
    plan = spec()
    assert plan.profile == "default"
    assert plan.compare_profiles == ["k8s-default"]
    assert plan.arrival_sensitivity == 0.2
    assert plan.warmup_s == 6 * 3600
    chat = plan.teams[0].workloads[1]
    assert chat.kind == "inference"
    assert chat.priority_class == "production"
    assert plan.teams[1].fair_share_weight == 2
    assert plan.teams[1].priority == "standard"
