"""Quota arithmetic: what a team uses of each flavor and what it may use now (design 0009).

Units: thousandths of a GPU ("milli"): a whole GPU is 1000, a GPU fraction its
share, a MIG slice its share of the GPU's compute slices — exactly, by where it lies
on its GPU (`SliceInfo.milli`, `catalog.mig.span_share`), so that a GPU's slices add up to
1000 in the quota as in the ledger; a slice not yet placed is charged the most any slice
of its profile weighs (`slice_milli`).

A team may always use its guaranteed GPUs of a flavor; beyond that it may borrow
what the other teams of its cohort lend and do not use themselves, capped by its
borrowing limit. Teams without a cohort never borrow. A cohort as a whole never
holds more than the sum of its members' guarantees: when borrowers hold part of a
team's guarantee, that part comes back when they finish or by preemption
(`sched.preempt`, quota reclaim) — not by taking GPUs that belong to no member,
which another team outside the cohort may be owed and could not reclaim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from gpufleet.catalog.mig import mig_profiles_for, whole_gpu_slices
from gpufleet.cluster import MILLI, Cluster, StateView, Usage
from gpufleet.sched.framework import Placement, Status
from gpufleet.sched.requests import FRACTION_STEPS, Request
from gpufleet.sched.team_index import TeamIndex, team_index
from gpufleet.sched.waits import NoQuota, UnknownTeam
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import Team, TeamsSpec

QUOTA = "quota"
MILLI_PER_EIGHTH = MILLI // FRACTION_STEPS


WaitCase = Literal["capped", "guarantee-lent", "no-cohort", "no-borrowing", "cohort-short"]


@dataclass(frozen=True, slots=True)
class QuotaWait:
    """Why a job waits on its team's quota, as numbers (issue 30: reasons as data).

    `room_milli` is what the team may still take now (its limit less what it holds): the
    job waits because `need_milli` exceeds it, and the sentence names that room, so it can
    no longer read "cohort ml has 16 to lend (this job needs 16)" while the job waits (the
    16 was the cohort's whole pool, 8 of which the team already borrowed)."""

    kind: ClassVar[str] = "quota"
    case: WaitCase
    team: str
    flavor: str
    used_milli: int
    guaranteed_milli: int
    need_milli: int
    room_milli: int
    cohort: str | None
    pool_milli: int  # the cohort's lendable GPUs less their use by others (negative: lent)
    cap_gpus: int | None

    def parts(self) -> tuple[int, int, int]:
        """The room split as the sentence says it: (free of its guarantee, held of its
        guarantee by other teams, lendable by the cohort); free + lendable = room."""
        held = max(0, -self.pool_milli)
        free = min(self.room_milli, max(0, self.guaranteed_milli - self.used_milli - held))
        return free, held, self.room_milli - free

    def numbers(self) -> dict[str, object]:
        free, held, lend = self.parts()
        return {
            "case": self.case,
            "team": self.team,
            "accelerator": self.flavor,
            "needed_gpus": self.need_milli / MILLI,
            "used_gpus": self.used_milli / MILLI,
            "guaranteed_gpus": self.guaranteed_milli / MILLI,
            "room_gpus": self.room_milli / MILLI,
            "free_of_guarantee_gpus": free / MILLI,
            "guarantee_held_by_others_gpus": held / MILLI,
            "cohort": self.cohort,
            "cohort_lends_gpus": lend / MILLI,
            "cap_gpus": self.cap_gpus,
        }

    def text(self) -> str:
        head = (
            f"waiting: team {self.team} quota {gpus_text(self.used_milli)}/"
            f"{gpus_text(self.guaranteed_milli)} {self.flavor} in use"
        )
        room, need = gpus_text(self.room_milli), gpus_text(self.need_milli)
        if self.case == "capped":
            why = f"{head}, capped at {self.cap_gpus} with borrowing ({room} more allowed)"
        elif self.case == "guarantee-lent":
            why = (
                f"{head}, within its guarantee but other teams of cohort {self.cohort} hold "
                f"{gpus_text(max(0, -self.pool_milli))} of it; it comes back as they finish, "
                "or by preemption where the profile reclaims quota"
            )
        elif self.case == "no-cohort":
            why = f"{head}, no cohort to borrow from"
        elif self.case == "no-borrowing":
            why = f"{head}, borrowing is off for this quota"
        else:
            free, held, lend = self.parts()
            by_others = f" ({gpus_text(held)} of it held by other teams)" if held else ""
            why = (
                f"{head}, it may take {room} more now: {gpus_text(free)} free of its "
                f"guarantee{by_others} and {gpus_text(lend)} that cohort {self.cohort} can "
                "still lend it"
            )
        return f"{why} (this job needs {need})"


def gpus_text(milli: int) -> str:
    """Thousandths of a GPU as a person reads them: 64000 -> "64", 250 -> "0.25"."""
    if milli % MILLI == 0:
        return str(milli // MILLI)
    return f"{milli / MILLI:.3f}".rstrip("0")


def slice_milli(accelerator: str, profile: str) -> int:
    """A MIG slice's weight against quota before it has a place (a request, or a count of
    slices in an export): the ceiling of its share of the GPU's compute slices, which no
    placed slice of the profile exceeds, so a quota check that passes with it still holds
    once the slice is placed and weighed exactly (`SliceInfo.milli`: 143 for a 1g slice of
    7, which then weighs 142 or 143)."""
    profiles = mig_profiles_for(accelerator)
    whole = whole_gpu_slices(accelerator)
    compute = next((p.compute_slices for p in profiles if p.profile == profile), whole)
    return -(-MILLI * compute // whole)


def request_milli(request: Request) -> int:
    if request.kind == "gpus":
        return request.total_gpus * MILLI
    if request.kind == "mig":
        return slice_milli(request.accelerator, request.mig_profile or "")
    return request.eighths * MILLI_PER_EIGHTH


def placements_milli(cluster: Cluster, placements: Sequence[Placement]) -> int:
    """Milli-GPUs a placement holds, weighing MIG slices exactly by where they lie (what the
    ledger bills: `SliceInfo.milli`)."""
    total = 0
    for p in placements:
        total += len(p.gpus) * MILLI + p.milli
        for sid in p.mig_slices:
            total += cluster.slice_info(sid).milli
    return total


def team_usage_milli(view: StateView, team_of: Mapping[str, str]) -> dict[tuple[str, str], int]:
    """(team, accelerator) -> milli-GPUs held by the jobs `team_of` names a team for; the
    others (placeholders, jobs of no team) count for nobody."""
    used: dict[tuple[str, str], int] = {}
    for team, held in view.usage_by(lambda j: team_of.get(j, "")).items():
        if team:
            for acc, milli in usage_milli(held).items():
                used[(team, acc)] = milli
    return used


def usage_milli(usage: Usage) -> dict[str, int]:
    """Milli-GPUs held per accelerator, slices weighed exactly (`Usage.slice_milli`)."""
    out = {acc: n * MILLI for acc, n in usage.gpus.items()}
    for acc, m in usage.slice_milli.items():
        out[acc] = out.get(acc, 0) + m
    for acc, m in usage.milli.items():
        out[acc] = out.get(acc, 0) + m
    return out


_QUOTA_OK = Status(plugin=QUOTA)  # frozen: one instance serves every passed check


class QuotaBook:
    """Team usage per flavor (milli-GPUs) and the guaranteed + borrowable check."""

    def __init__(
        self,
        teams: TeamsSpec,
        used: dict[tuple[str, str], int],
        index: TeamIndex | None = None,
    ) -> None:
        """`index`: `team_index(teams)`, for a caller that already has it."""
        if index is None:
            index = team_index(teams)  # quotas and fixed limits, shared by every cycle
        self.teams = index.by_name
        self.used = used
        self.quota = index.quota
        self._fixed_limit = index.fixed_limit
        # lend pools depend on every cohort member's use: cached until the next `add`
        self._pool: dict[tuple[str, str], int] = {}
        self._limit: dict[tuple[str, str], int | None] = {}
        self.changes: dict[str, int] = {}  # team -> `add`s for it: what was read may be stale
        self.adds = 0  # `add`s for any team: what was read across teams may be stale

    def guaranteed(self, team: str, flavor: str) -> int:
        q = self.quota(team, flavor)
        return 0 if q is None else q.guaranteed_gpus * MILLI

    def borrowed(self, team: str, flavor: str) -> int:
        """Milli-GPUs the team uses beyond its guarantee (0 when within it)."""
        return max(0, self.used.get((team, flavor), 0) - self.guaranteed(team, flavor))

    def lend_pool(self, team: Team, flavor: str) -> int:
        """What the rest of `team`'s cohort can lend now: their lendable GPUs minus what is
        used of them (by themselves beyond what they keep, or by borrowers). Negative when
        others have borrowed part of `team`'s own guarantee (taken back by preemption).
        """
        cached = self._pool.get((team.name, flavor))
        if cached is not None:
            return cached
        lendable = consumed = 0
        for other in self.teams.values():
            if other.name == team.name or other.cohort != team.cohort:
                continue
            q = self.quota(other.name, flavor)
            if q is None:
                continue
            lend = q.lendable_gpus * MILLI
            lendable += lend
            kept = q.guaranteed_gpus * MILLI - lend
            consumed += max(0, self.used.get((other.name, flavor), 0) - kept)
        self._pool[(team.name, flavor)] = lendable - consumed
        return lendable - consumed

    def lent_out(self, team: Team, flavor: str) -> int:
        """Milli-GPUs of `team`'s guarantee that other members of its cohort hold now."""
        if team.cohort is None:
            return 0
        return max(0, -self.lend_pool(team, flavor))

    def limit(self, team: Team, flavor: str) -> int | None:
        """Most milli-GPUs of `flavor` the team may hold now (None: no quota).

        Its guarantee less what borrowers hold of it; plus, when it may borrow, what its
        cohort has idle to lend; capped by `max_gpus`.
        """
        fixed, out = self._fixed_limit(team, flavor)
        if fixed:
            return out
        key = (team.name, flavor)
        if key in self._limit:
            return self._limit[key]
        q = self.quota(team.name, flavor)
        if q is None:
            self._limit[key] = None
            return None
        allowed = q.guaranteed_gpus * MILLI
        pool = self.lend_pool(team, flavor)
        allowed += pool if q.borrowing or pool < 0 else 0
        cap = q.max_gpus
        out = allowed if cap is None else min(allowed, cap * MILLI)
        self._limit[key] = out
        return out

    def reclaim_milli(self, team_name: str, flavor: str, need: int) -> int:
        """Milli-GPUs the team must take back from borrowers to start a job needing `need`
        within its guarantee (0 when the quota allows it now or the job would borrow)."""
        team = self.teams.get(team_name)
        q = self.quota(team_name, flavor)
        if team is None or q is None:
            return 0
        want = self.used.get((team_name, flavor), 0) + need
        allowed = self.limit(team, flavor)
        if allowed is None or want <= allowed or want > q.guaranteed_gpus * MILLI:
            return 0
        if q.max_gpus is not None and want > q.max_gpus * MILLI:
            return 0
        return want - allowed

    def check(self, job: JobSpec, flavor: str, need: int) -> Status:
        team = self.teams.get(job.team)
        if team is None:
            unknown = UnknownTeam(job.team, tuple(sorted(self.teams)))
            return Status("unschedulable", unknown.text(), "", unknown)
        q = self.quota(team.name, flavor)
        if q is None:
            none = NoQuota(team.name, flavor)
            return Status("unschedulable", none.text(), QUOTA, none)
        used = self.used.get((team.name, flavor), 0)
        allowed = self.limit(team, flavor)
        assert allowed is not None
        if used + need <= allowed:
            return _QUOTA_OK
        g = q.guaranteed_gpus * MILLI
        cap = q.max_gpus
        pool = self.lend_pool(team, flavor) if team.cohort is not None else 0
        if cap is not None and used + need > cap * MILLI:
            case: WaitCase = "capped"
        elif used + need <= g:
            case = "guarantee-lent"
        elif team.cohort is None:
            case = "no-cohort"
        elif not q.borrowing:
            case = "no-borrowing"
        else:
            case = "cohort-short"
        wait = QuotaWait(
            case=case,
            team=team.name,
            flavor=flavor,
            used_milli=used,
            guaranteed_milli=g,
            need_milli=need,
            room_milli=max(0, allowed - used),
            cohort=team.cohort,
            pool_milli=pool,
            cap_gpus=cap,
        )
        return Status("wait", wait.text(), QUOTA, wait)

    def add(self, team: str, flavor: str, milli: int) -> None:
        changes = self.changes
        changes[team] = changes.get(team, 0) + 1
        self.adds += 1
        key = (team, flavor)
        used = self.used
        used[key] = used.get(key, 0) + milli
        self._pool.clear()
        self._limit.clear()
