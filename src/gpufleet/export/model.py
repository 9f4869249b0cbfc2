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
to the same number of GPUs (which is what `import kueue` reads back). Rounding
each team on its own can promise more of one resource than the cluster has
(three teams of 8 A100s on 8 whole + 16 MIG-cut ones got 3 whole GPUs each), so
the guarantees of all teams are apportioned together (`apportion`): per
resource they never add up past the cluster when the GPUs do not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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


Units = dict[Resource, int]


def weight(units: Mapping[Resource, int]) -> int:
    """What units of an accelerator's resources weigh against its quota, in thousandths."""
    return sum(r.milli * n for r, n in units.items())


def _off(units: Mapping[Resource, int], gpus: int) -> int:
    """How far `units` weigh from `gpus`: 0 when `gpus_of` reads `gpus` back, else the
    thousandths missing (negative) or too many (positive)."""
    w = weight(units) - gpus * MILLI
    if -(MILLI // 2) <= w < MILLI // 2:
        return 0
    return w


def fit(
    flavor: Flavor,
    gpus: int,
    *,
    low: Mapping[Resource, int] | None = None,
    high: Mapping[Resource, int] | None = None,
) -> Units:
    """`flavor.split(gpus)` held between `low` and `high` per resource (default: none, and
    the cluster's capacity), then units added or taken back within those bounds, heaviest
    first, until it weighs `gpus` again. Used where one split must stay within another
    (a Volcano `capability` at or above `deserved`, a Kueue `lendingLimit` at most its
    `nominalQuota`), which two independent splits do not promise.

    A unit weighs at most a GPU and the window `gpus_of` accepts is a GPU wide, so a step
    never overshoots; bounds that leave no room end it short (never past a bound).
    """
    lo = {r: low.get(r, 0) if low is not None else 0 for r in flavor.resources}
    hi = {r: high.get(r, 0) if high is not None else r.capacity for r in flavor.resources}
    units = {r: min(max(n, lo[r]), max(hi[r], lo[r])) for r, n in flavor.split(gpus).items()}
    while (off := _off(units, gpus)) != 0:
        if off < 0:
            room = [r for r in flavor.resources if units[r] < hi[r]]
            step = 1
        else:
            room = [r for r in flavor.resources if units[r] > lo[r]]
            step = -1
        if not room:
            break
        r = max(room, key=lambda r: r.milli)  # max() keeps the first of equals: stable
        units[r] += step
    return units


def apportion(
    flavor: Flavor,
    amounts: Sequence[int],
    highs: Sequence[Mapping[Resource, int] | None] | None = None,
) -> list[Units]:
    """GPUs of `flavor` for several teams (in a fixed order), split over its resources so
    that, when `amounts` add up to at most the flavor's GPUs, each resource's units add
    up to at most its capacity, and each team's still weigh its amount where the units
    allow it. `highs` bounds each team's units per resource (Volcano's `guarantee` within
    its `deserved`).

    Each team is first split on its own (`fit`). Where a resource is then promised past
    its capacity, units are taken back from the teams weighing most over their amount
    (the later team of equals). A team then short of its amount gets a unit the cluster
    has spare, or one from a team that stays within its own amount without it; heaviest
    units first. Amounts that add up past the cluster cannot fit: their splits are left
    as they are (`overcommits` warns of them).
    """
    bounds = list(highs) if highs is not None else [None] * len(amounts)
    units = [fit(flavor, g, high=h) for g, h in zip(amounts, bounds, strict=True)]
    if sum(amounts) > flavor.gpus:
        return units
    hi = [
        {r: (b.get(r, 0) if b is not None else r.capacity) for r in flavor.resources}
        for b in bounds
    ]

    def surplus(i: int) -> int:
        return weight(units[i]) - amounts[i] * MILLI

    for r in flavor.resources:
        while sum(u[r] for u in units) > r.capacity:
            i = max((i for i, u in enumerate(units) if u[r]), key=lambda i: (surplus(i), i))
            units[i][r] -= 1
    for i, g in enumerate(amounts):
        while _off(units[i], g) < 0:
            spare = [
                r
                for r in flavor.resources
                if units[i][r] < hi[i][r] and sum(u[r] for u in units) < r.capacity
            ]
            if spare:
                units[i][max(spare, key=lambda r: r.milli)] += 1
                continue
            moves = [
                (r, j)
                for r in flavor.resources
                if units[i][r] < hi[i][r]
                for j in range(len(units))
                if j != i
                and units[j][r]
                and _off({**units[j], r: units[j][r] - 1}, amounts[j]) == 0
            ]
            if not moves:
                break  # the resources weigh too little: it stays short (`overcommits` warns)
            r, j = max(moves, key=lambda m: (m[0].milli, surplus(m[1]), m[1]))
            units[j][r] -= 1
            units[i][r] += 1
    return units


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
    # the guarantee, the part never lent and the ceiling as units of the flavor's resources
    # (`build_fleet` apportions the guarantees of all teams together, so that per resource
    # they fit the cluster; a ceiling holds at least the guarantee's units)
    guaranteed_units: Mapping[Resource, int] = field(default_factory=dict)
    kept_units: Mapping[Resource, int] = field(default_factory=dict)
    ceiling_units: Mapping[Resource, int] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        """GPUs of the guarantee never lent out (Volcano's `guarantee`)."""
        return self.guaranteed - self.lendable

    def lending_units(self) -> Units | None:
        """The lending limit over the resources, none above the guarantee's units."""
        if self.lending_limit is None:
            return None
        return fit(
            self.flavor, min(self.lending_limit, self.guaranteed), high=self.guaranteed_units
        )


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


def resource_label(resource: Resource) -> str:
    """A resource in a message: whole GPUs, or a MIG profile's slices."""
    if resource.profile is None:
        return f"whole {resource.accelerator} GPUs"
    return f"{resource.accelerator} MIG {resource.profile} slices"


@dataclass(frozen=True)
class Overcommit:
    """Guarantees of one flavor that promise more than the cluster has: they cannot all be
    honoured at once, whatever the engine. `held` is (team, guaranteed GPUs) for the teams
    with a guarantee, `kept` what they never lend (Volcano's `guarantee`).

    Either they add up past the cluster's GPUs (then each split over the resources stays as
    it is, and `resources` lists (resource, units promised, capacity) for the resources
    promised past their capacity), or past what the resources weigh (`holds`, thousandths
    of a GPU: MIG layouts that leave part of a GPU unused weigh less than its GPUs), so that
    apportioned within the resources (`apportion`) some teams get less: `short` is (team,
    GPUs guaranteed, GPUs its units weigh)."""

    flavor: str
    cluster_gpus: int
    held: tuple[tuple[str, int], ...]
    kept: int
    holds: int
    resources: tuple[tuple[Resource, int, int], ...] = ()
    short: tuple[tuple[str, int, int], ...] = ()

    @property
    def guaranteed(self) -> int:
        return sum(g for _, g in self.held)

    def warning(self, cluster: str, consequence: str) -> str:
        """The warning an export gives: the numbers, what `consequence` the engine draws
        from them, and what to change."""
        teams = ", ".join(f"{t} {g:,}" for t, g in self.held)
        if self.guaranteed > self.cluster_gpus:
            short = self.guaranteed - self.cluster_gpus
            head = (
                f"The guarantees of {self.flavor} add up to {self.guaranteed:,} GPUs "
                f"({teams}), {short:,} more than the {self.cluster_gpus:,} of cluster "
                f"'{cluster}': they cannot all be honoured at once."
            )
            parts = "; ".join(
                f"{n:,} {resource_label(r)} of {cap:,}" for r, n, cap in self.resources
            )
            if parts:
                head += f" Split over its resources they promise {parts}."
            most = self.cluster_gpus
        else:
            written = ", ".join(f"{t} {w:,} (of {g:,})" for t, g, w in self.short)
            head = (
                f"The guarantees of {self.flavor} add up to {self.guaranteed:,} GPUs "
                f"({teams}), but its whole GPUs and MIG slices in cluster '{cluster}' weigh "
                f"{self.holds / MILLI:,.2f} GPUs (MIG layouts leave part of some GPUs "
                "unused): they cannot all be honoured at once. Written as the resources "
                f"the cluster has, these teams get less: {written}."
            )
            most = self.holds // MILLI
        return f"{head} {consequence} Lower them to add up to at most {most:,}."


def overcommits(quotas: Mapping[str, Sequence[TeamQuota]]) -> tuple[Overcommit, ...]:
    """The flavors whose guarantees cannot all be honoured, in flavor order: they add up
    past the cluster's GPUs (or, split over the resources, past one resource's capacity),
    or some team's units (`TeamQuota.guaranteed_units`) weigh less than its guarantee."""
    by_flavor: dict[str, list[TeamQuota]] = {}
    for team_quotas in quotas.values():
        for q in team_quotas:
            by_flavor.setdefault(q.flavor.accelerator, []).append(q)
    out: list[Overcommit] = []
    for flavor, qs in by_flavor.items():
        f = qs[0].flavor
        # (with one resource, its units are the GPUs: the sum of GPUs says it all)
        over = tuple(
            (r, n, r.capacity)
            for r in f.resources
            if len(f.resources) > 1
            and (n := sum(q.guaranteed_units.get(r, 0) for q in qs)) > r.capacity
        )
        short = tuple(
            (q.team, q.guaranteed, w)
            for q in qs
            if (w := gpus_of(weight(q.guaranteed_units))) < q.guaranteed
        )
        if sum(q.guaranteed for q in qs) > f.gpus or over or short:
            out.append(
                Overcommit(
                    flavor,
                    f.gpus,
                    tuple((q.team, q.guaranteed) for q in qs if q.guaranteed),
                    sum(q.kept for q in qs),
                    weight({r: r.capacity for r in f.resources}),
                    over,
                    short,
                )
            )
    return tuple(out)


def _with_units(
    quotas: dict[str, tuple[TeamQuota, ...]], flavors: Mapping[str, Flavor]
) -> dict[str, tuple[TeamQuota, ...]]:
    """The quotas with their units: per flavor, the guarantees of all teams apportioned
    together (team order), the parts never lent within them, each ceiling at least its
    guarantee's units."""
    out = {team: list(qs) for team, qs in quotas.items()}
    for accelerator, flavor in flavors.items():
        at = [
            (team, i)
            for team, qs in quotas.items()
            for i, q in enumerate(qs)
            if q.flavor.accelerator == accelerator
        ]
        held = [quotas[t][i] for t, i in at]
        guaranteed = apportion(flavor, [q.guaranteed for q in held])
        kept = apportion(flavor, [q.kept for q in held], guaranteed)
        for (team, i), q, g, k in zip(at, held, guaranteed, kept, strict=True):
            ceiling = g if q.ceiling == q.guaranteed else fit(flavor, q.ceiling, low=g)
            out[team][i] = replace(q, guaranteed_units=g, kept_units=k, ceiling_units=ceiling)
    return {team: tuple(qs) for team, qs in out.items()}


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
    classes = tuple(teams_spec.priority_classes) if teams_spec else ()
    for i, team in enumerate(teams):
        default = next(c for c in classes if c.name == team.default_priority)
        cap = class_cap(team, classes)
        if cap.value < default.value:
            # as the control plane refuses it (`control.admin`): the team's own jobs, of its
            # default class, would be refused
            problems.append(
                f"teams[{i}].max_priority_class: team {team.name}'s max priority class "
                f"{cap.name} ({cap.value}) is below its default class {default.name} "
                f"({default.value}), so its own jobs would be refused; raise the cap or "
                "lower the default"
            )
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
    quotas = _with_units(quotas, flavors)
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


def class_cap(team: Team, classes: Sequence[PriorityClass]) -> PriorityClass:
    """The highest class the team's leads and members may use: its `max_priority_class`,
    else its default class (gpufleet's control plane, `control.admin.class_cap`)."""
    name = team.max_priority_class or team.default_priority
    return next(c for c in classes if c.name == name)


def allowed_classes(fleet: Fleet, team: Team) -> tuple[PriorityClass, ...]:
    """The classes at or below the team's cap, lowest first (ties by name)."""
    cap = class_cap(team, fleet.priority_classes).value
    return tuple(
        sorted(
            (c for c in fleet.priority_classes if c.value <= cap), key=lambda c: (c.value, c.name)
        )
    )


def preemptible_ceiling(classes: Sequence[PriorityClass]) -> int | None:
    """The highest value of a preemptible class: no job above it is ever a victim."""
    values = [c.value for c in classes if c.preemptible]
    return max(values) if values else None
