"""Lookups over one `TeamsSpec` that every scheduling cycle reads, built once per teams object.

A simulator runs tens of thousands of cycles against the same teams, and each cycle
asks the same questions: a team by name, its quota of a flavor, a priority class's
value, a team's fair-share weight. Rebuilding those dictionaries every cycle cost
more than the questions. Specs are frozen pydantic models, so answers derived from
one teams object stay true for as long as it lives; the index is kept by the
object's identity (a weak reference: it goes when the teams object goes).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from types import MappingProxyType

from gpufleet.cluster import MILLI
from gpufleet.errors import UnknownNameError
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import Quota, Team, TeamsSpec


class TeamIndex:
    """Per-teams lookups (read-only to callers; the memo dicts fill as they are asked)."""

    __slots__ = (
        "_class_of",
        "_fixed",
        "_quota",
        "by_name",
        "class_values",
        "max_priority",
        "weights",
    )

    def __init__(self, teams: TeamsSpec) -> None:
        self.by_name: Mapping[str, Team] = MappingProxyType({t.name: t for t in teams.teams})
        self.class_values: Mapping[str, int] = MappingProxyType(
            {p.name: p.value for p in teams.priority_classes}
        )
        self.max_priority = max((p.value for p in teams.priority_classes), default=None)
        self.weights: Mapping[str, float] = MappingProxyType(
            {t.name: t.weight for t in teams.teams}
        )
        self._class_of = {t.name: t.default_priority for t in teams.teams}
        self._quota: dict[tuple[str, str], Quota | None] = {}
        # limits of teams without a cohort: no lend pool enters them, so they never change
        self._fixed: dict[tuple[str, str], int | None] = {}

    def quota(self, team: str, flavor: str) -> Quota | None:
        key = (team, flavor)
        try:
            return self._quota[key]
        except KeyError:
            t = self.by_name.get(team)
            found = self._quota[key] = t.quota_for(flavor) if t else None
            return found

    def fixed_limit(self, team: Team, flavor: str) -> tuple[bool, int | None]:
        """(True, limit) for a team without a cohort (its guarantee capped by its limits;
        None: no quota for the flavor); (False, None) for a team in a cohort, whose limit
        moves with what the cohort lends (`QuotaBook.limit`)."""
        if team.cohort is not None:
            return False, None
        key = (team.name, flavor)
        if key in self._fixed:
            return True, self._fixed[key]
        q = self.quota(team.name, flavor)
        if q is None:
            out = None
        else:
            cap = q.max_gpus
            allowed = q.guaranteed_gpus * MILLI
            out = allowed if cap is None else min(allowed, cap * MILLI)
        self._fixed[key] = out
        return True, out

    def priority(self, job: JobSpec) -> int:
        """The value of the job's priority class (its own, else its team's default; 0 for a
        job of an unknown team without one)."""
        name = job.priority_class or self._class_of.get(job.team)
        if name is None:
            return 0
        value = self.class_values.get(name)
        if value is None:
            raise UnknownNameError(f"priority class (job {job.name})", name, self.class_values)
        return value


_INDEXES: dict[int, tuple[weakref.ref[TeamsSpec], TeamIndex]] = {}


def team_index(teams: TeamsSpec) -> TeamIndex:
    """The index of `teams`, built on first use and kept while `teams` lives."""
    key = id(teams)
    found = _INDEXES.get(key)
    if found is not None and found[0]() is teams:
        return found[1]
    index = TeamIndex(teams)
    _INDEXES[key] = (weakref.ref(teams, _forget(key)), index)
    return index


def _forget(key: int) -> Callable[[weakref.ref[TeamsSpec]], None]:
    """The callback that drops an index when its teams object goes."""

    def forget(_: weakref.ref[TeamsSpec]) -> None:
        _INDEXES.pop(key, None)

    return forget
