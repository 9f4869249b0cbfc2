"""The export model: a cluster spec, a teams spec and a profile resolved once for every target.

Every target needs the same derived facts — which forms each accelerator's GPUs
take on the nodes (whole GPUs, MIG slices per profile), what each team is
guaranteed and may reach by borrowing, and what the chosen profile does — so
they are computed here once, with the scheduler's own arithmetic
(`sched.quota.slice_milli` weighs a slice against quota), and the targets only
translate.

A gpufleet quota is fungible within an accelerator: 16 A100s may be held as
whole GPUs or as MIG slices weighed by their compute share. Kubernetes engines
count each resource name separately (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`),
so `Flavor.split` spreads a number of GPUs over the resources in proportion to
their capacity in the cluster, rounded so that the slices' weights add back up
to the same number of GPUs (which is what `import kueue` reads back).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.mig import get_mig_profile
from gpufleet.cluster import MILLI, Cluster
from gpufleet.errors import UserError
from gpufleet.sched.quota import slice_milli
from gpufleet.sched.registry import resolve
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.profiles import Profile
from gpufleet.specs.teams import PriorityClass, Quota, Team, TeamsSpec


@dataclass(frozen=True, slots=True)
class Resource:
    """One form an accelerator's GPUs take on the nodes: whole GPUs, or one MIG profile's slices."""

    accelerator: str
    profile: str | None  # MIG profile (catalog spelling, e.g. 1g.10gb+me); None: whole GPUs
    capacity: int  # units of it in the cluster (GPUs, or slices)
    # what one unit weighs against the accelerator's quota, in thousandths of a GPU: for a
    # slice, what a request for one is charged before it is placed (`sched.quota.slice_milli`
    # without a place: the ceiling of its share; placed slices weigh exactly, 1000 per GPU)
    milli: int


@dataclass(frozen=True)
class Flavor:
    """An accelerator of the cluster (a gpufleet quota flavor) and the resources it offers."""

    accelerator: str
    vendor: str
    gpus: int
    resources: tuple[Resource, ...]  # whole GPUs first (if any), then MIG profiles
    groups: tuple[str, ...]  # node groups of this accelerator, in spec order

    @property
    def whole(self) -> Resource | None:
        return next((r for r in self.resources if r.profile is None), None)

    @property
    def mig(self) -> tuple[Resource, ...]:
        return tuple(r for r in self.resources if r.profile is not None)

    def split(self, gpus: int) -> dict[Resource, int]:
        """`gpus` of this flavor spread over its resources in proportion to their capacity.

        Each resource first gets the floor of its share; then units are added, resources
        with the largest remainders first, while the weighed total is more than half a
        GPU short of `gpus` (or taken away while it is half a GPU or more over). The
        result's weights (`milli`) therefore add up to `gpus` rounded half up, so
        `gpus_of` gives back exactly `gpus`.
        """
        if gpus <= 0:
            return dict.fromkeys(self.resources, 0)
        # a resource's share of `gpus` is gpus * capacity / the flavor's GPUs: whole GPUs
        # get their fraction of the GPUs, a MIG profile its slices per GPU times that
        units = {r: gpus * r.capacity // self.gpus for r in self.resources}
        order = sorted(
            range(len(self.resources)),
            key=lambda i: (-(gpus * self.resources[i].capacity % self.gpus), i),
        )
        target = gpus * MILLI
        weighed = sum(units[r] * r.milli for r in self.resources)
        k = 0
        while target - weighed > MILLI // 2:
            r = self.resources[order[k % len(order)]]
            units[r] += 1
            weighed += r.milli
            k += 1
        # slice weights are rounded up (7 x 1g.10gb weigh 1.001 GPUs), so on many MIG GPUs
        # the floors alone can weigh more than half a GPU too much: take units back,
        # smallest remainders first
        k = 0
        while weighed - target >= MILLI // 2:
            r = self.resources[order[-1 - k % len(order)]]
            if units[r]:
                units[r] -= 1
                weighed -= r.milli
            k += 1
        return units


def gpus_of(milli: int) -> int:
    """Thousandths of a GPU as whole GPUs, rounded half up (the inverse of `Flavor.split`)."""
    return (milli + MILLI // 2) // MILLI


@dataclass(frozen=True)
class TeamQuota:
    """One team's quota of one flavor, in the terms every engine needs.

    `ceiling` is the most the team can ever hold: its guarantee, plus (in a cohort, with
    borrowing on) what the rest of its cohort lends, capped by its own limit and by the
    cluster's GPUs of the flavor (`sched.quota.QuotaBook.limit` when nobody else uses
    anything). `borrowing_limit` and `lending_limit` follow Kueue: beyond/out of the
    guarantee, None for no limit, and only meaningful in a cohort.
    """

    team: str
    flavor: Flavor
    guaranteed: int
    ceiling: int
    lendable: int
    borrowing_limit: int | None
    lending_limit: int | None

    @property
    def kept(self) -> int:
        """GPUs of the guarantee never lent out (Volcano's `guarantee`)."""
        return self.guaranteed - self.lendable


@dataclass(frozen=True)
class Fleet:
    """The resolved inputs of one export."""

    cluster_spec: ClusterSpec
    cluster: Cluster
    teams_spec: TeamsSpec | None
    profile_name: str
    profile: Profile
    flavors: Mapping[str, Flavor]  # accelerator -> flavor, in the cluster spec's order
    quotas: Mapping[str, tuple[TeamQuota, ...]]  # team -> its quotas, in the team's order
    overcommits: tuple[Overcommit, ...]  # flavors whose guarantees add up past the cluster
    cluster_source: str
    teams_source: str | None

    @property
    def teams(self) -> tuple[Team, ...]:
        return tuple(self.teams_spec.teams) if self.teams_spec else ()

    @property
    def priority_classes(self) -> tuple[PriorityClass, ...]:
        return tuple(self.teams_spec.priority_classes) if self.teams_spec else ()

    def overcommit_warnings(self, consequence: str) -> tuple[str, ...]:
        """One warning per overcommitted flavor, with the engine's `consequence`."""
        return tuple(o.warning(self.cluster_spec.name, consequence) for o in self.overcommits)

    def require_teams(self, target: str) -> TeamsSpec:
        if self.teams_spec is None:
            raise UserError(f"export {target} needs the teams: pass --teams TEAMS.yaml")
        return self.teams_spec

    def resources(self) -> tuple[Resource, ...]:
        return tuple(r for f in self.flavors.values() for r in f.resources)


def build_flavors(spec: ClusterSpec) -> dict[str, Flavor]:
    whole: dict[str, int] = {}
    slices: dict[str, dict[str, int]] = {}
    groups: dict[str, list[str]] = {}
    for group in spec.node_groups:
        acc = group.accelerator
        groups.setdefault(acc, []).append(group.name)
        whole.setdefault(acc, 0)
        per_acc = slices.setdefault(acc, {})
        gpus = group.count * group.gpus_per_node
        instances = group.mig_instances()
        if not instances:
            whole[acc] += gpus
            continue
        for name, count in instances.items():
            profile = get_mig_profile(acc, name).profile
            per_acc[profile] = per_acc.get(profile, 0) + count * gpus
    out: dict[str, Flavor] = {}
    for acc, names in groups.items():
        device = get_accelerator(acc)
        resources: list[Resource] = []
        if whole[acc]:
            resources.append(Resource(acc, None, whole[acc], MILLI))
        resources.extend(Resource(acc, p, n, slice_milli(acc, p)) for p, n in slices[acc].items())
        gpus = sum(g.count * g.gpus_per_node for g in spec.node_groups if g.accelerator == acc)
        out[acc] = Flavor(acc, device.vendor, gpus, tuple(resources), tuple(names))
    return out


def _team_quota(team: Team, quota: Quota, flavor: Flavor, teams: Sequence[Team]) -> TeamQuota:
    """The quota in engine terms; its guarantee is at most the flavor's GPUs (`build_fleet`
    refuses more), so a ceiling capped at the cluster never falls below the guarantee."""
    g = quota.guaranteed_gpus
    if team.cohort is None:
        return TeamQuota(team.name, flavor, g, g, 0, None, None)  # no cohort: never lends
    ceiling = g
    if quota.borrowing:
        pool = 0
        for other in teams:
            q = other.quota_for(flavor.accelerator)
            if other.name != team.name and other.cohort == team.cohort and q is not None:
                pool += q.lendable_gpus
        caps = [g + pool, flavor.gpus]
        if quota.max_gpus is not None:
            caps.append(quota.max_gpus)
        ceiling = max(g, min(caps))
    if not quota.borrowing:
        borrowing: int | None = 0
    elif quota.max_gpus is not None:
        borrowing = quota.max_gpus - g
    else:
        borrowing = None
    lending = 0 if not quota.lending else quota.lending_limit_gpus
    return TeamQuota(team.name, flavor, g, ceiling, quota.lendable_gpus, borrowing, lending)


@dataclass(frozen=True)
class Overcommit:
    """Guarantees of one flavor that add up to more GPUs than the cluster has: they cannot
    all be honoured at once, whatever the engine. `held` is (team, guaranteed GPUs) for the
    teams with a guarantee, and `kept` what they never lend (Volcano's `guarantee`)."""

    flavor: str
    cluster_gpus: int
    held: tuple[tuple[str, int], ...]
    kept: int

    @property
    def guaranteed(self) -> int:
        return sum(g for _, g in self.held)

    def warning(self, cluster: str, consequence: str) -> str:
        """The warning an export gives: the numbers, what `consequence` the engine draws
        from them, and what to change."""
        teams = ", ".join(f"{t} {g:,}" for t, g in self.held)
        short = self.guaranteed - self.cluster_gpus
        return (
            f"The guarantees of {self.flavor} add up to {self.guaranteed:,} GPUs ({teams}), "
            f"{short:,} more than the {self.cluster_gpus:,} of cluster '{cluster}': they "
            f"cannot all be honoured at once. {consequence} Lower them to add up to at most "
            f"{self.cluster_gpus:,}."
        )


def overcommits(quotas: Mapping[str, Sequence[TeamQuota]]) -> tuple[Overcommit, ...]:
    """The flavors whose guarantees add up past the cluster's GPUs, in flavor order."""
    by_flavor: dict[str, list[TeamQuota]] = {}
    for team_quotas in quotas.values():
        for q in team_quotas:
            by_flavor.setdefault(q.flavor.accelerator, []).append(q)
    out: list[Overcommit] = []
    for flavor, qs in by_flavor.items():
        gpus = qs[0].flavor.gpus
        if sum(q.guaranteed for q in qs) > gpus:
            held = tuple((q.team, q.guaranteed) for q in qs if q.guaranteed)
            out.append(Overcommit(flavor, gpus, held, sum(q.kept for q in qs)))
    return tuple(out)


def build_fleet(
    cluster_spec: ClusterSpec,
    teams_spec: TeamsSpec | None,
    *,
    profile: str = "default",
    cluster_source: str = "cluster.yaml",
    teams_source: str | None = None,
) -> Fleet:
    """Resolve the inputs; a quota for an accelerator the cluster lacks is a user error."""
    resolved = resolve(profile)
    flavors = build_flavors(cluster_spec)
    quotas: dict[str, tuple[TeamQuota, ...]] = {}
    problems: list[str] = []
    teams = tuple(teams_spec.teams) if teams_spec else ()
    for i, team in enumerate(teams):
        out: list[TeamQuota] = []
        for j, quota in enumerate(team.quotas):
            flavor = flavors.get(quota.flavor)
            if flavor is None:
                problems.append(
                    f"teams[{i}].quotas[{j}].flavor: team {team.name} has a quota for "
                    f"{quota.flavor}, which cluster '{cluster_spec.name}' ({cluster_source}) "
                    f"does not have; its accelerators: {', '.join(flavors)}"
                )
                continue
            if quota.guaranteed_gpus > flavor.gpus:
                # no engine can honour it, and capped at the cluster the ceilings would fall
                # below it (Volcano's deserved above its capability, KAI's quota above limit)
                problems.append(
                    f"teams[{i}].quotas[{j}].guaranteed_gpus: team {team.name} is guaranteed "
                    f"{quota.guaranteed_gpus:,} {quota.flavor} GPUs, but cluster "
                    f"'{cluster_spec.name}' ({cluster_source}) has {flavor.gpus:,}; a "
                    f"guarantee cannot be more than the cluster has: lower it to at most "
                    f"{flavor.gpus:,}, or export with the cluster it is meant for"
                )
                continue
            out.append(_team_quota(team, quota, flavor, teams))
        quotas[team.name] = tuple(out)
    if problems:
        where = teams_source or "teams"
        raise UserError(f"{where}: cannot export\n" + "\n".join(f"  {p}" for p in problems))
    return Fleet(
        cluster_spec=cluster_spec,
        cluster=Cluster.from_spec(cluster_spec),
        teams_spec=teams_spec,
        profile_name=profile,
        profile=resolved.profile,
        flavors=flavors,
        quotas=quotas,
        overcommits=overcommits(quotas),
        cluster_source=cluster_source,
        teams_source=teams_source,
    )


def integer_weights(weights: Sequence[float], most: int = 65_535) -> list[int]:
    """Positive weights as the smallest integers in the same ratios (engines that take ints).

    Each weight is read as a fraction with a denominator of at most 1000, all are
    scaled by the common denominator and divided by their gcd; when that would pass
    `most`, they are scaled so the largest is `most` and rounded (at least 1).
    """
    if not weights:
        return []
    fractions = [Fraction(w).limit_denominator(1000) for w in weights]
    scale = math.lcm(*(f.denominator for f in fractions))
    ints = [int(f * scale) for f in fractions]
    common = math.gcd(*ints)
    ints = [i // common for i in ints]
    if max(ints) <= most:
        return ints
    top = max(weights)
    return [max(1, round(w / top * most)) for w in weights]


def active_preemption(fleet: Fleet) -> frozenset[str]:
    """The profile's preemption plugins, or none when no priority class is preemptible
    (both plugins only ever evict jobs of preemptible classes)."""
    if preemptible_ceiling(fleet.priority_classes) is None:
        return frozenset()
    return frozenset(fleet.profile.preemption)


def preemptible_ceiling(classes: Sequence[PriorityClass]) -> int | None:
    """The highest value of a preemptible class: no job above it is ever a victim."""
    values = [c.value for c in classes if c.preemptible]
    return max(values) if values else None
