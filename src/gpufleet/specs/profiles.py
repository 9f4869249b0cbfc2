"""The scheduling profiles users name (`--profile`, `profile:` in specs): which plugin runs at
each extension point, by registry name, and the queue rule.

Profiles are vocabulary, not code: specs check names against this table, exports read it
(Kueue, Volcano, KAI and Slurm settings follow the profile), and `sched.registry` resolves
each to its plugins. It lives below `sched` so that a spec can say "unknown scheduling
profile" without importing the scheduler (design 0015, layers).

Besides gpufleet's own profiles, baselines model the schedulers a cluster would otherwise
run, for the simulator to compare against (design 0009, "Baseline profiles"): `k8s-default`
(kube-scheduler with the NVIDIA device plugin), `kueue-like` (Kueue ClusterQueues in a
cohort), `slurm-like` (Slurm multifactor priority with EASY backfill), `fgd-paper` (FGD as
published) and `tiresias`. Each one's comment says what it models and where the model is
coarser.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

HeadOfLine = Literal["best-effort", "strict", "backfill"]


@dataclass(frozen=True, slots=True)
class Profile:
    """Which plugin runs at each extension point, by registry name, and the queue rule.

    `preemption` lists preemption plugins tried in order (empty: never evict).
    `head_of_line`: `best-effort` — a job that does not fit never blocks later ones
    (Kueue BestEffortFIFO); `strict` — the first job that does not fit blocks every
    later job (a job waiting on its own team's quota blocks only its team; Kueue
    StrictFIFO, Slurm without backfill); `backfill` — the first blocked whole-GPU
    job gets a reservation and later jobs may only start where they do not delay
    it (EASY backfill, `sched.backfill`). `guaranteed_first`: jobs that fit within
    their team's guarantee are looked at before jobs that would borrow (as Kueue
    does), so a borrower never takes in this cycle what a team is owed.

    `gang`: all workers of a job are placed together or not at all (the default,
    and what every profile of `decide()` does). False models a scheduler that
    binds pods one by one (kube-scheduler without a gang plugin): a multi-worker
    job's pods are placed as capacity frees up, and the placed ones hold their
    GPUs while the rest wait. `decide()` always places whole gangs; a simulator
    reads this flag and submits such a job as one single-worker job per pod.

    `whole_gpus_only`: every request is for whole GPUs — a MIG slice or a GPU
    fraction (asked for, or sized from an inference workload) is rounded up to
    one whole GPU. This is the NVIDIA device plugin's `nvidia.com/gpu` resource
    without MIG or time-slicing, where the integer resource is the only way to
    ask for a GPU. Off by default (slices and fractions as requested).
    """

    queue_order: str
    placement: str
    preemption: tuple[str, ...] = ("quota-reclaim", "priority")
    head_of_line: HeadOfLine = "backfill"
    guaranteed_first: bool = True
    description: str = ""
    gang: bool = True
    whole_gpus_only: bool = False


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
        preemption=("quota-reclaim", "las"),
        head_of_line="best-effort",
        guaranteed_first=False,
        description="Tiresias preemptive 2D-LAS: least attained GPU-seconds first in "
        "discretised queues, a waiting job evicts jobs of higher queues, starvation "
        "promotion; best effort",
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
    # nothing (run it with open quotas: none binds); PriorityClass
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
