"""Plugin registries and the named profiles: a new policy is one class plus one line here.

Profiles are what users pick (`--profile`); each names one plugin per
extension point (design 0009). Descriptions show in `gpufleet schedule --help`
and the scheduling guide.

Besides gpufleet's own profiles, baselines model the schedulers a cluster would
otherwise run, for the simulator to compare against (design 0009, "Baseline
profiles"): `k8s-default` (kube-scheduler with the NVIDIA device plugin),
`kueue-like` (Kueue ClusterQueues in a cohort), `slurm-like` (Slurm multifactor
priority with EASY backfill), `fgd-paper` (FGD as published) and `tiresias`.
Each one's comment says what it models and where the model is coarser.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpufleet.errors import UnknownNameError
from gpufleet.sched.framework import PlacementPlugin, Profile, QueueOrder
from gpufleet.sched.orders import FairShare, Fifo, Multifactor, PriorityOrder, Tiresias
from gpufleet.sched.plugins import TopologyBestFit
from gpufleet.sched.preempt import PREEMPTIONS, PreemptionPlugin
from gpufleet.sched.scoring import BinPack, Fgd, Spread

QUEUE_ORDERS: Mapping[str, QueueOrder] = {
    p.name: p for p in (Fifo(), PriorityOrder(), FairShare(), Tiresias(), Multifactor())
}
PLACEMENTS: Mapping[str, PlacementPlugin] = {
    p.name: p for p in (TopologyBestFit(), BinPack(), Spread(), Fgd())
}

PROFILES: Mapping[str, Profile] = {
    "default": Profile(
        "fair-share",
        "topology-best-fit",
        description="jobs within their team's guarantee first; fair share across teams "
        "(priority, then FIFO, within a team); topology packing; quota reclaim then priority "
        "preemption; EASY backfill",
    ),
    "priority": Profile(
        "priority",
        "topology-best-fit",
        description="jobs within their team's guarantee first; then priority and FIFO "
        "cluster-wide; topology packing; quota reclaim then "
        "priority preemption; EASY backfill",
    ),
    "fifo": Profile(
        "fifo",
        "topology-best-fit",
        preemption=(),
        head_of_line="best-effort",
        guaranteed_first=False,
        description="best-effort FIFO: a job that does not fit never blocks later ones; "
        "no preemption, no reservations",
    ),
    "strict-fifo": Profile(
        "fifo",
        "topology-best-fit",
        preemption=(),
        head_of_line="strict",
        guaranteed_first=False,
        description="strict FIFO: the first job that does not fit blocks every later one",
    ),
    "tiresias": Profile(
        "tiresias",
        "topology-best-fit",
        preemption=("quota-reclaim",),
        head_of_line="best-effort",
        guaranteed_first=False,
        description="Tiresias 2D-LAS order (least attained GPU-seconds first, starvation "
        "promotion); best effort",
    ),
    "binpack": Profile(
        "fair-share",
        "binpack",
        description="the default profile, placing each worker on the fullest node that fits "
        "(MostAllocated), without topology tiers",
    ),
    "spread": Profile(
        "fair-share",
        "spread",
        description="the default profile, placing each worker on the emptiest node "
        "(LeastAllocated, kube-scheduler's default)",
    ),
    "fgd": Profile(
        "fair-share",
        "fgd",
        description="the default profile with fragmentation gradient descent placement (Weng "
        "et al., ATC'23): least growth of GPU capacity the pending request mix cannot use",
    ),
    # -- baselines (design 0009, "Baseline profiles") ------------------------------------
    # kube-scheduler (https://kubernetes.io/docs/concepts/scheduling-eviction/) with the
    # NVIDIA device plugin: the PrioritySort queue (priority, then creation time); the
    # NodeResourcesFit plugin's default LeastAllocated scoring (`spread`); the integer
    # `nvidia.com/gpu` resource only (no MIG strategy, no time-slicing), so slices and
    # fractions become one whole GPU; ResourceQuota only caps a namespace, it guarantees
    # nothing (run it with open quotas: every team guaranteed the cluster); PriorityClass
    # preemption of lower-priority pods; no gang scheduling — pods bind one by one and a
    # partial gang holds its GPUs (`gang=False`, split by the simulator); no backfill,
    # no reservation: a pod that does not fit waits without blocking others.
    "k8s-default": Profile(
        "priority",
        "spread",
        preemption=("priority",),
        head_of_line="best-effort",
        guaranteed_first=False,
        gang=False,
        whole_gpus_only=True,
        description="kube-scheduler with the NVIDIA device plugin: priority then FIFO, "
        "LeastAllocated spreading, whole GPUs only (slices and fractions round up to one GPU), "
        "priority preemption, no gangs (pods bind one by one), no quotas beyond caps, "
        "best effort",
    ),
    # Kueue (https://kueue.sigs.k8s.io/docs/concepts/) with one ClusterQueue per team in a
    # cohort: quota admission with borrowing up to borrowingLimit and lending; queueing
    # strategy BestEffortFIFO (priority then creation time within a queue; across queues
    # Kueue's scheduler takes heads that fit without borrowing first, then priority, then
    # timestamp: `guaranteed_first` + `priority`); preemption reclaimWithinCohort: Any, then
    # withinClusterQueue: LowerPriority (`quota-reclaim`, then `priority` — which here may
    # also evict lower-priority jobs of other teams, where Kueue stays within the
    # ClusterQueue); admission is all-or-nothing per workload; pods are then placed by
    # kube-scheduler (LeastAllocated: `spread`), without Topology Aware Scheduling; no
    # backfill, no reservations.
    "kueue-like": Profile(
        "priority",
        "spread",
        preemption=("quota-reclaim", "priority"),
        head_of_line="best-effort",
        guaranteed_first=True,
        description="Kueue ClusterQueues per team in a cohort: quota admission with borrowing "
        "and reclaim, BestEffortFIFO (no-borrowing first, then priority, then FIFO), "
        "LowerPriority preemption, kube-scheduler LeastAllocated placement, no topology "
        "awareness, no backfill",
    ),
    # Slurm (https://slurm.schedmd.com/priority_multifactor.html, sched_config.html):
    # PriorityType=priority/multifactor (`orders.Multifactor`: age, fair share, job size,
    # QOS), SchedulerType=sched/backfill (EASY here: one reservation, for the first blocked
    # job; Slurm's backfill reserves for several), SelectType=select/cons_tres with
    # TopologyPlugin=topology/tree (`topology-best-fit`: pack a job into the fewest switches),
    # PreemptType=preempt/qos with PreemptMode=REQUEUE (`priority`: a higher QOS requeues
    # lower ones). Accounts' GrpTRES limits cap a team's GPUs; there are no guarantees to
    # put first.
    "slurm-like": Profile(
        "multifactor",
        "topology-best-fit",
        preemption=("priority",),
        head_of_line="backfill",
        guaranteed_first=False,
        description="Slurm priority/multifactor (age, fair share, job size, QOS) with EASY "
        "backfill, topology-aware packing (cons_tres + topology/tree) and QOS preemption",
    ),
    # FGD as evaluated by Weng et al. (ATC'23, "Beware of Fragmentation"): jobs placed in
    # arrival order by the fragmentation gradient, nothing else — no preemption, no
    # reservations, no quotas beyond those the teams file declares (run it with open ones).
    # `fgd` above is gpufleet's default policy with FGD placement.
    "fgd-paper": Profile(
        "fifo",
        "fgd",
        preemption=(),
        head_of_line="best-effort",
        guaranteed_first=False,
        description="FGD as published (Weng et al., ATC'23): arrival order, fragmentation "
        "gradient descent placement, no preemption, best effort",
    ),
}


@dataclass(frozen=True)
class Resolved:
    """A profile's plugins, looked up once per cycle."""

    profile: Profile
    queue_order: QueueOrder
    placement: PlacementPlugin
    preemptions: tuple[PreemptionPlugin, ...]


_RESOLVED: dict[str, Resolved] = {}  # profile name -> its plugins (every cycle asks)


def resolve(profile: str) -> Resolved:
    """The plugins of a profile by name; an unknown name raises with suggestions."""
    p = PROFILES.get(profile)
    found = _RESOLVED.get(profile)
    if found is not None and found.profile is p:
        return found
    if p is None:
        raise UnknownNameError("scheduling profile", profile, PROFILES)
    found = _RESOLVED[profile] = Resolved(
        p,
        QUEUE_ORDERS[p.queue_order],
        PLACEMENTS[p.placement],
        tuple(PREEMPTIONS[n] for n in p.preemption),
    )
    return found
