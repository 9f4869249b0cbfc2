"""The planner page's figures for plans of several workloads, against the plan's own.

The page used to headline `recommendation.total_gpus`, every workload's GPUs added up as if
all ran at once, as the plan's size. Workloads that run at different times share a fleet,
and an on-prem cluster is whole nodes, so the plan's decision names another number
(year-of-runs rents 528 at once, not 1,296; shared-cluster builds 560, not 553). Each test
plans the example here as well, with the same engine, and reads the figure the page must
show from that plan's data.
"""

from __future__ import annotations

import html
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.formatting import fmt_num, fmt_usd
from gpufleet.plan.model import Plan
from gpufleet.plan.planner import plan
from gpufleet.portal.planner import headline
from gpufleet.specs.load import validate
from gpufleet.specs.plan import PlanSpec

from .conftest import Portal

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FIGURE_RE = re.compile(r'<dd id="(plan-[\w-]+)">(.*?)</dd>', re.S)


def _spec_text(name: str) -> str:
    return (EXAMPLES / f"{name}.yaml").read_text()


@cache
def _plan(name: str, deployment: str | None = None) -> Plan:
    """The example planned in this process (a second of CPU or so, so once per module)."""
    data: dict[str, Any] = yaml.safe_load(_spec_text(name))
    if deployment is not None:
        data["deployment"] = deployment
    return plan(validate(PlanSpec, data, name))


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _page(portal: Portal, name: str) -> tuple[str, dict[str, str]]:
    """The planner page for the pasted example: its decision line and its figures by id."""
    r = portal.as_("vision-member").post(
        "/portal/planner", {"spec_yaml": _spec_text(name), "action": "plan"}
    )
    assert r.status_code == 200, r.text[:500]
    summary = re.search(r'<p id="plan-summary">(.*?)</p>', r.text, re.S)
    assert summary, "the page has no decision line"
    return _text(summary.group(1)), {k: _text(v) for k, v in FIGURE_RE.findall(r.text)}


@pytest.mark.parametrize(
    ("name", "deployment"), [("plan-year-of-runs", "cloud"), ("plan-shared-cluster", "on-prem")]
)
def test_a_multi_workload_plan_shows_the_fleet_its_report_states(
    portal: Portal, name: str, deployment: str
) -> None:
    result = _plan(name)
    rec, summary = result.recommendation, result.summary
    assert summary is not None
    assert rec.deployment == deployment
    assert len(rec.workloads) > 1
    # the fleet the plan's data records: the designed cluster when owning, what is rented
    # at once when renting; either way not the workloads' GPUs added up
    fleet = result.design.gpus if deployment == "on-prem" and result.design else rec.gpus_at_once
    assert fleet is not None
    assert fleet != rec.total_gpus

    decision, figures = _page(portal, name)
    assert decision == f"{summary.decision}."  # the report's own sentence
    assert figures["plan-fleet-gpus"].startswith(f"{fleet:,} × {rec.accelerator}, ")
    assert f"{fleet:,} × {rec.accelerator}" in summary.decision
    assert figures["plan-gpus-at-once"] == f"{rec.gpus_at_once:,}"
    if rec.total_gpus != rec.gpus_at_once:  # the sum, labelled as the workloads' sum
        assert figures["plan-gpus-added-up"].startswith(
            f"{rec.total_gpus:,} across the {len(rec.workloads)} workloads"
        )
    else:
        assert "plan-gpus-added-up" not in figures
    assert figures["plan-cost"] == (
        f"{fmt_usd(summary.cost_usd)} {summary.cost_what} (likely "
        f"{fmt_usd(summary.cost_low_usd)} to {fmt_usd(summary.cost_high_usd)})"
    )
    assert figures["plan-gpu-hours"].startswith(
        f"{fmt_num(result.cost.mix['demand_gpu_hours'])} GPU-hours"
    )


def test_rented_whole_instances_are_the_fleet_when_they_hold_more_than_is_used() -> None:
    """Renting whole 8-GPU instances, the decision names the GPUs on them (1,168 for 1,167 in
    use at once when the shared cluster is rented): the page reads the same field."""
    result = _plan("plan-shared-cluster", "cloud")
    rec, mix, summary = result.recommendation, result.cost.mix, result.summary
    assert summary is not None
    assert rec.deployment == "cloud"
    rented = int(mix["rented_gpus"])
    assert rec.gpus_at_once is not None
    assert rented > rec.gpus_at_once
    shown = headline(result)
    assert shown.fleet_gpus == rented
    assert shown.fleet_text in summary.decision
    assert f"{int(mix['rented_instances']):,} {int(mix['instance_gpus'])}-GPU" in shown.fleet_how
    assert shown.gpus_at_once == rec.gpus_at_once


@pytest.mark.parametrize(
    ("name", "deployment"),
    [
        ("plan-year-of-runs", None),
        ("plan-shared-cluster", None),
        ("plan-shared-cluster", "cloud"),
        ("plan-year-of-runs", "on-prem"),
    ],
)
def test_the_fleet_shown_is_the_one_the_decision_names(name: str, deployment: str | None) -> None:
    """`headline` picks among the plan's fields as `plan.summary` does when it writes the
    decision: if that rule changes there, this says so here."""
    result = _plan(name, deployment)
    assert result.summary is not None
    shown = headline(result)
    assert shown.fleet_text in result.summary.decision
    assert shown.decision == result.summary.decision
    assert shown.cost_usd == result.summary.cost_usd
    assert shown.accelerator == result.recommendation.accelerator


@pytest.mark.parametrize("name", ["plan-multi-team", "plan-three-teams"])
def test_a_multi_team_spec_is_sent_to_the_command(portal: Portal, name: str) -> None:
    """A `teams:` spec is simulated (minutes of CPU): the page says to run `gpufleet plan`,
    where it used to list the single-plan fields such a spec lacks ("teams: unknown field")."""
    r = portal.as_("vision-member").post(
        "/portal/planner", {"spec_yaml": _spec_text(name), "action": "plan"}
    )
    assert r.status_code == 422
    error = re.search(r'id="spec-yaml-error">(.*?)</p>', r.text, re.S)
    assert error
    assert "gpufleet plan SPEC --out DIR" in html.unescape(error.group(1))
    assert "unknown field" not in error.group(1)
    assert 'id="plan-summary"' not in r.text
