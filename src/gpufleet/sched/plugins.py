"""The `topology-best-fit` placement plugin (registered in `sched.registry`).

Whole-GPU gangs packed into the fewest scale-up domains / nodes / topology
groups, each tier tried tightest first (best fit, so larger holes stay free for
larger jobs); a `required` topology level keeps every worker inside one group
of that level. MIG requests take a free slice of the profile; fractions the fullest
GPU that still has room. Spot nodes only for jobs whose `spot_ok`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpufleet.cluster import Cluster, Node, StateView
from gpufleet.sched.framework import OK, Placed, Placement, Status
from gpufleet.sched.requests import FRACTION_STEPS, Request
from gpufleet.specs.jobs import JobSpec

MILLI_PER_EIGHTH = 1000 // FRACTION_STEPS


_MEMBERS: dict[int, tuple[Cluster, dict[tuple[str, str], tuple[str, ...]]]] = {}


def group_members(cluster: Cluster, level: str, group: str) -> tuple[str, ...]:
    """Nodes of one topology group (or scale-up domain, level "domain"), in cluster order."""
    cached = _MEMBERS.get(id(cluster))
    if cached is None or cached[0] is not cluster:
        table: dict[tuple[str, str], list[str]] = {}
        for node in cluster.nodes:
            for i, lvl in enumerate(cluster.levels[:-1]):
                table.setdefault((lvl, "/".join(node.path[: i + 1])), []).append(node.name)
            table.setdefault((cluster.levels[-1], node.name), []).append(node.name)
            for d in dict.fromkeys(node.domains or (node.name,)):
                table.setdefault(("domain", d), []).append(node.name)
        if len(_MEMBERS) > 8:
            _MEMBERS.clear()
        cached = (cluster, {k: tuple(v) for k, v in table.items()})
        _MEMBERS[id(cluster)] = cached
    return cached[1].get((level, group), ())


class TopologyBestFit:
    """Gangs all-or-nothing, each worker on one node, packed into the fewest groups (best fit)."""

    name = "topology-best-fit"

    def observe(self, requests: Sequence[Request]) -> TopologyBestFit:
        return self

    def filter_node(self, job: JobSpec, node: Node) -> Status:
        if node.capacity == "spot" and not job.spot_ok:
            return Status("unschedulable", f"{node.name} is spot capacity", self.name)
        return OK

    def place(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        if request.kind == "gpus":
            return self._gang(view, job, request)
        if request.kind == "mig":
            return self._mig(view, job, request)
        return self._fraction(view, job, request)

    def _wait(self, reason: str) -> Placed:
        return Placed(status=Status("wait", reason, self.name))

    def _allowed(self, view: StateView, job: JobSpec, name: str) -> bool:
        return self.filter_node(job, view.cluster.node(name)).ok

    def _fit(
        self, view: StateView, job: JobSpec, nodes: Iterable[str], workers: int, per: int
    ) -> tuple[Placement, ...] | None:
        """Best fit of `workers` × `per` GPUs onto `nodes`, tightest node first; None if short."""
        cluster = view.cluster
        cands = []
        room = 0
        for name in nodes:
            free = view.free_gpus(name)
            if free >= per and self._allowed(view, job, name):
                cands.append((free, cluster.node_index(name), name))
                room += free // per
        if room < workers:
            return None
        cands.sort()
        out: list[Placement] = []
        for free, _, name in cands:
            ids = view.free_gpu_ids(name)
            for j in range(min(free // per, workers - len(out))):
                out.append(Placement(name, ids[j * per : (j + 1) * per]))
            if len(out) == workers:
                break
        return tuple(out)

    def _spot_note(self, view: StateView, job: JobSpec, acc: str) -> str:
        if job.spot_ok:
            return ""
        spot = any(view.cluster.node(n).capacity == "spot" for n in view.nodes_with_free(acc, 1))
        return "; spot nodes excluded (this job may not run on spot)" if spot else ""

    def _gang(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        cluster = view.cluster
        acc, workers, per = request.accelerator, request.workers, request.gpus_per_worker
        total = workers * per
        shape = f"{workers}×{per}"
        required = job.topology.required
        if required is not None:
            if required not in cluster.levels:
                known = ", ".join(cluster.levels)
                return Placed(
                    status=Status(
                        "unschedulable",
                        f"cannot run: topology level '{required}' is not in this cluster ({known})",
                        self.name,
                    )
                )
            fragmented = False
            for group in list(view.groups_with_free(required, acc, total)):
                fit = self._fit(view, job, group_members(cluster, required, group), workers, per)
                if fit is not None:
                    return Placed(fit)
                fragmented = True
            most = 0
            for group in view.groups_with_free(required, acc, 1):
                most = max(most, view.free_in_group(required, group, acc))
            if fragmented:
                why = (
                    f"waiting: no {required} can hold {shape} {acc} GPUs with each worker "
                    f"on one node (free GPUs are fragmented; most free in one {required}: {most})"
                )
            else:
                why = (
                    f"waiting: no {required} has {total} free {acc} GPUs for {shape} "
                    f"(most free in one {required}: {most})"
                )
            return self._wait(why + self._spot_note(view, job, acc))
        tiers: list[tuple[str, Iterable[str]]] = [("domain", view.domains_with_free(acc, total))]
        tiers += [(lvl, view.groups_with_free(lvl, acc, total)) for lvl in cluster.levels[::-1]]
        for level, groups in tiers:
            for group in list(groups):
                fit = self._fit(view, job, group_members(cluster, level, group), workers, per)
                if fit is not None:
                    return Placed(fit)
        fit = self._fit(view, job, list(view.nodes_with_free(acc, per)), workers, per)
        if fit is not None:
            return Placed(fit)
        room = sum(
            view.free_gpus(n) // per
            for n in view.nodes_with_free(acc, per)
            if self._allowed(view, job, n)
        )
        return self._wait(
            f"waiting: room for {room} of {workers} workers of {per} {acc} GPUs on single "
            f"nodes ({view.free_total(acc)} free {acc} GPUs in all)"
            + self._spot_note(view, job, acc)
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
            return self._wait(
                f"waiting: the free {profile} slices on {acc} are on spot capacity, which this "
                "job may not use"
            )
        return self._wait(f"waiting: no free {profile} MIG slice on {acc}")

    def _fraction(self, view: StateView, job: JobSpec, request: Request) -> Placed:
        acc, milli = request.accelerator, request.eighths * MILLI_PER_EIGHTH
        skipped = False
        for node, gpu in view.gpus_with_free_milli(acc, milli):
            if self._allowed(view, job, node):
                return Placed((Placement(node, gpu=gpu, milli=milli),))
            skipped = True
        if skipped:
            return self._wait(
                f"waiting: the {acc} GPUs with {milli}/1000 free to share are spot capacity, "
                "which this job may not use"
            )
        return self._wait(f"waiting: no {acc} GPU has {milli}/1000 free to share")
