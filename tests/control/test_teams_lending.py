"""`GET /api/v1/teams`: what a team lends is borrowing by its own cohort, split among the
cohort's lenders, so per cohort and flavor the GPUs lent add up to the GPUs borrowed
(a review saw lent 8 for three teams while 16 were borrowed, and lent 8 in a cohort
where nobody borrowed: every other team's borrowing was given to every lender)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from gpufleet.api.routes_cluster import _lent_by_team
from gpufleet.cluster import Cluster
from gpufleet.control import admin
from gpufleet.control.models import Quota, Team
from gpufleet.specs.cluster import ClusterSpec

from .conftest import Plane, build_plane

H100 = "h100-sxm5-80gb"
FOUR_BY_EIGHT = {
    "kind": "cluster",
    "name": "small",
    "nodes": [{"name": "h", "count": 4, "accelerator": H100, "gpus_per_node": 8}],
}
# (team, cohort, guaranteed H100s, borrowing limit)
TEAMS = [
    ("lender-a", "ml", 8, None),
    ("lender-b", "ml", 8, None),
    ("borrower", "ml", 0, 16),
    ("other", "cv", 8, None),
    ("other-borrow", "cv", 0, None),
]


@pytest.fixture
def cohorts(sqlite_engine: Engine) -> Plane:
    """The review's setup on 4x8 H100: two cohorts, one borrowing team in each."""
    plane = build_plane(sqlite_engine, Cluster.from_spec(ClusterSpec.model_validate(FOUR_BY_EIGHT)))
    actor = admin.cli_principal()
    now = plane.clock()
    with plane.sessions.begin() as s:
        for fixture_team in ("vision", "nlp"):  # the plane's own teams: out of the cohorts
            admin.update_team(s, actor, fixture_team, now, cohort="")
        for name, cohort, guaranteed, borrowing in TEAMS:
            admin.create_team(s, actor, name, now, cohort=cohort, max_priority_class="production")
            s.flush()
            admin.set_quota(
                s,
                actor,
                name,
                H100,
                now,
                guaranteed_gpus=guaranteed,
                borrowing_limit_gpus=borrowing,
            )
            plane.tokens[name] = admin.create_token(
                s, actor, now, role="member", team=name, user=f"{name}-member", expires_s=None
            ).token
    return plane


def submit(plane: Plane, team: str, gpus: int) -> int:
    body = {"name": "j", "gpus": gpus, "accelerator": H100, "runtime_estimate_s": 36_000}
    r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth(team))
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def quotas(plane: Plane) -> dict[str, dict[str, Any]]:
    """Team -> its H100 quota row as the API gives it to an admin."""
    teams = plane.client.get("/api/v1/teams", headers=plane.auth("admin")).json()
    return {t["name"]: q for t in teams for q in t["quotas"] if q["flavor"] == H100}


def conserved(plane: Plane) -> dict[str, tuple[float, float]]:
    """Per cohort: (GPUs lent, GPUs borrowed), asserting they are equal."""
    cohort_of = {
        t["name"]: t["cohort"]
        for t in plane.client.get("/api/v1/teams", headers=plane.auth("admin")).json()
    }
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for team, q in quotas(plane).items():
        if cohort_of[team] is None:
            continue
        sums[cohort_of[team]][0] += q["lent_gpus"]
        sums[cohort_of[team]][1] += q["borrowed_gpus"]
    for cohort, (lent, borrowed) in sums.items():
        assert lent == pytest.approx(borrowed), cohort
    return {c: (lent, borrowed) for c, (lent, borrowed) in sums.items()}


def test_lent_is_the_cohorts_borrowing_split_among_its_lenders(cohorts: Plane) -> None:
    job = submit(cohorts, "borrower", 8)
    submit(cohorts, "other-borrow", 8)
    cohorts.cycle()
    got = quotas(cohorts)
    assert got["borrower"]["borrowed_gpus"] == 8
    assert got["other-borrow"]["borrowed_gpus"] == 8
    # ml: both lenders have 8 idle, so each lends half of the 8 borrowed; cv: other lends 8
    assert [got[t]["lent_gpus"] for t in ("lender-a", "lender-b", "other")] == [4, 4, 8]
    assert conserved(cohorts) == {"ml": (8, 8), "cv": (8, 8)}

    r = cohorts.client.post(f"/api/v1/jobs/{job}/cancel", headers=cohorts.auth("admin"))
    assert r.status_code in (200, 202), r.text
    cohorts.cycle(1)
    cohorts.cycle(60)  # past the grace period: its GPUs are released
    got = quotas(cohorts)
    assert got["borrower"]["used_gpus"] == 0  # nobody in ml borrows now
    assert [got[t]["lent_gpus"] for t in ("lender-a", "lender-b", "other")] == [0, 0, 8]
    assert conserved(cohorts) == {"ml": (0, 0), "cv": (8, 8)}


def test_a_lender_using_part_of_its_guarantee_lends_in_proportion_to_what_it_leaves_idle(
    cohorts: Plane,
) -> None:
    submit(cohorts, "lender-a", 4)  # lender-a leaves 4 idle, lender-b 8
    cohorts.cycle()
    submit(cohorts, "borrower", 6)
    cohorts.cycle()
    got = quotas(cohorts)
    assert got["borrower"]["borrowed_gpus"] == 6
    assert got["lender-a"]["lent_gpus"] == pytest.approx(2)  # 6 x 4/12
    assert got["lender-b"]["lent_gpus"] == pytest.approx(4)  # 6 x 8/12
    assert conserved(cohorts)["ml"] == pytest.approx((6, 6))


def test_a_member_sees_its_own_share_of_its_cohorts_borrowing(cohorts: Plane) -> None:
    submit(cohorts, "borrower", 8)
    cohorts.cycle()
    mine = cohorts.client.get("/api/v1/teams", headers=cohorts.auth("lender-a")).json()
    assert [(t["name"], t["quotas"][0]["lent_gpus"]) for t in mine] == [("lender-a", 4)]


@st.composite
def cohort_states(draw: st.DrawFn) -> tuple[list[Team], dict[tuple[int, str], float]]:
    """Teams in two cohorts (and some in none) and what each holds of two flavors, within
    what the scheduler allows: a cohort never holds more than its members' guarantees, and
    borrowing comes out of what its members could lend (lendable GPUs they do not use)."""
    teams: list[Team] = []
    held: dict[tuple[int, str], float] = {}
    for tid in range(draw(st.integers(1, 7))):
        team = Team(id=tid, name=f"t{tid}", cohort=draw(st.sampled_from(["ml", "cv", None])))
        for flavor in ("h100", "a100"):
            g = draw(st.integers(0, 16))
            lending = draw(st.booleans())
            limit = draw(st.none() | st.integers(0, g))
            team.quotas.append(
                Quota(flavor=flavor, guaranteed_gpus=g, lending=lending, lending_limit_gpus=limit)
            )
        teams.append(team)
    for flavor in ("h100", "a100"):
        for cohort in ("ml", "cv"):
            rows = [
                (t.id, q)
                for t in teams
                if t.cohort == cohort
                for q in t.quotas
                if q.flavor == flavor
            ]
            pool = 0.0  # what the cohort could lend after its lenders' own use
            for tid, q in rows:
                used = draw(st.sampled_from([0.0, 0.5, 1.0, 0.25])) * q.guaranteed_gpus
                held[(tid, flavor)] = used
                lendable = (
                    q.guaranteed_gpus if q.lending_limit_gpus is None else q.lending_limit_gpus
                )
                pool += min(lendable if q.lending else 0, q.guaranteed_gpus - used)
            for tid, q in rows:  # borrowers take from the pool, as far as it goes
                if held[(tid, flavor)] >= q.guaranteed_gpus and pool > 0:
                    more = draw(st.floats(0, pool, allow_nan=False))
                    held[(tid, flavor)] += more
                    pool -= more
    return teams, held


@given(cohort_states())
@settings(max_examples=300, deadline=None)
def test_lent_adds_up_to_borrowed_per_cohort_and_flavor(
    state: tuple[list[Team], dict[tuple[int, str], float]],
) -> None:
    teams, held = state
    lent = _lent_by_team(held, teams)
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for t in teams:
        for q in t.quotas:
            used = held.get((t.id, q.flavor), 0.0)
            mine = lent.get((t.id, q.flavor), 0.0)
            assert mine >= 0
            if t.cohort is None:
                assert mine == 0
                continue
            lendable = q.guaranteed_gpus if q.lending_limit_gpus is None else q.lending_limit_gpus
            could = min(lendable if q.lending else 0, max(0.0, q.guaranteed_gpus - used))
            assert mine <= could + 1e-9  # never more than it leaves idle to lend
            sums[(t.cohort, q.flavor)][0] += mine
            sums[(t.cohort, q.flavor)][1] += max(0.0, used - q.guaranteed_gpus)
    for key, (lent_gpus, borrowed_gpus) in sums.items():
        assert lent_gpus == pytest.approx(borrowed_gpus, abs=1e-9), key
