"""The `topology-best-fit` placement plugin (registered in `sched.registry`).

Whole-GPU gangs packed into the fewest scale-up domains / nodes / topology
groups, each tier tried tightest first (best fit, so larger holes stay free for
larger jobs); a `required` topology level keeps every worker inside one group
of that level. MIG requests take a free slice of the profile; fractions the fullest
GPU that still has room. Spot nodes only for jobs whose `spot_ok`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from gpufleet.cluster import Cluster, Node, StateView
from gpufleet.sched.backfill import reserved_free
from gpufleet.sched.framework import (
    Placed,
    Placement,
    Status,
    missing_slice,
    slice_placed,
    spot_rule,
    whole_placed,
    whole_placement,
)
from gpufleet.sched.requests import FRACTION_STEPS, Request
from gpufleet.sched.waits import CapacityWait, ShareWait, SliceWait, UnknownLevel, Wait
from gpufleet.specs.jobs import JobSpec

MILLI_PER_EIGHTH = 1000 // FRACTION_STEPS


# The tiers of a gang placement, tightest first: one scale-up domain, one group of a topology
# level (from "node" up), anywhere in the cluster.
_Tier = Literal["domain", "level", "anywhere"]
# A tier that held no gang of one shape: (tier, level, accelerator, workers, GPUs per worker,
# whether spot nodes are excluded).
_TierKey = tuple[_Tier, str, str, int, int, bool]


class _ClusterInfo:
    """Per-cluster lookups, each built on first use: group and domain members, spot nodes."""

    __slots__ = (
        "_domains",
        "_levels",
        "_members_of",
        "_tiers_of",
        "cluster",
        "spot",
        "spot_set",
        "tiers",
    )

    def __init__(self, cluster: Cluster) -> None:
        spot: dict[str, list[str]] = {}
        for node in cluster.nodes:
            if node.capacity == "spot":
                spot.setdefault(node.accelerator, []).append(node.name)
        self.cluster = cluster
        self.spot = {acc: tuple(names) for acc, names in spot.items()}
        self.spot_set = {acc: frozenset(names) for acc, names in spot.items()}
        levels: list[tuple[_Tier, str]] = [("level", lvl) for lvl in cluster.levels[::-1]]
        self.tiers: tuple[tuple[_Tier, str], ...] = (("domain", ""), *levels, ("anywhere", ""))
        self._levels: dict[str, dict[str, tuple[str, ...]]] = {}
        self._domains: dict[str, tuple[str, ...]] = {}
        self._members_of: dict[tuple[str, str, str], tuple[str, ...]] = {}
        self._tiers_of: dict[str, tuple[tuple[_Tier, str], ...]] = {}

    def tiers_for(self, acc: str) -> tuple[tuple[_Tier, str], ...]:
        """`tiers` for one accelerator. Where each scale-up domain is one node, the node
        tier is the domain tier again (the same nodes in the same order, tightest first),
        so it is left out: it could only fail where the domain tier just failed."""
        found = self._tiers_of.get(acc)
        if found is None:
            node = ("level", self.cluster.levels[-1])
            aligned = self.cluster.domains_are_nodes(acc)
            found = tuple(t for t in self.tiers if not (aligned and t == node))
            self._tiers_of[acc] = found
        return found

    def group_members(self, level: str, group: str) -> tuple[str, ...]:
        """Nodes of one group at a topology level, in cluster order; () for an unknown group."""
        cluster = self.cluster
        t = cluster.tables
        if level == cluster.levels[-1]:
            return (group,) if group in t.node_by_name else ()
        table = self._levels.get(level)
        if table is None:
            i = cluster.level_index(level)
            found: dict[str, list[str]] = {}
            names = t.group_names[i]
            for n, node in enumerate(cluster.nodes):
                found.setdefault(names[t.node_groups[n][i]], []).append(node.name)
            table = self._levels[level] = {k: tuple(v) for k, v in found.items()}
        return table.get(group, ())

    def domain_members(self, domain: str) -> tuple[str, ...]:
        """Nodes with a GPU in one scale-up domain, in cluster order; () for an unknown one."""
        found = self._domains.get(domain)
        if found is None:
            t = self.cluster.tables
            d = t.domain_by_name.get(domain)
            if d is None:
                return ()
            nodes = self.cluster.nodes
            found = tuple(dict.fromkeys(nodes[t.gpu_node[g]].name for g in t.domain_gpus[d]))
            self._domains[domain] = found
        return found

    def accelerator_members(self, level: str, group: str, acc: str) -> tuple[str, ...]:
        """`group_members`, only the nodes of accelerator `acc`."""
        key = (level, group, acc)
        found = self._members_of.get(key)
        if found is None:
            cluster = self.cluster
            found = tuple(
                n for n in self.group_members(level, group) if cluster.node(n).accelerator == acc
            )
            self._members_of[key] = found
        return found


_NO_NODES: frozenset[str] = frozenset()


def _info(cluster: Cluster) -> _ClusterInfo:
    return cluster.derived(_ClusterInfo)


def group_members(cluster: Cluster, level: str, group: str) -> tuple[str, ...]:
    """Nodes of one topology group (or scale-up domain, level "domain"), in cluster order."""
    info = _info(cluster)
    if level == "domain":
        return info.domain_members(group)
    if level not in cluster.levels:
        return ()
    return info.group_members(level, group)


class TopologyBestFit:
    """Gangs all-or-nothing, each worker on one node, packed into the fewest groups (best fit)."""

    name = "topology-best-fit"

    def __init__(self) -> None:
        # tiers found unable to hold a shape, and the state's free epoch they were found at
        self._full: tuple[int, set[_TierKey]] = (0, set())

    def observe(self, requests: Sequence[Request]) -> TopologyBestFit:
        return self

    def filter_node(self, job: JobSpec, node: Node) -> Status:
        return spot_rule(self.name, job, node)

    def place(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        if request.kind == "gpus":
            return self._gang(view, job, request)
        if request.kind == "mig":
            return self._mig(view, job, request)
        return self._fraction(view, job, request)

    def _wait(self, wait: Wait) -> Placed:
        return Placed(status=Status("wait", wait.text(), self.name, wait))

    def _allowed(self, view: StateView, job: JobSpec, name: str) -> bool:
        return self.filter_node(job, view.cluster.node(name)).ok

    @staticmethod
    def _excluded(info: _ClusterInfo, job: JobSpec, acc: str) -> frozenset[str]:
        """Nodes of `acc` that `filter_node` turns away for this job (spot, unless spot_ok)."""
        spot = info.spot_set.get(acc, _NO_NODES)
        return _NO_NODES if not spot or job.spot_ok else spot

    @staticmethod
    def _take(
        view: StateView, ranked: Iterable[str], workers: int, per: int
    ) -> tuple[Placement, ...] | None:
        """Workers onto `ranked` nodes in the order given, as many per node as fit; None if short.

        The second half of `_fit`. Fed the index's own order (tightest first,
        then cluster order: what `_fit` sorts to), it stops as soon as the gang
        is complete instead of visiting every node with room.
        """
        if workers == 1:  # the commonest gang: one worker, on the first node that holds it
            for name in ranked:
                ids = view.free_gpu_ids(name)
                if len(ids) >= per:
                    return (whole_placement(name, ids[:per]),)
            return None
        out: list[Placement] = []
        for name in ranked:
            ids = view.free_gpu_ids(name)
            for j in range(min(len(ids) // per, workers - len(out))):
                out.append(whole_placement(name, ids[j * per : (j + 1) * per]))
            if len(out) == workers:
                return tuple(out)
        return None

    def _fit(
        self,
        view: StateView,
        nodes: tuple[str, ...],
        workers: int,
        per: int,
        excluded: frozenset[str] = _NO_NODES,
    ) -> tuple[Placement, ...] | None:
        """Best fit of `workers` × `per` GPUs onto `nodes` (a group's or a domain's members,
        in cluster order), tightest node first, ties in cluster order; None if short."""
        free = view.free_gpus_of(nodes)
        if excluded:
            cands = [i for i, f in enumerate(free) if f >= per and nodes[i] not in excluded]
        else:
            cands = [i for i, f in enumerate(free) if f >= per]
        cands.sort(key=free.__getitem__)  # stable: equal counts stay in cluster order
        if sum([free[i] // per for i in cands]) < workers:
            return None
        return self._take(view, [nodes[i] for i in cands], workers, per)

    def _room(
        self, view: StateView, info: _ClusterInfo, acc: str, per: int, excluded: frozenset[str]
    ) -> int:
        """Workers of `per` GPUs that fit on single allowed nodes, from the index's counts."""
        room = view.worker_room(acc, per)
        if not excluded:
            return room
        spot = info.spot[acc]
        if len(spot) <= view.count_nodes_with_free(acc, per):  # visit the fewer nodes
            return room - sum(view.free_gpus(n) // per for n in spot)
        return sum(
            view.free_gpus(n) // per for n in view.nodes_with_free(acc, per) if n not in excluded
        )

    def _spot_excluded(self, view: StateView, job: JobSpec, acc: str) -> bool:
        """Whether free GPUs of `acc` lie on spot nodes this job may not use."""
        if job.spot_ok:
            return False
        info = _info(view.cluster)
        spot = info.spot.get(acc, ())
        if not spot:
            found = False
        elif len(spot) <= view.count_nodes_with_free(acc, 1):  # visit the fewer nodes
            found = any(view.free_gpus(n) >= 1 for n in spot)
        else:
            found = any(n in info.spot_set[acc] for n in view.nodes_with_free(acc, 1))
        return found

    def _full_tiers(self, view: StateView) -> set[_TierKey]:
        """Tiers known unable to hold a shape in this state: valid while its free epoch holds.

        Within an epoch GPUs are only taken, and a tier that could not hold a
        gang cannot after more GPUs are taken, so the same shape skips it; any
        GPU freed (a release, a preemption, a rolled-back allocation) starts a new
        epoch and an empty set. One (epoch, set) pair, swapped whole, so a shared
        instance never files a finding under another state's epoch.
        """
        epoch = view.free_epoch
        at, full = self._full
        if at != epoch:
            full = set()
            self._full = (epoch, full)
        return full

    def _tier(
        self,
        view: StateView,
        info: _ClusterInfo,
        tier: tuple[_Tier, str],
        request: Request,
        excluded: frozenset[str],
    ) -> tuple[Placement, ...] | None:
        """The first group of one tier (tightest first) that holds the gang; None if none does.

        `tier` is ("domain", ""), ("level", <level>) or ("anywhere", ""). A group
        whose nodes cannot hold the workers (its counters say so) is passed over
        without a look at them.
        """
        acc, workers, per = request.accelerator, request.workers, request.gpus_per_worker
        kind, level = tier
        key: _TierKey = (kind, level, acc, workers, per, bool(excluded))
        full = self._full_tiers(view)
        if key in full:
            return None
        total = workers * per
        if kind == "domain" and info.cluster.domains_are_nodes(acc):
            # each domain is one node: the tightest allowed node with the whole gang's GPUs
            # (free >= workers x per, so its workers fit), as the general branch finds it
            if not excluded:
                name = view.tightest_with_free(acc, total)
                if name is not None:
                    return self._take(view, (name,), workers, per)
            else:
                for name in view.nodes_with_free(acc, total):
                    if name not in excluded:
                        return self._take(view, (name,), workers, per)
        elif kind == "domain":
            for domain in view.domains_with_free(acc, total):
                if view.worker_room_in_domain(domain, per) >= workers:
                    members = info.domain_members(domain)
                    fit = self._fit(view, members, workers, per, excluded)
                    if fit is not None:
                        return fit
        elif kind == "level":
            for group in view.groups_with_free(level, acc, total):
                if view.worker_room_in_group(level, group, acc, per) >= workers:
                    members = info.accelerator_members(level, group, acc)
                    fit = self._fit(view, members, workers, per, excluded)
                    if fit is not None:
                        return fit
        else:  # the index lists nodes tightest first, the order `_fit` would sort them to
            ranked = view.nodes_with_free(acc, per)
            fit = self._take(view, (n for n in ranked if n not in excluded), workers, per)
            if fit is not None:
                return fit
        full.add(key)
        return None

    def _gang(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        """Tightest tier first: one scale-up domain, one node, one group per level up, anywhere.

        Failing must be cheap (a full cluster fails most of a queue): the index's
        counts tell without visiting nodes when no single-node room is left at
        all, and per group whether its nodes could hold the gang before `_fit`
        looks at them; a tier that held no gang of a shape is skipped for that
        shape until a GPU is freed (`_full_tiers`). None of this changes which
        placement is chosen.
        """
        cluster = view.cluster
        info = _info(cluster)
        acc, workers, per = request.accelerator, request.workers, request.gpus_per_worker
        required = job.topology.required
        excluded = self._excluded(info, job, acc)
        if workers == 1 and required is None and not excluded and cluster.domains_are_nodes(acc):
            # The commonest request: one worker, no constraint, one node per domain. The
            # first tier (one domain = one node) then holds it on the tightest node with
            # `per` free GPUs, if any does; what the tiers below would do otherwise.
            name = view.tightest_with_free(acc, per)
            if name is not None:
                return whole_placed(name, view.free_gpu_ids(name)[:per])
        total = workers * per
        # workers that fit on single nodes anywhere: a bound on every tier below
        room = view.worker_room(acc, per)
        if required is not None:
            if required not in cluster.levels:
                unknown = UnknownLevel(required, tuple(cluster.levels))
                return Placed(status=Status("unschedulable", unknown.text(), self.name, unknown))
            if room >= workers:
                fit = self._tier(view, info, ("level", required), request, excluded)
                if fit is not None:
                    return Placed(fit)
            most = view.most_free_in_group(required, acc)
            return self._wait(
                CapacityWait(
                    # some group has the GPUs, none has them on few enough nodes
                    "fragmented" if most >= total else "group-short",
                    acc,
                    workers,
                    per,
                    level=required,
                    most_free_in_level=most,
                    spot_excluded=self._spot_excluded(view, job, acc),
                    reserved_gpus=reserved_free(view, acc),
                )
            )
        if room >= workers:
            for tier in info.tiers_for(acc):
                fit = self._tier(view, info, tier, request, excluded)
                if fit is not None:
                    return Placed(fit)
        if excluded:  # the room above counted spot nodes too
            room = self._room(view, info, acc, per, excluded)
        reserved = reserved_free(view, acc)
        return self._wait(
            CapacityWait(
                "single-nodes",
                acc,
                workers,
                per,
                room_workers=room,
                free_gpus=view.free_total(acc) + reserved,
                spot_excluded=self._spot_excluded(view, job, acc),
                reserved_gpus=reserved,
            )
        )

    def _mig(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        acc, profile = request.accelerator, request.mig_profile or ""
        skipped = False
        for sid in view.free_slices(acc, profile):
            node = view.cluster.slice_info(sid).node
            if self._allowed(view, job, node):
                return Placed((Placement(node, mig_slices=(sid,)),))
            skipped = True
        if skipped:
            return self._wait(SliceWait("spot-only", acc, profile))
        return slice_placed(self.name, missing_slice(view, acc, profile))

    def _fraction(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        acc, milli = request.accelerator, request.eighths * MILLI_PER_EIGHTH
        skipped = False
        for node, gpu in view.gpus_with_free_milli(acc, milli):
            if self._allowed(view, job, node):
                return Placed((Placement(node, gpu=gpu, milli=milli),))
            skipped = True
        if not skipped and not view.takes_fractions(acc):
            never = ShareWait(acc, milli, unshared=True)
            return Placed(status=Status("unschedulable", never.text(), self.name, never))
        return self._wait(ShareWait(acc, milli, spot_only=skipped))
