"""One preemption policy, live and exported (issue 24): for every profile and every pair of
priority classes, the scheduler's own decision (does a job of class A evict a running job of
class B of its team?) is what each export tells its engine:

- Slurm: `PreemptType=preempt/qos` and B in A's QOS `Preempt` list, with the minimum
  runtime as `PreemptExemptTime` and the grace as the QOS `GraceTime` and `KillWait`;
- Kueue: `withinClusterQueue: LowerPriority` when any class evicts another;
- Volcano: the `preempt` action, and PriorityClasses that may preempt;
- KAI: A's PriorityClass may preempt and B's value is below KAI's non-preemptible 100.
"""

from __future__ import annotations

import re
from itertools import permutations
from typing import Any

import pytest
import yaml

from gpufleet.cluster import Cluster, State, expand_group
from gpufleet.export.kai import NON_PREEMPTIBLE_FROM
from gpufleet.export.kueue import preemption
from gpufleet.sched.decide import decide
from gpufleet.sched.preempt import GRACE_PERIOD_S, MIN_RUNTIME_S
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import PROFILES
from gpufleet.specs.teams import TeamsSpec

from .scenarios import SCENARIOS, export

NOW_S = 100_000.0
H100 = "h100-sxm5-80gb"
SCENARIO = SCENARIOS["h100-no-mig"]  # two preemptible and two non-preemptible classes


def _fleet(profile: str) -> Any:
    return type(SCENARIO)(SCENARIO.cluster, SCENARIO.teams, profile=profile).fleet()


def _live_evicts(profile: str, preemptor: str, victim: str, ran_s: float = 900.0) -> bool:
    """Does the scheduler evict a team's running `victim`-class job for its `preemptor`-class
    job when the team's quota has room for only one?"""
    classes = [c.model_dump() for c in _fleet(profile).priority_classes]
    spec = TeamsSpec.model_validate(
        {
            "kind": "teams",
            "priority_classes": classes,
            "teams": [{"name": "research", "quota": {H100: 8}, "default_priority": victim}],
        }
    )
    c = Cluster(("block", "leaf", "node"), tuple(expand_group("h", H100, 8, [("b1", "l1")])))
    low = JobSpec.model_validate(
        {
            "name": "low",
            "team": "research",
            "gpus": 8,
            "priority_class": victim,
            "state": "running",
            "placement": [{"node": "h-0", "gpus": list(range(8))}],
            "started_s": NOW_S - ran_s,
        }
    )
    high = JobSpec.model_validate(
        {
            "name": "high",
            "team": "research",
            "gpus": 8,
            "priority_class": preemptor,
            "submitted_s": NOW_S,
        }
    )
    d = decide(c, State(c).snapshot(), [low], [high], spec, profile=profile, now_s=NOW_S)
    return "low" in d.preempted


def _docs(bundle: Any, name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(bundle.files[name]) if d]


def _slurm_pairs(script: str, qos_of: dict[str, str]) -> set[tuple[str, str]]:
    """(preemptor, victim) class pairs from the sacctmgr script's final `Preempt=` lists."""
    name_of = {q: c for c, q in qos_of.items()}
    pairs = set()
    for m in re.finditer(r"where name=(\S+) set Preempt=(\S+)$", script, re.MULTILINE):
        pairs |= {(name_of[m[1]], name_of[v]) for v in m[2].split(",")}
    return pairs


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_export_evicts_what_the_scheduler_evicts(profile: str) -> None:
    fleet = _fleet(profile)
    names = [c.name for c in fleet.priority_classes]
    live = {(a, b) for a, b in permutations(names, 2) if _live_evicts(profile, a, b)}
    any_live = bool(live)

    # Slurm: the QOS preemption lists, the preemption plugin, min runtime, grace
    slurm = export(fleet, "slurm")
    conf = slurm.files["slurm.conf"]
    qos_of = {c.name: c.name for c in fleet.priority_classes}  # these names are Slurm-safe
    assert _slurm_pairs(slurm.files["sacctmgr.sh"], qos_of) == live, profile
    assert ("PreemptType=preempt/qos" in conf) == any_live
    assert f"KillWait={int(GRACE_PERIOD_S)}" in conf
    if any_live:
        minutes, seconds = divmod(int(MIN_RUNTIME_S), 60)
        assert f"PreemptExemptTime=00:{minutes:02d}:{seconds:02d}" in conf
        assert f"GraceTime={int(GRACE_PERIOD_S)}" in slurm.files["sacctmgr.sh"]

    # Kueue: a ClusterQueue is a team; its own lower-priority workloads are evicted or not
    within = preemption(fleet, [])["withinClusterQueue"]
    assert within == ("LowerPriority" if any_live else "Never"), profile

    # Volcano: the preempt action and PriorityClasses allowed to preempt
    volcano = export(fleet, "volcano")
    conf_text = _docs(volcano, "scheduler-configmap.yaml")[0]["data"]
    actions = next(iter(conf_text.values()))
    assert ("preempt," in actions) == any_live, actions
    for pc in _docs(volcano, "priority-classes.yaml"):
        assert (pc["preemptionPolicy"] == "PreemptLowerPriority") == any_live

    # KAI: preemptible iff the value is below 100; a class may preempt iff its policy says so
    kai_bundle = export(fleet, "kai")
    kai = {pc["metadata"]["name"]: pc for pc in _docs(kai_bundle, "priority-classes.yaml")}
    kai_pairs = {
        (a, b)
        for a, b in permutations(names, 2)
        if kai[a]["preemptionPolicy"] == "PreemptLowerPriority"
        and kai[b]["value"] < NON_PREEMPTIBLE_FROM
        and kai[a]["value"] > kai[b]["value"]
    }
    # KAI ranks every non-preemptible class above the preemptible ones: where gpufleet puts
    # a preemptible class above a non-preemptible one, KAI lets the latter evict the former,
    # the one difference it cannot avoid, and its NOTES say so
    by_name = {c.name: c for c in fleet.priority_classes}
    inverted = {
        (a, b)
        for a, b in permutations(names, 2)
        if any_live
        and not by_name[a].preemptible
        and by_name[b].preemptible
        and by_name[a].value < by_name[b].value
    }
    assert kai_pairs == live | inverted, profile
    if inverted:
        assert any("non-preemptible class ranks above" in n for n in kai_bundle.notes)


def test_the_scenario_exercises_both_answers() -> None:
    """The table above is not vacuous: some profile evicts, some does not, and the minimum
    runtime protects a young job in the live scheduler as PreemptExemptTime does in Slurm."""
    verdicts = {p: _live_evicts(p, "critical", "scavenger") for p in PROFILES}
    assert any(verdicts.values())
    assert not all(verdicts.values())
    evicting = next(p for p, v in verdicts.items() if v)
    assert not _live_evicts(evicting, "critical", "scavenger", ran_s=MIN_RUNTIME_S - 1)
    assert not _live_evicts(evicting, "critical", "serving")  # serving is not preemptible
