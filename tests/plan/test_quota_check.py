"""The quotas a multi-team plan prints pass their own check (issue 25): for the three-team
case of the issue and both shipped multi-team examples, the quotas read back from plan.json
are simulated again, outside the planner's search, on the plan's seeds; every team must meet
its targets, at the size the quotas are for. A plan may instead say plainly that no split
meets them ("not a recommendation"); then the re-simulation must agree that it misses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.cli.main import main
from gpufleet.plan.fleet_model import FleetPlan
from gpufleet.plan.fleet_quotas import quota_check_variant
from gpufleet.plan.fleet_search import assess
from gpufleet.plan.fleet_sim import run_seed
from gpufleet.specs.fleet import FleetPlanSpec
from gpufleet.specs.load import load

from .fleet_cases import ROOT

SEEDS = 2  # the plan's seeds 0..1: the check repeats the plan's own runs, not new ones
EXAMPLES = ("plan-three-teams.yaml", "plan-multi-team.yaml", "plan-multi-team-mix.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES)
def test_the_printed_quotas_meet_every_target_when_simulated_again(
    example: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = ROOT / "examples" / example
    out = tmp_path / "out"
    code = main(["plan", str(path), "--out", str(out), "--seeds", str(SEEDS), "--workers", "2"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    plan = FleetPlan.model_validate(json.loads((out / "plan.json").read_text(encoding="utf-8")))
    quotas = plan.quotas
    assert quotas is not None
    assert quotas.verdict
    assert quotas.verdict in " ".join(printed.split())  # the terminal says what plan.json says

    spec = load(FleetPlanSpec, path)
    variant, nodes = quota_check_variant(spec, path.parent, plan)
    again = assess(spec, [run_seed(variant, nodes, seed) for seed in range(SEEDS)])
    assert again.passed == quotas.recommended, [t.reasons for t in again.teams]
    if quotas.recommended:
        assert quotas.verdict.startswith(("verified", "no quota split tried"))
        # the printed quotas are those simulated: whole GPUs that split the size they are for
        assert sum(q.guaranteed_gpus for q in quotas.teams) == quotas.gpus
        assert f"quotas at {quotas.gpus:,} GPUs" in printed
    else:
        assert quotas.verdict.startswith("not a recommendation")
        assert "NOT verified" in printed
