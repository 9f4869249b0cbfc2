"""Errors of the cluster state: illegal moves raise, they are never silently clamped.

A double booking or a release of something a job does not hold is always a bug
somewhere upstream (a policy, a driver, or a hand-written JOBS.yaml placement);
failing loudly at the move keeps the state trustworthy for every later decision.
Names the user typed (a node, a level, a slice id) raise `UnknownNameError`
instead, which the CLI turns into a message with suggestions.
"""

from __future__ import annotations

from gpufleet.errors import GpufleetError


class ClusterError(GpufleetError):
    """Base of errors about a cluster description or its allocation state."""


class InvalidClusterError(ClusterError):
    """A `Cluster` built from parts that do not fit (duplicate names, wrong path depth)."""


class AllocationError(ClusterError):
    """An illegal allocate or release: double booking, overflow, or not held by the job."""


class BranchError(ClusterError):
    """A branch used out of order: mutating an outer branch, committing a what-if, reuse."""


class StaleViewError(ClusterError):
    """A snapshot or query iterator read after the state it views has changed."""
