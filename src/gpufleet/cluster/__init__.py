"""Cluster state: what exists (`Cluster`) and who holds what (`State`), with cheap what-ifs.

`Cluster` is the frozen description (nodes, topology tree, scale-up domains,
MIG layouts); `State` is the one mutable object, indexed so the scheduler's
questions cost O(answer); `Snapshot` is the read-only view a policy receives,
and `Branch` the undo-logged what-if. Design: docs/design/0008-cluster-state.md.
"""

from gpufleet.cluster.claims import (
    MILLI,
    Claim,
    Holdings,
    MigSlice,
    Share,
    Usage,
    Whole,
    to_milli,
)
from gpufleet.cluster.errors import (
    AllocationError,
    BranchError,
    ClusterError,
    InvalidClusterError,
    StaleViewError,
)
from gpufleet.cluster.state import Branch, Snapshot, State, StateView
from gpufleet.cluster.topology import (
    Capacity,
    Cluster,
    Node,
    SliceInfo,
    expand_group,
    scaleup_domains,
    slice_id,
)

__all__ = [
    "MILLI",
    "AllocationError",
    "Branch",
    "BranchError",
    "Capacity",
    "Claim",
    "Cluster",
    "ClusterError",
    "Holdings",
    "InvalidClusterError",
    "MigSlice",
    "Node",
    "Share",
    "SliceInfo",
    "Snapshot",
    "StaleViewError",
    "State",
    "StateView",
    "Usage",
    "Whole",
    "expand_group",
    "scaleup_domains",
    "slice_id",
    "to_milli",
]
