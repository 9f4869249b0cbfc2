"""Whole-GPU gangs this cluster could never hold, even empty: "cannot run", not a wait.

A gang of 3 workers × 8 GPUs on two 8-GPU nodes waits for room that never comes. Left to
placement it reads "room for 1 of 3 workers" for ever, it is weighed against its team's
quota and may evict for it, and under EASY backfill it takes the cycle's one reservation
(the search finds no prefix of running ends that frees enough, and says the running jobs
have no estimates), so the job behind it that could start within the hour gets none.

The bound is static: the cluster's nodes of the accelerator, their GPUs not cut into MIG
slices (a re-layout never makes a cut GPU whole), less spot nodes for a job
that may not use them (`framework.spot_rule`, every placement plugin's filter), with
workers of `gpus_per_worker` on one node each, and within one group of the job's required
topology level when it names one. Nodes down or busy today do not lower it: they come back.
"""

from __future__ import annotations

from gpufleet.cluster import Cluster
from gpufleet.sched.requests import Request
from gpufleet.sched.waits import TooLarge
from gpufleet.specs.jobs import JobSpec


class StaticRoom:
    """Per (accelerator, GPUs per worker, spot allowed, required level): the most workers
    the cluster's nodes could ever hold at once, computed once per cluster
    (`Cluster.derived`: a cycle asks once per job evaluated)."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._most: dict[tuple[str, int, bool, str | None], int] = {}

    def too_large(self, job: JobSpec, request: Request) -> TooLarge | None:
        """The record saying why `request` (whole GPUs) never fits here; None when it could."""
        required = job.topology.required
        if required is not None and required not in self._cluster.levels:
            return None  # placement says so (`waits.UnknownLevel`)
        acc, per, spot = request.accelerator, request.gpus_per_worker, job.spot_ok
        key = (acc, per, spot, required)
        most = self._most.get(key)
        if most is None:
            most = self._most[key] = self._most_workers(*key)
        if most >= request.workers:
            return None
        nodes = [n for n in self._cluster.nodes if n.accelerator == acc]
        excluded = not spot and any(n.capacity == "spot" for n in nodes)
        sliced = any(n.whole_gpus < n.gpus for n in nodes)
        return TooLarge(
            acc,
            request.workers,
            per,
            most,
            spot_excluded=excluded,
            level=required,
            mig_sliced=sliced,
        )

    def _most_workers(self, acc: str, per: int, spot_ok: bool, level: str | None) -> int:
        cluster = self._cluster
        per_group: dict[str, int] = {}
        for node in cluster.nodes:
            if node.accelerator != acc or (node.capacity == "spot" and not spot_ok):
                continue
            group = "" if level is None else cluster.group_of(node.name, level)
            # a GPU cut into MIG slices is never whole again (`Node.whole_gpus`)
            per_group[group] = per_group.get(group, 0) + node.whole_gpus // per
        return max(per_group.values(), default=0)
