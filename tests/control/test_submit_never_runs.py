"""A job that can never run under the cluster and teams of now is refused at submit (422 and
the sentence why), and the store is left as it was; a job that only waits (for free GPUs,
for quota in use or lent, for what its cohort may lend) is accepted.

A review submitted `{"gpus": 1, "accelerator": "l4"}` for a team without an L4 quota, and
an interactive `gpu_fraction` where only spot L4s share GPUs: both got 201 and stayed
pending for ever, their reason "cannot run: team research has no quota for l4"."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from gpufleet.cluster import MILLI, Cluster
from gpufleet.control import admin
from gpufleet.control.models import Job, Team
from gpufleet.control.quota_room import quota_room
from gpufleet.sched.quota import QuotaBook
from gpufleet.specs.cluster import ClusterSpec

from .conftest import Plane, build_plane

H100, A100, L4 = "h100-sxm5-80gb", "a100-sxm4-80gb", "l4"
# 3 x 8 H100, one A100 node in MIG slices, 2 x 4 spot L4s that share GPUs by fraction
CLUSTER = {
    "kind": "cluster",
    "name": "lab",
    "nodes": [
        {"name": "h100", "count": 3, "accelerator": H100, "gpus_per_node": 8},
        {"name": "a100", "count": 1, "accelerator": A100, "gpus_per_node": 8},
        {
            "name": "l4-spot",
            "count": 2,
            "accelerator": L4,
            "gpus_per_node": 4,
            "capacity": "spot",
            "fractions": True,
        },
    ],
}


@pytest.fixture
def plane(engine: Engine) -> Plane:
    """The plane's teams vision and nlp (cohort ml: 8 H100 and 4 A100 guaranteed each), and
    three more: `lender` (cohort ml, 2 L4s it does not lend), `borrower` (cohort ml, no
    H100 of its own but may borrow them) and `solo` (no cohort, 4 H100 and 1 L4). On both
    stores: the quota read compares a team's cohort, NULL for `solo`."""
    p = build_plane(engine, Cluster.from_spec(ClusterSpec.model_validate(CLUSTER)))
    actor, now = admin.cli_principal(), p.clock()
    with p.sessions.begin() as s:
        for name, cohort in (("lender", "ml"), ("borrower", "ml"), ("solo", None)):
            admin.create_team(s, actor, name, now, cohort=cohort)
            s.flush()
            p.tokens[name] = admin.create_token(
                s, actor, now, role="member", team=name, user=f"{name}-u", expires_s=None
            ).token
        admin.set_quota(s, actor, "lender", L4, now, guaranteed_gpus=2, lending=False)
        admin.set_quota(s, actor, "borrower", H100, now, guaranteed_gpus=0)
        admin.set_quota(s, actor, "solo", H100, now, guaranteed_gpus=4)
        admin.set_quota(s, actor, "solo", L4, now, guaranteed_gpus=1)
    return p


def post(plane: Plane, who: str, **body: Any) -> Any:
    return plane.client.post("/api/v1/jobs", json={"name": "x", **body}, headers=plane.auth(who))


def stored(plane: Plane) -> int:
    with plane.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(Job)) or 0)


NEVER: list[tuple[str, str, dict[str, Any], list[str]]] = [
    (
        "no-quota-for-the-accelerator",
        "vision-member",
        {"gpus": 1, "accelerator": L4, "kind": "training", "checkpoint_interval_s": 600},
        ["cannot run: team vision has no quota for l4", f"it has quota for {A100}, {H100}"],
    ),
    (
        "fraction-only-on-spot-interactive",
        "vision-member",
        {"gpu_fraction": 0.5, "kind": "interactive"},
        [
            "only spot nodes (l4) can hold it",
            "an interactive job never runs on spot capacity",
            "team vision has no quota for l4",
        ],
    ),
    (
        "spot-without-checkpoints-even-with-quota",
        "solo",
        {"gpus": 1, "accelerator": L4},
        ["only spot nodes (l4)", "a batch job runs on spot capacity only with checkpoint"],
    ),
    (
        "more-than-guarantee-and-cohort-lends",
        "vision-member",
        {"gpus": 8, "workers": 3, "accelerator": H100},
        [
            f"team vision may hold at most 16 {H100} GPUs (8 guaranteed + 8 that cohort ml can "
            "lend) and this job needs 24"
        ],
    ),
    (
        "no-cohort-to-borrow-from",
        "solo",
        {"gpus": 8, "accelerator": H100},
        [f"team solo may hold at most 4 {H100} GPUs (4 guaranteed) and this job needs 8"],
    ),
    (
        "every-acceptable-accelerator-short",
        "solo",
        {"gpus": 8},
        [f"at most 4 {H100} GPUs", f"team solo has no quota for {A100}"],
    ),
    (
        "gang-workers-do-not-fit-the-nodes",
        "vision-member",
        {"gpus": 5, "workers": 4, "accelerator": H100},
        ["workers: 4 workers of 5 GPUs each", "hold at most 3 of them"],
    ),
]


@pytest.mark.parametrize(("who", "body", "says"), [n[1:] for n in NEVER], ids=[n[0] for n in NEVER])
def test_a_job_that_can_never_run_is_refused_and_nothing_is_stored(
    plane: Plane, who: str, body: dict[str, Any], says: list[str]
) -> None:
    before = stored(plane)
    r = post(plane, who, **body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str)  # one sentence, not a list of fields
    for needle in says:
        assert needle in detail, (needle, detail)
    assert stored(plane) == before


WAITS: list[tuple[str, str, dict[str, Any]]] = [
    # a team with a quota entry of 0 in a cohort borrows what the others lend
    ("borrows-all-it-needs", "borrower", {"gpus": 8, "workers": 2, "accelerator": H100}),
    # its guarantee and the most its cohort lends, exactly
    ("guarantee-plus-cohort-lends", "vision-member", {"gpus": 8, "workers": 2}),
    # checkpointed training may use spot, and the team has an L4
    (
        "checkpointed-on-spot",
        "solo",
        {"gpu_fraction": 0.5, "kind": "training", "checkpoint_interval_s": 600},
    ),
    # fits one accelerator (H100) of the ones it accepts; the other (L4) it has no quota for
    (
        "one-acceptable-accelerator-is-enough",
        "vision-member",
        {"gpus": 4, "accelerator": [L4, H100]},
    ),
]


@pytest.mark.parametrize(("who", "body"), [w[1:] for w in WAITS], ids=[w[0] for w in WAITS])
def test_a_job_that_only_waits_is_accepted(plane: Plane, who: str, body: dict[str, Any]) -> None:
    r = post(plane, who, **body)
    assert r.status_code == 201, r.text


def test_a_job_waiting_for_quota_in_use_is_accepted(plane: Plane) -> None:
    """nlp holds its 8 H100s and lends none: vision's 16-GPU gang waits, it is not refused."""
    assert post(plane, "nlp-member", gpus=8, accelerator=H100, runtime_estimate_s=3600).is_success
    plane.cycle()
    r = post(plane, "vision-member", gpus=8, workers=2, accelerator=H100)
    assert r.status_code == 201, r.text
    plane.cycle()
    got = plane.client.get(f"/api/v1/jobs/{r.json()['id']}", headers=plane.auth("vision-member"))
    assert got.json()["state"] == "pending"
    assert "cannot run" not in got.json()["reason"]


def test_the_room_is_the_schedulers_limit_with_nothing_in_use(plane: Plane) -> None:
    """`quota_room` reads the store as `QuotaBook.limit` weighs the teams file: the same most
    for every team and flavor, and no quota where the book has none."""
    with plane.sessions() as s:
        spec = admin.teams_spec(s)
        assert spec is not None
        book = QuotaBook(spec, {})
        for team in s.scalars(select(Team)):
            row = SimpleNamespace(id=team.id, name=team.name, cohort=team.cohort)
            room = quota_room(s, row)
            by_name = {t.name: t for t in spec.teams}
            for flavor in (H100, A100, L4):
                limit = book.limit(by_name[team.name], flavor)
                most = room.most_gpus.get(flavor)
                assert (None if most is None else most * MILLI) == limit, (team.name, flavor)
