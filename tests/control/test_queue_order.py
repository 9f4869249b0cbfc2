"""A lead reorders the team's waiting jobs within a priority class (docs/design/0013):
`POST /api/v1/jobs/{id}/move`, on both stores, through the reconciler's next cycle; and the
rule that makes it fair, as a property: a team's jobs keep the queue places their own queue
times give them, whoever moved and whoever left since."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from gpufleet.cluster import Cluster
from gpufleet.control.jobs import in_lead_order, ordered_places
from gpufleet.control.models import Job
from gpufleet.control.queue_moves import REORDERABLE_ORDERS
from gpufleet.sched.framework import OrderContext
from gpufleet.sched.orders import FairShare, Fifo, PriorityOrder
from gpufleet.sched.registry import QUEUE_ORDERS
from gpufleet.specs.jobs import JobSpec

from .conftest import Plane, build_plane

H100 = "h100-sxm5-80gb"
EMULATE_FAIL = "GPUFLEET_EMULATE_FAIL_AFTER_S"


def submit(plane: Plane, who: str, name: str, **body: Any) -> int:
    body = {"name": name, "gpus": 8, "accelerator": H100, "runtime_estimate_s": 3600, **body}
    r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth(who))
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def get(plane: Plane, job_id: int, who: str = "admin") -> dict[str, Any]:
    r = plane.client.get(f"/api/v1/jobs/{job_id}", headers=plane.auth(who))
    assert r.status_code == 200, r.text
    return dict(r.json())


def move(plane: Plane, job_id: int, who: str = "vision-lead", **body: Any) -> Any:
    return plane.client.post(f"/api/v1/jobs/{job_id}/move", json=body, headers=plane.auth(who))


def team_order(plane: Plane, ids: list[int]) -> list[int]:
    """The jobs by their team position in the last cycle's snapshot."""
    pos = {i: get(plane, i)["queue_position"] for i in ids}
    assert all(p is not None for p in pos.values()), pos
    return sorted(ids, key=lambda i: pos[i]["team"])


def cluster_order(plane: Plane, ids: list[int]) -> list[int]:
    pos = {i: get(plane, i)["queue_position"]["cluster"] for i in ids}
    return sorted(ids, key=lambda i: pos[i])


def fill(plane: Plane) -> int:
    """vision holds all 16 H100s with a job that may not be preempted: H100 jobs wait."""
    hog = submit(
        plane, "vision-member", "hog", workers=2, preemptible=False, runtime_estimate_s=1e5
    )
    plane.cycle()
    plane.cycle(1)
    assert get(plane, hog)["state"] == "running"
    return hog


def test_a_lead_moves_a_job_to_the_top_and_it_moves_at_the_next_cycle(plane: Plane) -> None:
    fill(plane)
    a, b, c = (submit(plane, "vision-member", n) for n in "abc")
    x = submit(plane, "nlp-member", "x")
    plane.cycle(10)
    assert team_order(plane, [a, b, c]) == [a, b, c]
    x_before = get(plane, x)["queue_position"]
    before = get(plane, c)

    r = move(plane, c, to="top")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == c
    assert r.json()["queue_position"]["team"] == 3  # until the next cycle
    plane.cycle(10)
    assert team_order(plane, [a, b, c]) == [c, a, b]
    assert get(plane, x)["queue_position"] == x_before  # nlp's place is nlp's

    after = get(plane, c)
    assert (after["submitted_s"], after["queued_s"]) == (before["submitted_s"], before["queued_s"])
    moved = [e for e in after["events"] if e["kind"] == "moved"]
    assert [e["message"] for e in moved] == [
        "to the top among vision's standard jobs (3 -> 1 of 3) by vision-lead"
    ]
    audit = plane.client.get("/api/v1/admin/audit", headers=plane.auth("admin")).json()
    entry = next(e for e in audit if e["action"] == "job.move")
    assert (entry["actor"], entry["role"], entry["target"]) == ("vision-lead", "lead", f"job/{c}")
    assert entry["detail"] == {"to": "top", "place_from": 3, "place_to": 1, "of": 3}

    plane.reconciler.estimate_etas()  # the forward simulation takes the lead's order too
    etas = {j: get(plane, j)["eta_s"] for j in (a, b, c)}
    assert None not in etas.values(), etas
    assert etas[c] <= etas[a] <= etas[b]


# (job moved, body, the team's order after the next cycle); jobs are named a..d
STEPS: list[tuple[str, dict[str, str], str]] = [
    ("d", {"to": "up"}, "abdc"),
    ("a", {"to": "down"}, "badc"),
    ("c", {"before": "b"}, "cbad"),
    ("c", {"to": "up"}, "cbad"),  # already first: nothing changes, nothing is recorded
    ("c", {"to": "top"}, "cbad"),
    ("d", {"to": "down"}, "cbad"),  # already last
    ("a", {"before": "d"}, "cbad"),  # already just before it
    ("d", {"to": "top"}, "dcba"),
    ("b", {"before": "c"}, "dbca"),
    ("a", {"to": "up"}, "dbac"),
]


def test_up_down_top_and_before_reorder_the_class(plane: Plane) -> None:
    fill(plane)
    ids = {n: submit(plane, "vision-member", n) for n in "abcd"}
    plane.cycle(10)
    by_id = {v: k for k, v in ids.items()}
    for name, body, want in STEPS:
        where = {k: ids[v] if k == "before" else v for k, v in body.items()}
        r = move(plane, ids[name], **where)
        assert r.status_code == 200, (name, body, r.text)
        plane.cycle(10)
        got = "".join(by_id[i] for i in team_order(plane, list(ids.values())))
        assert got == want, (name, body)
    events = {
        n: [e for e in get(plane, i)["events"] if e["kind"] == "moved"] for n, i in ids.items()
    }
    assert {n: len(e) for n, e in events.items()} == {"a": 2, "b": 1, "c": 1, "d": 2}
    assert events["b"][0]["message"] == (
        f"before job {ids['c']} among vision's standard jobs (3 -> 2 of 4) by vision-lead"
    )


def test_a_move_never_takes_a_place_of_another_team(engine: Engine, cluster: Cluster) -> None:
    """In FIFO order across the cluster, vision's jobs hold places 1, 3 and 5 and keep them
    through a move; when one of them leaves, the rest do not keep its early place."""
    plane = build_plane(engine, cluster, profile="fifo")
    fill(plane)
    a = submit(plane, "vision-member", "a")
    plane.clock.advance(1)
    x = submit(plane, "nlp-member", "x")
    plane.clock.advance(1)
    b = submit(plane, "vision-member", "b")
    plane.clock.advance(1)
    y = submit(plane, "nlp-member", "y")
    plane.clock.advance(1)
    c = submit(plane, "vision-member", "c")
    plane.cycle(10)
    assert cluster_order(plane, [a, x, b, y, c]) == [a, x, b, y, c]

    assert move(plane, c, to="top").status_code == 200
    plane.cycle(10)
    assert cluster_order(plane, [a, x, b, y, c]) == [c, x, a, y, b]

    r = plane.client.post(f"/api/v1/jobs/{a}/cancel", headers=plane.auth("vision-member"))
    assert r.status_code == 200
    plane.cycle(10)
    # c is still first of vision's, but on b's place now: the first place was a's
    assert cluster_order(plane, [x, b, y, c]) == [x, c, y, b]


def test_who_may_move_what(plane: Plane) -> None:
    hog = fill(plane)
    a, b = (submit(plane, "vision-member", n) for n in "ab")
    urgent = submit(plane, "vision-member", "urgent", priority_class="production")
    n1, n2 = (submit(plane, "nlp-member", n) for n in ("n1", "n2"))
    plane.cycle(10)
    cases: list[tuple[str, int, dict[str, Any], int, str]] = [
        ("vision-member", b, {"to": "top"}, 403, "lead or an admin"),
        ("vision-viewer", b, {"to": "top"}, 403, "lead or an admin"),
        ("nlp-lead", b, {"to": "top"}, 404, f"no job {b}"),  # as for no such job
        ("nlp-lead", n2, {"before": a}, 404, f"no job {a}"),
        ("vision-lead", 999_999, {"to": "top"}, 404, "no job 999999"),
        ("vision-lead", b, {"before": urgent}, 422, "change the priority class"),
        ("vision-lead", hog, {"to": "top"}, 422, "only a waiting job"),
        ("vision-lead", b, {"before": hog}, 422, "move before a waiting job"),
        ("vision-lead", b, {"before": b}, 422, "before itself"),
        ("admin", b, {"before": n1}, 422, "a move stays within the team"),
    ]
    for who, job_id, body, status, says in cases:
        r = move(plane, job_id, who, **body)
        assert (r.status_code, says in r.text) == (status, True), (who, body, r.text)
    for body in ({}, {"to": "top", "before": a}, {"to": "sideways"}, {"before": str(a)}):
        assert move(plane, b, **body).status_code == 422, body
    for body in ({"before": 0}, {"before": True}, {"to": "top", "also": 1}):
        assert move(plane, b, **body).status_code == 422, body
    assert team_order(plane, [a, b]) == [a, b]  # nothing above changed anything

    assert move(plane, b, "admin", before=a).status_code == 200  # admins anywhere
    assert move(plane, n2, "nlp-lead", to="up").status_code == 200  # leads in their team
    plane.cycle(10)
    assert team_order(plane, [a, b]) == [b, a]
    assert team_order(plane, [n1, n2]) == [n2, n1]


@pytest.mark.parametrize("profile", ["slurm-like", "tiresias"])
def test_a_profile_that_does_not_order_a_class_by_time_refuses_moves(
    sqlite_engine: Engine, cluster: Cluster, profile: str
) -> None:
    plane = build_plane(sqlite_engine, cluster, profile=profile)
    fill(plane)
    _, b = (submit(plane, "vision-member", n) for n in "ab")
    r = move(plane, b, to="top")
    assert r.status_code == 422
    assert f"the {profile} profile" in r.json()["detail"]
    assert "change the job's priority class" in r.json()["detail"]


def test_a_priority_change_forgets_the_move(lite: Plane) -> None:
    fill(lite)
    a, b, c = (submit(lite, "vision-member", n) for n in "abc" if not lite.clock.advance(1))
    lite.cycle(10)
    assert move(lite, c, to="top").status_code == 200
    lite.cycle(10)
    assert team_order(lite, [a, b, c]) == [c, a, b]
    for cls in ("production", "standard"):  # out of the class and back: by queue time again
        r = lite.client.patch(
            f"/api/v1/jobs/{c}", json={"priority_class": cls}, headers=lite.auth("vision-lead")
        )
        assert r.status_code == 200, r.text
    lite.cycle(10)
    assert team_order(lite, [a, b, c]) == [a, b, c]


def test_a_requeued_job_rejoins_by_its_queue_time(lite: Plane) -> None:
    submit(lite, "vision-member", "hog", workers=2, runtime_estimate_s=100)
    lite.cycle()
    lite.cycle(1)
    other = submit(lite, "vision-member", "other", gpus=1)
    crash = submit(lite, "vision-member", "crash", gpus=1, env={EMULATE_FAIL: "5"})
    lite.cycle(1)
    assert move(lite, crash, to="top").status_code == 200
    lite.cycle(1)
    assert team_order(lite, [other, crash]) == [crash, other]
    for _ in range(40):  # the hog ends, both start, the crash crashes
        lite.cycle(4)
        if get(lite, crash)["state"] == "pending" and get(lite, crash)["attempt"] == 1:
            break
    with lite.sessions() as s:
        row = s.get(Job, crash)
        assert row is not None
        assert (row.state, row.crashes) == ("pending", 1)  # crashed and requeued
        assert row.queue_order_s is None  # it rejoined by queue time: the move is over


# -- the rule, as a property ----------------------------------------------------------------

CLASSES = {"hi": 1000, "lo": 100}


@st.composite
def queues(draw: st.DrawFn) -> list[JobSpec]:
    n = draw(st.integers(1, 14))
    jobs = []
    for i in range(n):
        moved = draw(st.booleans())
        jobs.append(
            JobSpec(
                name=f"j{i:02d}",
                team=draw(st.sampled_from(["t1", "t2", "t3"])),
                priority_class=draw(st.sampled_from(sorted(CLASSES))),
                gpus=1,
                submitted_s=float(draw(st.integers(0, 5))),  # ties on purpose
                order_key_s=float(draw(st.integers(0, 5))) if moved else None,
            )
        )
    return jobs


ORDERS = [Fifo(), PriorityOrder(), FairShare()]


@settings(max_examples=300, deadline=None)
@given(queues(), st.sampled_from(ORDERS), st.lists(st.floats(0, 2), min_size=3, max_size=3))
def test_moves_reorder_a_class_and_never_gain_on_anyone_else(
    jobs: list[JobSpec], order: Fifo | PriorityOrder | FairShare, shares: list[float]
) -> None:
    """Each class a lead moved comes out in the lead's order, and its places are no earlier
    than its jobs' own queue times would give: against every other job (as placed), it has
    no more jobs ahead than it would have had if nobody had moved it."""
    share = dict(zip(["t1", "t2", "t3"], shares, strict=True))
    ctx = OrderContext(
        {j.name: CLASSES[j.priority_class or "lo"] for j in jobs},
        share=lambda t: share[t],
    )
    placed = in_lead_order(jobs)
    after = [j.name for j in order.order(placed, ctx)]
    group = {j.name: (j.team, j.priority_class) for j in jobs}
    lead = {  # the lead's order: by the stored key, else the queue time; then the name
        j.name: (j.order_key_s if j.order_key_s is not None else j.submitted_s, j.name)
        for j in jobs
    }
    for g in set(group.values()):
        members = [n for n in after if group[n] == g]
        if not any(j.order_key_s is not None for j in jobs if group[j.name] == g):
            assert all(p is j for p, j in zip(placed, jobs, strict=True) if group[j.name] == g)
            continue
        assert members == sorted(members, key=lead.__getitem__)  # the lead's order
        unmoved = [  # this class as if nobody had moved it, everyone else as placed
            j.model_copy(update={"order_key_s": None}) if group[j.name] == g else j for j in placed
        ]
        before = [j.name for j in order.order(unmoved, ctx)]
        for other in (n for n in after if group[n] != g):
            ahead_after = sum(1 for n in after[: after.index(other)] if group[n] == g)
            ahead_before = sum(1 for n in before[: before.index(other)] if group[n] == g)
            assert ahead_after <= ahead_before, (g, other)


def test_places_are_taken_in_order_and_never_earlier() -> None:
    # "c" takes a's place at its very time ("c" sorts after "a" there); "a" on b's place
    # would sort ahead of it ("a" < "b"), so it gets the next float; "b" on c's likewise
    keys = ordered_places(["c", "a", "b"], [(1.0, "a"), (1.0, "b"), (2.0, "c")])
    assert keys[0] == 1.0  # "c" >= "a": the place's own time
    assert 1.0 < keys[1] < 1.0 + 1e-9  # "a" < "c" at 1.0: one float step later
    assert 2.0 < keys[2] < 2.0 + 1e-9


def test_every_queue_order_either_honours_the_order_key_or_ignores_it() -> None:
    """`REORDERABLE_ORDERS` names exactly the orders where a move changes the order."""
    early = JobSpec(name="early", team="t", gpus=1, submitted_s=0.0, order_key_s=10.0)
    late = JobSpec(name="late", team="t", gpus=1, submitted_s=10.0, order_key_s=0.0)
    ctx = OrderContext({"early": 1, "late": 1}, now_s=100.0)
    for name, plugin in QUEUE_ORDERS.items():
        first = next(iter(plugin.order([early, late], ctx))).name
        assert (first == "late") == (name in REORDERABLE_ORDERS), name
