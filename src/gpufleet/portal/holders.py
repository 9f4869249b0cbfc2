"""Who holds the GPUs a waiting job needs: per team, what it holds of each flavor, its
guarantee and what it borrows beyond it (issue 30: "a lead cannot see which teams hold the
GPUs they wait for").

Leads and admins see every team by name, so a lead can tell whose borrowing keeps their job
waiting; members and viewers see their own team and the other teams as one row (the rule
of the rest of the portal: a member never reads another team's name).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpufleet.cluster import Cluster
from gpufleet.control.admin import teams_spec
from gpufleet.control.auth import Principal
from gpufleet.control.jobs import spec_of
from gpufleet.control.models import Allocation, Job, Quota, Team
from gpufleet.sched.quota import QuotaBook, QuotaWait, request_milli
from gpufleet.sched.requests import requests_for

OTHER_TEAMS = "other teams"


@dataclass(frozen=True)
class Holding:
    flavor: str
    team: str
    holds_gpus: float
    guaranteed_gpus: int | None  # None: the aggregated row of other teams
    borrowed_gpus: float


def held_milli(s: Session) -> dict[tuple[str, str], int]:
    """Milli-GPUs each team holds now, per flavor: (team, flavor) -> milli."""
    q = (
        select(Team.name, Allocation.flavor, func.sum(Allocation.milli))
        .join(Job, Job.id == Allocation.job_id)
        .join(Team, Team.id == Job.team_id)
        .where(Allocation.released_s.is_(None))
        .group_by(Team.name, Allocation.flavor)
    )
    return {(team, flavor): int(milli or 0) for team, flavor, milli in s.execute(q)}


def holdings(s: Session, who: Principal, flavors: list[str]) -> list[Holding]:
    """Per flavor, each team holding any of it or guaranteed some (largest holder first)."""
    held = {(f, t): m / 1000 for (t, f), m in held_milli(s).items() if f in flavors}
    guaranteed = {
        (flavor, team): g
        for team, flavor, g in s.execute(
            select(Team.name, Quota.flavor, Quota.guaranteed_gpus)
            .join(Team, Team.id == Quota.team_id)
            .where(Quota.flavor.in_(flavors))
        )
    }
    named = who.is_admin or who.role == "lead"
    out: list[Holding] = []
    for flavor in flavors:
        teams = sorted(
            {t for f, t in (*held, *guaranteed) if f == flavor},
            key=lambda t: (-held.get((flavor, t), 0.0), t),
        )
        others = [0.0, 0.0]
        for team in teams:
            holds = held.get((flavor, team), 0.0)
            g = guaranteed.get((flavor, team), 0)
            borrowed = max(0.0, holds - g)
            if named or team == who.team:
                out.append(Holding(flavor, team, holds, g, borrowed))
            else:
                others[0] += holds
                others[1] += borrowed
        if not named and any(others):
            out.append(Holding(flavor, OTHER_TEAMS, others[0], None, others[1]))
    return out


@dataclass(frozen=True)
class QuotaRoom:
    """A waiting job's quota arithmetic on one flavor, as the scheduler's `QuotaWait` gives
    it, computed from the store now (the reason sentence is from the last cycle)."""

    flavor: str
    wait: QuotaWait

    @property
    def parts(self) -> tuple[int, int, int]:
        return self.wait.parts()


def quota_rooms(s: Session, job: Job, team: str, cluster: Cluster) -> list[QuotaRoom]:
    """For each flavor the job may use, why its team's quota does not let it start now
    (empty where it does, or where the team has no quota for the flavor)."""
    spec = teams_spec(s)
    if spec is None:
        return []
    book = QuotaBook(spec, held_milli(s))
    job_spec = spec_of(job, team)
    flavors = sorted(cluster.gpus_by_accelerator)
    out = []
    for req in requests_for(job_spec, flavors):  # the cluster's; the job's own choice within
        status = book.check(job_spec, req.accelerator, request_milli(req))
        if isinstance(status.detail, QuotaWait):
            out.append(QuotaRoom(req.accelerator, status.detail))
    return out
