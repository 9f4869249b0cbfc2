"""Hypothesis: decide() over random small clusters, teams and queues.

Properties: the given state is unchanged; admitted claims never overlap each
other or what the state already holds; every admitted gang has exactly
workers × gpus GPUs with each worker on one node (and within one group of a
required level); jobs that may not use spot are never on spot; each team stays
within guaranteed + what its cohort can lend and under its cap, and a cohort
never exceeds the sum of its guarantees; every job left pending has a reason.
GPUFLEET_PROPERTY_SCALE multiplies max_examples.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.cluster import MILLI, Cluster, Node, State, Whole
from gpufleet.sched.decide import decide
from gpufleet.sched.quota import MILLI_PER_EIGHTH
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

from .scenarios import H100

SCALE = float(os.environ.get("GPUFLEET_PROPERTY_SCALE", "1"))


@st.composite
def worlds(draw: st.DrawFn) -> tuple[Cluster, State, list[JobSpec], TeamsSpec, str]:
    nodes: list[Node] = []
    for leaf in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 3))):
            gpus = draw(st.sampled_from([4, 8]))
            nodes.append(
                Node(
                    f"n{len(nodes)}",
                    H100,
                    gpus,
                    ("b1", f"l{leaf}"),
                    capacity=draw(st.sampled_from(["on-demand", "reserved", "spot"])),
                    fractions=draw(st.booleans()),
                )
            )
    cluster = Cluster(("block", "leaf", "node"), tuple(nodes))
    state = State(cluster)
    for node in nodes:  # some GPUs already held by a job outside any team
        held = draw(st.lists(st.integers(0, node.gpus - 1), unique=True, max_size=node.gpus))
        if held:
            state.allocate(f"x-{node.name}", Whole(node.name, tuple(sorted(held))))
    team_specs: list[dict[str, Any]] = []
    for t in range(draw(st.integers(1, 3))):
        g = draw(st.integers(0, 24))
        spec: dict[str, Any] = {
            "name": f"t{t}",
            "cohort": draw(st.sampled_from([None, "c", "c"])),
            "quota": {H100: g},
        }
        if draw(st.booleans()):
            spec["lending_limit"] = {H100: draw(st.integers(0, g))}
        if draw(st.booleans()):
            spec["borrowing_limit"] = {H100: draw(st.integers(0, 16))}
        team_specs.append(spec)
    team_specs.append({"name": "noquota", "quota": {}})
    teams = TeamsSpec.model_validate({"kind": "teams", "teams": team_specs})
    names = [t["name"] for t in team_specs]
    pending: list[JobSpec] = []
    for i in range(draw(st.integers(0, 8))):
        base: dict[str, Any] = {
            "name": f"j{i}",
            "team": draw(st.sampled_from(names)),
            "kind": draw(st.sampled_from(["training", "inference", "batch"])),
            "submitted_s": draw(st.integers(0, 5)),
            "priority_class": draw(st.sampled_from([None, "production", "opportunistic"])),
        }
        if draw(st.booleans()):
            base["checkpoint_interval_s"] = 600
        if draw(st.integers(0, 4)) == 0:
            base["gpu_fraction"] = draw(st.sampled_from([0.125, 0.25, 0.5, 0.9]))
        else:
            base["gpus"] = draw(st.sampled_from([1, 2, 4, 8]))
            base["workers"] = draw(st.integers(1, 3))
            level = draw(st.sampled_from([None, None, "leaf", "node", "block"]))
            if level:
                base["topology"] = {"required": level}
        pending.append(JobSpec.model_validate(base))
    profile = draw(st.sampled_from(["default", "fifo"]))
    return cluster, state, pending, teams, profile


@settings(max_examples=int(400 * SCALE), deadline=None)
@given(worlds())
def test_decide_properties(world: tuple[Cluster, State, list[JobSpec], TeamsSpec, str]) -> None:
    cluster, state, pending, teams, profile = world
    before = (state.dump(), state.version)
    d = decide(cluster, state, [], pending, teams, profile=profile)
    assert (state.dump(), state.version) == before

    # everyone is either admitted or has a reason
    names = {j.name for j in pending}
    assert set(d.admitted) | set(d.pending_reasons) == names
    assert not set(d.admitted) & set(d.pending_reasons)
    assert all(r.strip() for r in d.pending_reasons.values())

    # no overlap: every admitted claim lands on top of the existing holdings
    with state.branch() as b:
        for job, placements in d.admitted.items():
            b.allocate(job, *[c for p in placements for c in p.claims()])

    used: dict[str, int] = {}
    for job in pending:
        if job.name not in d.admitted:
            continue
        placements = d.admitted[job.name]
        for p in placements:
            node = cluster.node(p.node)
            assert node.accelerator == d.flavors[job.name]
            if not job.spot_ok:
                assert node.capacity != "spot"
        if job.gpus:
            assert len(placements) == job.workers
            assert all(len(p.gpus) == job.gpus and not p.milli for p in placements)
            level = job.topology.required
            if level:
                assert len({cluster.group_of(p.node, level) for p in placements}) == 1
            need = job.total_gpus * MILLI
        else:
            (p,) = placements
            assert job.gpu_fraction is not None
            assert p.milli >= job.gpu_fraction * MILLI
            assert p.milli % MILLI_PER_EIGHTH == 0
            need = p.milli
        used[job.team] = used.get(job.team, 0) + need

    by_name = {t.name: t for t in teams.teams}
    for name, u in used.items():
        team = by_name[name]
        q = team.quota_for(H100)
        assert q is not None, f"{name} has no quota but was admitted"
        lendable = sum(
            o.quotas[0].lendable_gpus
            for o in teams.teams
            if o.name != name and o.cohort == team.cohort and o.quotas
        )
        limit = q.guaranteed_gpus + (lendable if team.cohort else 0)
        if q.max_gpus is not None:
            limit = min(limit, q.max_gpus)
        assert u <= limit * MILLI
    cohort_use = sum(u for n, u in used.items() if by_name[n].cohort == "c")
    cohort_guaranteed = sum(
        t.quotas[0].guaranteed_gpus for t in teams.teams if t.cohort == "c" and t.quotas
    )
    assert cohort_use <= cohort_guaranteed * MILLI
