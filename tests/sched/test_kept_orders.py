"""The kept orders' pass-over: `order_kept(skips=...)` must give the order without the
skipped jobs, each asked at its turn, whatever the cycle admits between two jobs (a team's
share grows with each admission and changes the turns), with or without the kept keys.

A quiet cycle relies on it: it passes over jobs too big for any node's room inside the
order, before their sort key is built, and admits exactly what a full cycle admits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.sched.framework import OrderContext
from gpufleet.sched.orders import FairShare, PriorityKey, PriorityOrder, priority_key
from gpufleet.specs.jobs import JobSpec

TEAMS = ("a", "b", "c")
CLASSES = (100, 500, 1000)


@st.composite
def queues(draw: st.DrawFn) -> tuple[list[JobSpec], dict[str, int], set[str], set[str]]:
    n = draw(st.integers(1, 40))
    jobs = [
        JobSpec.model_validate(
            {
                "name": f"j{i}",
                "team": draw(st.sampled_from(TEAMS)),
                "gpus": 1,
                "submitted_s": float(draw(st.integers(0, 20))),
            }
        )
        for i in range(n)
    ]
    priority = {j.name: draw(st.sampled_from(CLASSES)) for j in jobs}
    names = [j.name for j in jobs]
    skipped = set(draw(st.lists(st.sampled_from(names), unique=True)))
    admitted = set(draw(st.lists(st.sampled_from(names), unique=True))) - skipped
    return jobs, priority, skipped, admitted


def _taken(
    order: Callable[..., Iterator[JobSpec]],
    jobs: list[JobSpec],
    priority: dict[str, int],
    admitted: set[str],
    **kw: object,
) -> list[str]:
    """The names `order` yields while the consumer admits the jobs in `admitted` (each
    admission adds to its team's share, which a fair-share order reads live)."""
    share = dict.fromkeys(TEAMS, 0.0)
    ctx = OrderContext(priority=priority, share=lambda t: share[t])
    by_team: dict[str, list[JobSpec]] = {}
    keys: dict[str, list[PriorityKey]] = {}
    for job in sorted(jobs, key=lambda j: priority_key(j, priority[j.name])):
        by_team.setdefault(job.team, []).append(job)
        keys.setdefault(job.team, []).append(priority_key(job, priority[job.name]))
    if kw.pop("with_keys", False):
        kw["keys"] = keys
    out = []
    for job in order(by_team, ctx, **kw):
        out.append(job.name)
        if job.name in admitted:
            share[job.team] += 0.1
    return out


@settings(max_examples=300, deadline=None)
@given(case=queues(), with_keys=st.booleans())
def test_passing_over_leaves_the_order_of_the_rest(
    case: tuple[list[JobSpec], dict[str, int], set[str], set[str]], with_keys: bool
) -> None:
    jobs, priority, skipped, admitted = case
    for order in (FairShare().order_kept, PriorityOrder().order_kept):
        full = _taken(order, jobs, priority, admitted)
        assert sorted(full) == sorted(j.name for j in jobs)
        passed = _taken(
            order,
            jobs,
            priority,
            admitted,
            skips=lambda j: j.name in skipped,
            with_keys=with_keys,
        )
        assert passed == [name for name in full if name not in skipped]


@pytest.mark.parametrize(
    ("order", "want"),
    [(FairShare(), ["a1", "b1", "a2"]), (PriorityOrder(), ["a1", "a2", "b1"])],
    ids=["fair-share", "priority"],
)
def test_a_job_is_asked_at_its_turn_not_when_its_team_was_last_taken(
    order: FairShare | PriorityOrder, want: list[str]
) -> None:
    """Under fair share, team a's second job comes after team b's first (a's share grew
    when its first was admitted): the skip rule must be asked for it only then, after b's
    job had its look (what that look did may change the answer). Likewise under priority
    order for each team's head, which a merge would otherwise read ahead."""
    jobs = [
        JobSpec.model_validate({"name": n, "team": t, "gpus": 1, "submitted_s": s})
        for n, t, s in (("a1", "a", 0.0), ("a2", "a", 1.0), ("b1", "b", 2.0))
    ]
    priority = dict.fromkeys(("a1", "a2", "b1"), 500)
    share = dict.fromkeys(TEAMS, 0.0)
    ctx = OrderContext(priority=priority, share=lambda t: share[t])
    asked: list[str] = []
    seen: list[str] = []

    def skips(job: JobSpec) -> bool:
        asked.append(job.name)
        return False

    by_team = {"a": jobs[:2], "b": jobs[2:]}
    for job in order.order_kept(by_team, ctx, skips):
        seen.append(job.name)
        assert asked == seen  # each job asked just before it is yielded
        if job.name == "a1":
            share["a"] += 1.0
    assert seen == want
