"""Allocation state: who holds which GPUs, MIG slices and GPU fractions, with indexes and undo.

The scheduler asks the same few questions thousands of times per cycle ("which
nodes have >= k free H100s?", "how many are free in leaf b1/l2?"), so the
answers are kept as indexes; no query scans the cluster. Node indexes move at
every allocate and release; topology groups catch up with the moved nodes
when a group is next read (a simulator moves GPUs far more often than it asks
about groups). Whole GPUs are bitmasks per node, so moving k GPUs of a node
costs the same as moving one.

What-ifs (preemption search, backfill checks, a whole `decide()` cycle) must
never leave a trace, so every change is recorded in the innermost open
branch's undo log and a branch rolls back unless it is committed. That costs
O(changes), never a copy of the cluster. A `Snapshot` is a read-only view that
refuses to answer once the state has moved on, instead of silently showing a
mix of old and new.

Quantities are exact integers: whole GPUs and slices are counts, and a GPU
fraction is held in thousandths of a GPU ("milli", 1000 = the whole GPU), so
sums never drift and eighths (125) and quarters (250) are exact.

Why one file (about 1,300 lines): `State`, its read API `StateView`, `Branch` and `Snapshot`
share the indexes and the undo log. A view reads the private indexes directly (the scheduler
asks thousands of questions a cycle), and a branch writes through the same private moves
that record its undo entries. Split over modules, those privates would become a surface
other code could change around the undo log. What a job holds (claims, holdings, usage) is
in `cluster.claims`, the cluster's shape in `cluster.topology`.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType, TracebackType
from typing import Any, NoReturn, TypeVar

from gpufleet.cluster.claims import MILLI, Claim, Holdings, MigSlice, Share, Usage, Whole
from gpufleet.cluster.errors import AllocationError, BranchError, StaleViewError
from gpufleet.cluster.index import BucketIndex, SortedIds
from gpufleet.cluster.topology import Cluster
from gpufleet.errors import UnknownNameError

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

# Free epochs come from one counter shared by every State, so an epoch names one state
# and one stretch of its history: equal epochs mean the same state, nothing freed since.
_FREE_EPOCHS = itertools.count(1)


class _Parts:
    """A job's MIG slices and GPU shares, and their counts per profile and accelerator."""

    __slots__ = ("n_milli", "n_slice_milli", "n_slices", "shares", "slices")

    def __init__(self) -> None:
        self.slices: set[int] = set()
        self.shares: dict[int, int] = {}  # GPU -> thousandths held as a share
        self.n_slices: dict[tuple[str, str], int] = {}
        self.n_slice_milli: dict[str, int] = {}  # accelerator -> the slices' exact weight
        self.n_milli: dict[str, int] = {}

    def empty(self) -> bool:
        return not (self.slices or self.shares)


_NO_PARTS = _Parts()  # what a job holding whole GPUs alone reads (never written: see `parts`)


class _Held:
    """One job's holdings and running totals (totals make `usage_by` O(jobs)).

    Whole GPUs are kept per node as a bitmask of GPU indices (`nodes`): a move of a
    node's GPUs is a few integer operations whatever their number, and a release needs
    no grouping by node. Slices and shares live apart (`parts`), made when a job first
    takes one: most jobs hold whole GPUs alone, and a simulator makes one per job.
    """

    __slots__ = ("_parts", "n_gpus", "nodes")

    def __init__(self) -> None:
        self.nodes: dict[int, int] = {}  # node -> bitmask of the whole GPUs held there
        self.n_gpus: dict[str, int] = {}
        self._parts: _Parts | None = None

    @property
    def parts(self) -> _Parts:
        """Slices and shares, to read (empty for a job that holds none)."""
        return _NO_PARTS if self._parts is None else self._parts

    def own_parts(self) -> _Parts:
        """Slices and shares, to change."""
        if self._parts is None:
            self._parts = _Parts()
        return self._parts

    def empty(self) -> bool:
        return not self.nodes and (self._parts is None or self._parts.empty())


def _bump(counter: dict[Any, int], key: Any, delta: int) -> None:
    value = counter.get(key, 0) + delta
    if value:
        counter[key] = value
    else:
        del counter[key]  # zero entries removed: equal states have equal dicts


def _room(hist: list[int], per: int) -> int:
    """Workers of `per` GPUs that fit on nodes counted by free GPUs (`hist[v]` nodes have v)."""
    if per < 1:
        raise ValueError(f"a worker needs at least one GPU, got {per}")
    return sum(hist[v] * (v // per) for v in range(per, len(hist)))


_MASK_IDS: dict[int, tuple[int, ...]] = {}  # bitmask -> its set bits: a memo of a pure function
_MASK_MEMO_BELOW = 1 << 16  # nodes of up to 16 GPUs: at most 65,536 small tuples


def _mask_ids(mask: int) -> tuple[int, ...]:
    """The set bits of a free-GPU bitmask, ascending."""
    ids = _MASK_IDS.get(mask)
    if ids is None:
        ids = tuple(g for g in range(mask.bit_length()) if mask >> g & 1)
        if mask < _MASK_MEMO_BELOW:
            _MASK_IDS[mask] = ids
    return ids


_INT = frozenset({int})
_BITS: dict[tuple[int, ...], int] = {}  # GPU indices -> bitmask: a memo of a pure function
_BITS_MEMO_MAX = 1 << 12  # distinct index tuples kept (nodes of 8 GPUs have 255 sorted ones)


def _gpu_bits(gpus: tuple[int, ...], size: int) -> int:
    """The bitmask of GPU indices (all ints) of a node of `size` GPUs: -1 if one repeats
    or is out of range, 0 if there are none."""
    bits = _BITS.get(gpus)
    if bits is None:
        bits = 0
        for g in gpus:
            if not 0 <= g < size:
                return -1  # not memoised: the same indices may fit a larger node
            if bits >> g & 1:
                bits = -1
                break
            bits |= 1 << g
        if len(_BITS) < _BITS_MEMO_MAX:
            _BITS[gpus] = bits
    return bits if bits < 0 or not bits >> size else -1


def _guarded(state: State, version: int, items: Iterator[T]) -> Iterator[T]:
    """Yield from a live index, but fail loudly if the state changes mid-iteration."""
    for item in items:
        if state._version != version:
            raise StaleViewError(
                "the cluster state changed while a query result was being read; "
                "materialise it first (list(...)) if you allocate while iterating"
            )
        yield item


# undo-log record kinds: (kind, job, a, b)
_TAKE_WHOLE, _GIVE_WHOLE, _TAKE_SLICE, _GIVE_SLICE, _ADD_SHARE, _SUB_SHARE = range(6)
_Record = tuple[int, str, Any, Any]


class StateView(ABC):
    """The read-only questions; `State`, `Snapshot` and `Branch` all answer them.

    Subclasses only say which `State` to read and when reading is allowed
    (`_core`), so the queries exist once.
    """

    __slots__ = ()

    @abstractmethod
    def _core(self) -> State:
        """The state to read, after checking that reading is allowed now."""

    @property
    def cluster(self) -> Cluster:
        return self._core()._cluster

    @property
    def version(self) -> int:
        """Changes at every mutation; restored when a branch rolls back."""
        return self._core()._version

    @property
    def free_epoch(self) -> int:
        """Changes whenever a whole GPU becomes free; never while GPUs are only taken.

        Also when one becomes free by rolling back an allocation, and never
        restored. Fitting a whole-GPU request is monotone in the free GPUs, so a
        "does not fit" found at one epoch holds for as long as the epoch stays the
        same. Unique across all states: an epoch never names two states.
        """
        return self._core()._free_epoch

    # -- whole GPUs ---------------------------------------------------------------------

    def free_gpus(self, node: str) -> int:
        """Free whole GPUs on a node (not MIG-partitioned, not held, no fraction in use)."""
        s = self._core()
        return s._node_free[s._cluster.node_index(node)]

    def free_gpus_of(self, nodes: Sequence[str]) -> list[int]:
        """`free_gpus` of each node, in order: one call for a group's members."""
        s = self._core()
        free = s._node_free
        by_name = s._cluster.tables.node_by_name
        try:
            return [free[by_name[name]] for name in nodes]
        except KeyError:
            for name in nodes:
                s._cluster.node_index(name)  # raises UnknownNameError with suggestions
            raise

    def free_gpu_ids(self, node: str) -> tuple[int, ...]:
        s = self._core()
        return _mask_ids(s._node_mask[s._cluster.node_index(node)])

    def free_total(self, accelerator: str) -> int:
        """Free whole GPUs of one accelerator in the cluster: O(distinct free counts), read
        off the node index's bucket sizes (nothing to keep in step at every move)."""
        index = self._core()._node_index.get(accelerator)
        return 0 if index is None else index.total()

    def most_free_gpus(self) -> int:
        """The most free whole GPUs on any one node, of any accelerator: O(accelerators).
        No worker asking for more whole GPUs than this fits anywhere (a lean cycle's stop
        rule, `sched.lean`)."""
        return max((index.max_value() for index in self._core()._node_index.values()), default=0)

    def nodes_with_free(self, accelerator: str, at_least: int = 1) -> Iterator[str]:
        """Nodes of `accelerator` with >= `at_least` free whole GPUs, tightest first.

        O(answer): the index jumps to the qualifying buckets. Ties go by node
        order, so a best-fit caller taking the first answer is deterministic.
        """
        s = self._core()
        index = s._node_index.get(accelerator)
        if index is None:
            return iter(())
        nodes = s._cluster.nodes
        return _guarded(s, s._version, (nodes[n].name for n in index.at_least(at_least)))

    def tightest_with_free(self, accelerator: str, at_least: int = 1) -> str | None:
        """The first node `nodes_with_free` would yield (None if none): the best fit,
        O(log distinct free counts), without an iterator."""
        s = self._core()
        index = s._node_index.get(accelerator)
        n = None if index is None else index.first_at_least(at_least)
        return None if n is None else s._cluster.nodes[n].name

    def count_nodes_with_free(self, accelerator: str, at_least: int = 1) -> int:
        s = self._core()
        index = s._node_index.get(accelerator)
        return 0 if index is None else index.count_at_least(at_least)

    def free_on_nodes_with(self, accelerator: str, at_least: int) -> int:
        """Free whole GPUs on the nodes that have >= `at_least` free: the sum of
        `free_gpus` over `nodes_with_free`, read off the index's bucket sizes in
        O(distinct free counts)."""
        index = self._core()._node_index.get(accelerator)
        if index is None:
            return 0
        return sum(value * count for value, count in index.sizes_at_least(at_least))

    def worker_room(self, accelerator: str, per: int) -> int:
        """Workers of `per` whole GPUs that fit on single nodes: the sum of free // `per`.

        O(distinct free counts), read off the node index's bucket sizes, so a
        scheduler can tell that a gang cannot fit anywhere without visiting nodes.
        """
        if per < 1:
            raise ValueError(f"a worker needs at least one GPU, got {per}")
        s = self._core()
        index = s._node_index.get(accelerator)
        return 0 if index is None else index.room(per)

    def worker_rooms_after(self, jobs: Sequence[str], accelerator: str, per: int) -> Iterator[int]:
        """For each prefix of `jobs`, the empty one first, an upper bound on `worker_room`
        once that prefix has released everything: each whole GPU a released job holds on a
        node of `accelerator` is counted freed there, and so is each GPU it shares (others
        may still share it). From the first job holding MIG slices on, no bound is known
        and the count of nodes' GPUs is given instead (every worker that could ever fit).

        Backfill's reservation search starts where this first reaches the workers a gang
        needs: no placement fits before, and it costs a what-if per prefix tried."""
        if per < 1:
            raise ValueError(f"a worker needs at least one GPU, got {per}")
        s = self._core()
        index = s._node_index.get(accelerator)
        if index is None:
            yield from (0 for _ in range(len(jobs) + 1))
            return
        room = index.room(per)
        yield room
        node_acc, node_free, gpu_node = s._node_acc, s._node_free, s._cluster.tables.gpu_node
        extra: dict[int, int] = {}
        for i, name in enumerate(jobs):
            held = s._jobs.get(name)
            if held is not None and held.parts.slices:
                ceiling = sum(
                    size // per for n, size in enumerate(s._node_size) if node_acc[n] == accelerator
                )
                yield from (ceiling for _ in range(len(jobs) - i))
                return
            if held is not None:
                freed = [(n, mask.bit_count()) for n, mask in held.nodes.items()]
                freed += [(gpu_node[g], 1) for g in held.parts.shares]
                for n, k in freed:
                    if node_acc[n] != accelerator:
                        continue
                    before = node_free[n] + extra.get(n, 0)
                    extra[n] = extra.get(n, 0) + k
                    room += (before + k) // per - before // per
            yield room

    # -- topology groups and scale-up domains ------------------------------------------

    def free_in_group(self, level: str, name: str, accelerator: str) -> int:
        """Free whole GPUs of `accelerator` in one group ("b1", "b1/l2", or a node): O(1)."""
        s = self._core()
        cluster = s._cluster
        i = cluster.level_index(level)
        if i == len(cluster.levels) - 1:
            n = cluster.node_index(name)
            return s._node_free[n] if cluster.nodes[n].accelerator == accelerator else 0
        t = cluster.tables
        gid = t.group_by_name[i].get(name)
        if gid is None:
            raise UnknownNameError(f"{level} group", name, t.group_by_name[i])
        agg = t.agg_ids.get((i, gid, accelerator))
        if agg is None:
            return 0
        s._sync_level(i)
        return s._agg_free[agg]

    def worker_room_in_group(self, level: str, name: str, accelerator: str, per: int) -> int:
        """Workers of `per` whole GPUs of `accelerator` that fit on single nodes of one group.

        O(GPUs per node): each group keeps how many of its nodes have each free count.
        """
        s = self._core()
        cluster = s._cluster
        i = cluster.level_index(level)
        if i == len(cluster.levels) - 1:
            if per < 1:
                raise ValueError(f"a worker needs at least one GPU, got {per}")
            return self.free_in_group(level, name, accelerator) // per
        t = cluster.tables
        gid = t.group_by_name[i].get(name)
        if gid is None:
            raise UnknownNameError(f"{level} group", name, t.group_by_name[i])
        agg = t.agg_ids.get((i, gid, accelerator))
        if agg is None:
            return _room([], per)
        s._sync_level(i)
        return _room(s._agg_hist[agg], per)

    def most_free_in_group(self, level: str, accelerator: str) -> int:
        """The most free whole GPUs of `accelerator` in one group at `level` (0 if none): O(1)."""
        s = self._core()
        cluster = s._cluster
        i = cluster.level_index(level)
        if i == len(cluster.levels) - 1:
            index = s._node_index.get(accelerator)
        else:
            s._sync_level(i)
            index = s._agg_index.get((i, accelerator))
        return 0 if index is None else index.max_value()

    def groups_with_free(self, level: str, accelerator: str, at_least: int = 1) -> Iterator[str]:
        """Groups at `level` with >= `at_least` free whole GPUs of `accelerator`, tightest first."""
        s = self._core()
        cluster = s._cluster
        i = cluster.level_index(level)
        if i == len(cluster.levels) - 1:
            return self.nodes_with_free(accelerator, at_least)
        s._sync_level(i)
        index = s._agg_index.get((i, accelerator))
        if index is None:
            return iter(())
        t = cluster.tables
        names = t.group_names[i]
        return _guarded(s, s._version, (names[g] for g in index.at_least(at_least)))

    def free_in_domain(self, domain: str) -> int:
        s = self._core()
        t = s._cluster.tables
        d = t.domain_by_name.get(domain)
        if d is None:
            raise UnknownNameError("scale-up domain", domain, t.domain_by_name)
        n = t.domain_alias[d]
        return s._dom_free[d] if n < 0 else s._node_free[n]

    def worker_room_in_domain(self, domain: str, per: int) -> int:
        """Workers of `per` whole GPUs that fit on single nodes of one scale-up domain's nodes.

        A node counts with all its free GPUs, as a placement on the domain's
        nodes would use them. O(GPUs per node).
        """
        s = self._core()
        t = s._cluster.tables
        d = t.domain_by_name.get(domain)
        if d is None:
            raise UnknownNameError("scale-up domain", domain, t.domain_by_name)
        n = t.domain_alias[d]
        if n < 0:
            return _room(s._dom_hist[d], per)
        if per < 1:
            raise ValueError(f"a worker needs at least one GPU, got {per}")
        return s._node_free[n] // per

    def domains_with_free(self, accelerator: str, at_least: int = 1) -> Iterator[str]:
        """Scale-up domains with >= `at_least` free whole GPUs, tightest first."""
        s = self._core()
        t = s._cluster.tables
        names = t.domain_names
        if accelerator in t.node_aligned:  # each domain is one node: read the node index
            nodes = s._node_index[accelerator].at_least(at_least)
            of = t.node_domain
            return _guarded(s, s._version, (names[of[n]] for n in nodes))
        index = s._dom_index.get(accelerator)
        if index is None:
            return iter(())
        return _guarded(s, s._version, (names[d] for d in index.at_least(at_least)))

    # -- MIG slices ---------------------------------------------------------------------

    def free_slices(self, accelerator: str, profile: str) -> Iterator[str]:
        """Free MIG slices of one profile, in cluster order: O(answer)."""
        s = self._core()
        ids = s._slice_free.get((accelerator, profile))
        if ids is None:
            return iter(())
        return _guarded(s, s._version, (s._cluster.slice_name(sid) for sid in ids))

    def has_slices(self, accelerator: str, profile: str) -> bool:
        """Whether any GPU of the cluster is cut into `profile` slices (held or free): O(1)."""
        return (accelerator, profile) in self._core()._slice_free

    def count_free_slices(self, accelerator: str, profile: str) -> int:
        ids = self._core()._slice_free.get((accelerator, profile))
        return 0 if ids is None else len(ids)

    def free_slices_on(self, node: str) -> tuple[str, ...]:
        s = self._core()
        t = s._cluster.tables
        n = s._cluster.node_index(node)
        first, last = t.gpu_slice_start[t.gpu_base[n]], t.gpu_slice_start[t.gpu_base[n + 1]]
        holder = s._slice_holder
        return tuple(s._cluster.slice_name(i) for i in range(first, last) if holder[i] is None)

    # -- fractions ----------------------------------------------------------------------

    def free_milli(self, node: str, gpu: int) -> int:
        """Thousandths of a GPU still open to shares; 0 where fractions are not allowed."""
        s = self._core()
        g = s._cluster.gpu_id(node, gpu)
        return s._frac_free(g) if s._gpu_frac[g] else 0

    def gpus_with_free_milli(self, accelerator: str, at_least: int) -> Iterator[tuple[str, int]]:
        """(node, gpu) open to a share of >= `at_least` thousandths, fullest GPU first."""
        s = self._core()
        index = s._frac_index.get(accelerator)
        if index is None:
            return iter(())
        ref = s._cluster.gpu_ref
        return _guarded(s, s._version, (ref(g) for g in index.at_least(at_least)))

    def takes_fractions(self, accelerator: str) -> bool:
        """Whether any `accelerator` GPU may be shared by fractions at all (held or free)."""
        return accelerator in self._core()._frac_index

    def partly_shared(self, accelerator: str) -> Iterator[tuple[str, int, int]]:
        """(node, gpu, free thousandths) of GPUs partly taken by shares, fullest first:
        O(answer), read straight from the share index (FGD scores nodes by them)."""
        s = self._core()
        index = s._frac_index.get(accelerator)
        if index is None:
            return iter(())
        ref = s._cluster.gpu_ref
        return _guarded(
            s, s._version, ((*ref(g), free) for g, free in index.items_between(1, MILLI))
        )

    # -- jobs ---------------------------------------------------------------------------

    def jobs(self) -> tuple[str, ...]:
        return tuple(sorted(self._core()._jobs))

    def holds(self, job: str) -> bool:
        """Whether `job` holds anything: O(1)."""
        return job in self._core()._jobs

    def holdings(self, job: str) -> Holdings:
        """What `job` holds, O(its holdings); empty for a job that holds nothing."""
        s = self._core()
        held = s._jobs.get(job)
        if held is None:
            return Holdings(job)
        c = s._cluster
        nodes = c.nodes
        return Holdings(
            job,
            tuple(
                (nodes[n].name, g)
                for n, mask in sorted(held.nodes.items())
                for g in _mask_ids(mask)
            ),
            tuple(c.slice_name(i) for i in sorted(held.parts.slices)),
            tuple((*c.gpu_ref(g), m) for g, m in sorted(held.parts.shares.items())),
        )

    def jobs_on(self, node: str) -> tuple[str, ...]:
        """Jobs holding anything on a node (candidates when preempting there)."""
        s = self._core()
        t = s._cluster.tables
        n = s._cluster.node_index(node)
        found: set[str] = set(s._held_on[n])
        for g in range(t.gpu_base[n], t.gpu_base[n + 1]):
            shares = s._shares[g]
            if shares:
                found.update(shares)
        for i in range(t.gpu_slice_start[t.gpu_base[n]], t.gpu_slice_start[t.gpu_base[n + 1]]):
            holder = s._slice_holder[i]
            if holder is not None:
                found.add(holder)
        return tuple(sorted(found))

    def usage(self, job: str) -> Usage:
        held = self._core()._jobs.get(job)
        if held is None:
            empty: Mapping[Any, int] = MappingProxyType({})
            return Usage(empty, empty, empty, empty)
        return Usage(
            MappingProxyType(dict(held.n_gpus)),
            MappingProxyType(dict(held.parts.n_slices)),
            MappingProxyType(dict(held.parts.n_milli)),
            MappingProxyType(dict(held.parts.n_slice_milli)),
        )

    def usage_by(self, key: Callable[[str], K]) -> dict[K, Usage]:
        """Usage summed over jobs grouped by `key(job)` (team, project, user): O(jobs)."""
        sums: dict[
            K, tuple[dict[str, int], dict[tuple[str, str], int], dict[str, int], dict[str, int]]
        ] = {}
        s = self._core()
        for job in sorted(s._jobs):
            held = s._jobs[job]
            gpus, slices, milli, slice_milli = sums.setdefault(key(job), ({}, {}, {}, {}))
            for acc, n in held.n_gpus.items():
                gpus[acc] = gpus.get(acc, 0) + n
            parts = held.parts
            for ap, n in parts.n_slices.items():
                slices[ap] = slices.get(ap, 0) + n
            for acc, n in parts.n_slice_milli.items():
                slice_milli[acc] = slice_milli.get(acc, 0) + n
            for acc, n in parts.n_milli.items():
                milli[acc] = milli.get(acc, 0) + n
        return {
            k: Usage(
                MappingProxyType(g),
                MappingProxyType(sl),
                MappingProxyType(m),
                MappingProxyType(sm),
            )
            for k, (g, sl, m, sm) in sums.items()
        }

    def dump(self) -> dict[str, dict[str, list[Any]]]:
        """Canonical, JSON-ready holdings of every job: equal states dump equal."""
        out: dict[str, dict[str, list[Any]]] = {}
        for job in self.jobs():
            h = self.holdings(job)
            out[job] = {
                "gpus": [list(x) for x in h.gpus],
                "slices": list(h.slices),
                "shares": [list(x) for x in h.shares],
            }
        return out


class State(StateView):
    """The mutable allocation state of one cluster; the single owner of every index.

    Mutate it directly (`allocate`, `release`) for real events, or through a
    `branch()` for anything tentative. While a branch is open the state itself
    refuses mutations, so nothing can slip past a branch's undo log.
    """

    __slots__ = (
        "_agg_free",
        "_agg_hist",
        "_agg_idx_of",
        "_agg_index",
        "_branches",
        "_clock",
        "_cluster",
        "_dom_free",
        "_dom_hist",
        "_dom_idx_of",
        "_dom_index",
        "_frac_index",
        "_free_epoch",
        "_gpu_frac",
        "_group_dirty",
        "_group_filed",
        "_group_syncs",
        "_held_on",
        "_jobs",
        "_node_acc",
        "_node_doms",
        "_node_frac",
        "_node_free",
        "_node_idx_of",
        "_node_index",
        "_node_mask",
        "_node_size",
        "_shares",
        "_slice_free",
        "_slice_holder",
        "_slice_set_of",
        "_used",
        "_version",
        "_whole_mask",
    )

    def __init__(self, cluster: Cluster) -> None:
        t = cluster.tables
        nodes = cluster.nodes
        self._cluster = cluster
        n_gpus = len(t.gpu_node)
        # whole GPUs per node: each holder's bitmask, and their union (the GPUs held whole)
        self._held_on: list[dict[str, int]] = [{} for _ in nodes]
        self._whole_mask: list[int] = [0] * len(nodes)
        self._node_frac: list[bool] = [node.fractions for node in nodes]
        self._used: list[int] = [0] * n_gpus  # thousandths held as shares
        self._shares: list[dict[str, int] | None] = [None] * n_gpus
        self._slice_holder: list[str | None] = [None] * len(t.slice_gpu)
        self._gpu_frac: list[bool] = [
            nodes[t.gpu_node[g]].fractions and not t.gpu_mig[g] for g in range(n_gpus)
        ]
        self._jobs: dict[str, _Held] = {}
        self._branches: list[Branch] = []
        self._clock = itertools.count(1)
        self._version = 0
        self._free_epoch = next(_FREE_EPOCHS)

        # whole-GPU free counts: per node (count + bitmask), per group aggregate, per domain
        self._node_free: list[int] = []
        self._node_mask: list[int] = []
        for n, node in enumerate(nodes):
            mask = 0
            for g in range(node.gpus):
                if not t.gpu_mig[t.gpu_base[n] + g]:
                    mask |= 1 << g
            self._node_mask.append(mask)
            self._node_free.append(mask.bit_count())
        self._node_acc: list[str] = t.node_acc
        self._node_size: list[int] = [node.gpus for node in nodes]
        self._agg_free: list[int] = [0] * len(t.agg_level)
        for n in range(len(nodes)):
            for a in t.node_aggs[n]:
                self._agg_free[a] += self._node_free[n]
        self._dom_free: list[int] = [sum(not t.gpu_mig[g] for g in gpus) for gpus in t.domain_gpus]
        self._agg_hist, self._dom_hist = self._histograms()

        by_acc: dict[str, list[tuple[int, int]]] = {}
        for n, node in enumerate(nodes):
            by_acc.setdefault(node.accelerator, []).append((n, self._node_free[n]))
        self._node_index = {acc: BucketIndex(items) for acc, items in by_acc.items()}
        self._node_idx_of = [self._node_index[node.accelerator] for node in nodes]

        self._group_and_domain_indexes()

        by_frac: dict[str, list[tuple[int, int]]] = {}
        for g in range(n_gpus):
            if self._gpu_frac[g]:
                by_frac.setdefault(t.node_acc[t.gpu_node[g]], []).append((g, MILLI))
        self._frac_index = {acc: BucketIndex(items) for acc, items in by_frac.items()}

        by_profile: dict[tuple[str, str], list[int]] = {}
        for i, g in enumerate(t.slice_gpu):
            by_profile.setdefault((t.node_acc[t.gpu_node[g]], t.slice_profile[i]), []).append(i)
        self._slice_free = {key: SortedIds(ids) for key, ids in by_profile.items()}
        self._slice_set_of = [
            self._slice_free[(t.node_acc[t.gpu_node[g]], t.slice_profile[i])]
            for i, g in enumerate(t.slice_gpu)
        ]

    def _group_and_domain_indexes(self) -> None:
        """The indexes over topology groups and scale-up domains (part of `__init__`)."""
        t = self._cluster.tables
        # group indexes hold group ids (not aggregate ids) so ties list groups in tree order
        by_level: dict[tuple[int, str], list[tuple[int, int]]] = {}
        for a, free in enumerate(self._agg_free):
            by_level.setdefault((t.agg_level[a], t.agg_acc[a]), []).append((t.agg_group[a], free))
        self._agg_index = {key: BucketIndex(items) for key, items in by_level.items()}
        self._agg_idx_of = [
            self._agg_index[(t.agg_level[a], t.agg_acc[a])] for a in range(len(t.agg_level))
        ]
        # Group counters, histograms and indexes are brought up to date when read, not at
        # every move: a move only notes its node as dirty at each level, and `_sync_level`
        # applies the change of each dirty node since it was last applied at that level (a
        # move undone before the next read costs nothing, two moves on one node cost one,
        # and a level nobody reads, often all but the lowest, is left alone).
        depth = len(self._cluster.levels) - 1
        # per level: node free counts applied, nodes moved since
        self._group_filed: list[list[int]] = [list(self._node_free) for _ in range(depth)]
        self._group_dirty: list[set[int]] = [set() for _ in range(depth)]
        self._group_syncs = 0  # bumped by each sync that changed something (see rollback)

        # Node-aligned domains (each one node's GPUs) are answered from the node counters;
        # only the others keep counters and an index of their own.
        by_dom: dict[str, list[tuple[int, int]]] = {}
        for d, free in enumerate(self._dom_free):
            if t.domain_alias[d] < 0:
                by_dom.setdefault(t.domain_acc[d], []).append((d, free))
        self._dom_index = {acc: BucketIndex(items) for acc, items in by_dom.items()}
        self._dom_idx_of: list[BucketIndex | None] = [
            self._dom_index[acc] if t.domain_alias[d] < 0 else None
            for d, acc in enumerate(t.domain_acc)
        ]
        self._node_doms: list[tuple[int, ...]] = [
            () if t.node_domain[n] >= 0 else t.node_domains[n] for n in range(len(t.node_acc))
        ]

    def _histograms(self) -> tuple[list[list[int]], list[list[int]]]:
        """Per group aggregate and per domain: how many member nodes have each free count.

        So "how many workers of k GPUs fit on single nodes here" costs O(GPUs
        per node), not O(nodes in the group).
        """
        t = self._cluster.tables
        width = t.max_node_gpus + 1
        agg_hist = [[0] * width for _ in t.agg_level]
        dom_hist = [[0] * width for _ in t.domain_names]
        for n, free in enumerate(self._node_free):
            for a in t.node_aggs[n]:
                agg_hist[a][free] += 1
            for d in t.node_domains[n]:
                dom_hist[d][free] += 1
        return agg_hist, dom_hist

    def _core(self) -> State:
        return self

    def _sync_groups(self) -> None:
        """`_sync_level` for every level."""
        for i in range(len(self._group_dirty)):
            self._sync_level(i)

    def _sync_level(self, i: int) -> None:
        """Apply the moves of the nodes dirty at level `i` to its groups' counters,
        histograms and indexes (see `__init__`); each group's index moves once, however many
        of its nodes changed."""
        dirty = self._group_dirty[i]
        if not dirty:
            return
        t = self._cluster.tables
        node_aggs = t.node_aggs
        node_free = self._node_free
        filed = self._group_filed[i]
        agg_free = self._agg_free
        agg_hist = self._agg_hist
        before: dict[int, int] = {}  # aggregate -> its free count before this sync
        for n in dirty:
            new = node_free[n]
            old = filed[n]
            if old == new:
                continue
            filed[n] = new
            a = node_aggs[n][i]
            if a not in before:
                before[a] = agg_free[a]
            agg_free[a] += new - old
            hist = agg_hist[a]
            hist[old] -= 1
            hist[new] += 1
        dirty.clear()
        if not before:
            return
        index_of = self._agg_idx_of
        group = t.agg_group
        for a, old in before.items():
            index_of[a].move(group[a], old, agg_free[a])
        self._group_syncs += 1

    # -- public mutation ----------------------------------------------------------------

    def allocate(self, job: str, *claims: Claim) -> None:
        """Give `job` everything in `claims`, all or nothing (a gang never half-lands)."""
        self._writable(None)
        self._apply(job, claims, release=False)

    def release(self, job: str, *claims: Claim) -> None:
        """Take back exactly `claims` from `job`, all or nothing."""
        self._writable(None)
        self._apply(job, claims, release=True)

    def release_job(self, job: str) -> Holdings:
        """Take back everything `job` holds; returns what it held (for requeue or undo)."""
        self._writable(None)
        holdings = self.holdings(job)
        self._release_all(job)
        return holdings

    def release_all(self, job: str) -> None:
        """`release_job` without building the `Holdings` it returns: the simulator's
        commonest move (a job finishes) and what-ifs' (a victim is taken out)."""
        self._writable(None)
        self._release_all(job)

    def branch(self) -> Branch:
        """A what-if: `with state.branch() as b:` rolls back on exit unless `b.commit()`."""
        self._writable(None)
        return self._open_branch(committable=True)

    def snapshot(self) -> Snapshot:
        """A read-only view for `decide()`; O(1), and stale as soon as the state changes."""
        return Snapshot(self)

    # -- internals: mutation with validation and undo ----------------------------------

    def _writable(self, branch: Branch | None) -> None:
        top = self._branches[-1] if self._branches else None
        if top is branch:
            return
        if branch is None:
            raise BranchError(
                "a branch is open: mutate through the innermost branch, or close it first"
            )
        if branch._closed:
            raise BranchError("this branch is closed (committed or rolled back)")
        raise BranchError("this branch has an open nested branch; use the innermost one")

    def _open_branch(self, committable: bool) -> Branch:
        parent = self._branches[-1] if self._branches else None
        branch = Branch(self, parent, committable)
        self._branches.append(branch)
        return branch

    def _release_all(self, job: str) -> None:
        """Everything `job` holds, given back straight from its own sets: what it holds
        needs no validation, and a finishing job is the simulator's commonest move."""
        h = self._jobs.get(job)
        if h is None:
            return
        log: list[_Record] = []
        nodes = h.nodes
        for n, bits in sorted(nodes.items()):
            self._give_whole(job, n, bits)
            log.append((_GIVE_WHOLE, job, n, bits))
        parts = h.parts
        if parts.slices:
            for sid in sorted(parts.slices):
                self._give_slice(job, sid)
                log.append((_GIVE_SLICE, job, sid, None))
        if parts.shares:
            for g, m in sorted(parts.shares.items()):
                self._sub_share(job, g, m)
                log.append((_SUB_SHARE, job, g, m))
        if self._branches:
            self._branches[-1]._log.extend(log)
        self._version = next(self._clock)

    def _apply(self, job: str, claims: Iterable[Claim], release: bool) -> None:
        if not isinstance(job, str) or not job:
            raise AllocationError(f"a job id must be a non-empty string, got {job!r}")
        log: list[_Record] = []
        try:
            for claim in claims:
                if release:
                    self._release_one(job, claim, log)
                else:
                    self._allocate_one(job, claim, log)
        except BaseException:
            self._undo(log)
            raise
        if log:
            if self._branches:
                self._branches[-1]._log.extend(log)
            self._version = next(self._clock)

    def _gpus_of(self, claim: Whole) -> tuple[int, tuple[int, ...]]:
        c = self._cluster
        n = c.node_index(claim.node)
        t = c.tables
        size = t.gpu_base[n + 1] - t.gpu_base[n]
        if not claim.gpus:
            raise AllocationError(f"{claim.node}: a Whole claim needs at least one GPU index")
        for g in claim.gpus:
            if type(g) is not int or not 0 <= g < size:
                raise AllocationError(f"{claim.node} has GPUs 0..{size - 1}; got index {g!r}")
        if len(set(claim.gpus)) != len(claim.gpus):
            raise AllocationError(f"{claim.node}: GPU indices repeat in {claim.gpus}")
        base = t.gpu_base[n]
        return n, tuple(base + g for g in claim.gpus)

    def _share_of(self, claim: Share) -> int:
        if type(claim.milli) is not int or not 0 < claim.milli <= MILLI:
            raise AllocationError(
                f"a share is an integer in 1..{MILLI} thousandths of a GPU, got {claim.milli!r} "
                "(use to_milli(0.25) -> 250)"
            )
        return self._cluster.gpu_id(claim.node, claim.gpu)

    def _whole_bits(self, claim: Whole, job: str | None) -> tuple[int, int] | None:
        """(node, bitmask of its GPUs) of a legal whole-GPU move, or None for the slow path.

        `job` None: every GPU must be free (allocate); else held whole by `job`
        (release). One pass builds the mask (indices in range, none repeated), then one
        test against the node's free mask or the job's mask there; the slow path
        (`_gpus_of` and the per-GPU checks) only runs to word the error when this says no.
        """
        n = self._cluster.tables.node_by_name.get(claim.node)
        gpus = claim.gpus
        if n is None or not _INT.issuperset(map(type, gpus)):
            return None  # (exact type: a bool or a float index is refused)
        bits = _gpu_bits(gpus, self._node_size[n])
        if bits <= 0:
            return None  # none, repeated, or out of range
        have = self._node_mask[n] if job is None else self._held_on[n].get(job, 0)
        return (n, bits) if have & bits == bits else None

    def _holder_of(self, g: int) -> str | None:
        """The job holding GPU `g` whole (None: not held whole); for checks and messages."""
        n = self._cluster.tables.gpu_node[g]
        bit = 1 << self._cluster.tables.gpu_local[g]
        if not self._whole_mask[n] & bit:
            return None
        return next(job for job, mask in self._held_on[n].items() if mask & bit)

    def _allocate_one(self, job: str, claim: Claim, log: list[_Record]) -> None:
        if isinstance(claim, Whole):
            found = self._whole_bits(claim, None)
            if found is None:
                self._refuse_whole(job, claim, release=False)
            n, bits = found
            self._take_whole(job, n, bits)
            log.append((_TAKE_WHOLE, job, n, bits))
        elif isinstance(claim, MigSlice):
            sid = self._cluster.slice_index(claim.id)
            holder = self._slice_holder[sid]
            if holder is not None:
                raise AllocationError(f"cannot give {job} slice {claim.id}: held by {holder}")
            self._take_slice(job, sid)
            log.append((_TAKE_SLICE, job, sid, None))
        elif isinstance(claim, Share):
            g = self._share_of(claim)
            where = f"{claim.node}/gpu{claim.gpu}"
            if not self._gpu_frac[g]:
                why = (
                    "it is MIG-partitioned"
                    if self._cluster.tables.gpu_mig[g]
                    else f"node {claim.node} does not allow fractions"
                )
                raise AllocationError(f"cannot give {job} a share of {where}: {why}")
            whole = self._holder_of(g)
            if whole is not None:
                raise AllocationError(
                    f"cannot give {job} a share of {where}: held whole by {whole}"
                )
            if self._used[g] + claim.milli > MILLI:
                raise AllocationError(
                    f"cannot give {job} {claim.milli}/{MILLI} of {where}: "
                    f"{self._used[g]}/{MILLI} already shared"
                )
            self._add_share(job, g, claim.milli)
            log.append((_ADD_SHARE, job, g, claim.milli))
        else:
            raise AllocationError(f"not a claim: {claim!r} (use Whole, MigSlice or Share)")

    def _refuse_whole(self, job: str, claim: Whole, *, release: bool) -> NoReturn:
        """Say why `_whole_bits` refused a whole-GPU move: a bad or repeated index
        (`_gpus_of` raises), or the first GPU that is not free (allocate) or not held by
        `job` (release)."""
        _, gids = self._gpus_of(claim)
        for local, g in zip(claim.gpus, gids, strict=True):
            if release:
                holder = self._holder_of(g)
                if holder != job:
                    by = holder or "nobody"
                    raise AllocationError(
                        f"{job} does not hold {claim.node}/gpu{local} (held by {by})"
                    )
            else:
                problem = self._not_free_whole(g)
                if problem:
                    raise AllocationError(f"cannot give {job} {claim.node}/gpu{local}: {problem}")
        raise AssertionError(f"whole-GPU check disagrees on {claim}")  # pragma: no cover

    def _not_free_whole(self, g: int) -> str:
        if self._cluster.tables.gpu_mig[g]:
            return "it is MIG-partitioned (ask for one of its slices)"
        whole = self._holder_of(g)
        if whole is not None:
            return f"held by {whole}"
        if self._used[g]:
            return f"{self._used[g]}/{MILLI} of it is shared by fractions"
        return ""

    def _release_one(self, job: str, claim: Claim, log: list[_Record]) -> None:
        if isinstance(claim, Whole):
            found = self._whole_bits(claim, job)
            if found is None:
                self._refuse_whole(job, claim, release=True)
            n, bits = found
            self._give_whole(job, n, bits)
            log.append((_GIVE_WHOLE, job, n, bits))
        elif isinstance(claim, MigSlice):
            sid = self._cluster.slice_index(claim.id)
            if self._slice_holder[sid] != job:
                by = self._slice_holder[sid] or "nobody"
                raise AllocationError(f"{job} does not hold slice {claim.id} (held by {by})")
            self._give_slice(job, sid)
            log.append((_GIVE_SLICE, job, sid, None))
        elif isinstance(claim, Share):
            g = self._share_of(claim)
            shares = self._shares[g]
            held = shares.get(job, 0) if shares else 0
            if held < claim.milli:
                raise AllocationError(
                    f"{job} holds {held}/{MILLI} of {claim.node}/gpu{claim.gpu}, "
                    f"cannot release {claim.milli}"
                )
            self._sub_share(job, g, claim.milli)
            log.append((_SUB_SHARE, job, g, claim.milli))
        else:
            raise AllocationError(f"not a claim: {claim!r} (use Whole, MigSlice or Share)")

    def _undo(self, log: list[_Record]) -> None:
        """Apply the inverse of each record, newest first: O(len(log)), no validation."""
        for kind, job, a, b in reversed(log):
            if kind == _TAKE_WHOLE:
                self._give_whole(job, a, b)
            elif kind == _GIVE_WHOLE:
                self._take_whole(job, a, b)
            elif kind == _TAKE_SLICE:
                self._give_slice(job, a)
            elif kind == _GIVE_SLICE:
                self._take_slice(job, a)
            elif kind == _ADD_SHARE:
                self._sub_share(job, a, b)
            else:
                self._add_share(job, a, b)

    # -- internals: primitive moves that keep every index in step -----------------------

    def _held(self, job: str) -> _Held:
        held = self._jobs.get(job)
        if held is None:
            held = self._jobs[job] = _Held()
        return held

    def _forget_if_empty(self, job: str, held: _Held) -> None:
        if held.empty():
            del self._jobs[job]

    def _frac_free(self, g: int) -> int:
        t = self._cluster.tables
        if self._whole_mask[t.gpu_node[g]] >> t.gpu_local[g] & 1:
            return 0  # held whole
        return MILLI - self._used[g]

    def _whole_changed(self, n: int, bits: int, delta: int) -> None:
        """GPUs `bits` (a bitmask of indices) of node `n` became free (+1) or stopped being
        free (-1) as whole GPUs."""
        if delta > 0:
            self._free_epoch = next(_FREE_EPOCHS)
            mask = self._node_mask[n] | bits
        else:
            mask = self._node_mask[n] & ~bits
        self._node_mask[n] = mask
        before = self._node_free[n]
        after = self._node_free[n] = mask.bit_count()
        self._node_idx_of[n].move(n, before, after)
        for dirty in self._group_dirty:  # groups catch up when read (`_sync_level`)
            dirty.add(n)
        if self._node_doms[n]:
            self._domains_changed(n, bits, delta, before)

    def _domains_changed(self, n: int, bits: int, delta: int, before: int) -> None:
        """`_whole_changed` for the domains of a node that is not one domain by itself."""
        t = self._cluster.tables
        after = self._node_free[n]
        dom_hist = self._dom_hist
        for d in self._node_doms[n]:
            hist = dom_hist[d]
            hist[before] -= 1
            hist[after] += 1
        gpu_domain = t.gpu_domain
        base = t.gpu_base[n]
        per_domain: dict[int, int] = {}  # one index move per domain, not one per GPU
        for g in _mask_ids(bits):
            d = gpu_domain[base + g]
            per_domain[d] = per_domain.get(d, 0) + delta
        dom_free = self._dom_free
        dom_idx = self._dom_idx_of
        for d, change in per_domain.items():
            old = dom_free[d]
            dom_free[d] = old + change
            index = dom_idx[d]
            assert index is not None
            index.move(d, old, old + change)

    def _take_whole(self, job: str, n: int, bits: int) -> None:
        held_on = self._held_on[n]
        held_on[job] = held_on.get(job, 0) | bits
        self._whole_mask[n] |= bits
        acc = self._node_acc[n]
        if self._node_frac[n]:  # its GPUs that are not MIG take fractions: these close
            self._fractions_closed(n, bits, acc, True)
        self._whole_changed(n, bits, -1)
        held = self._jobs.get(job)
        if held is None:
            held = self._jobs[job] = _Held()
        nodes = held.nodes
        nodes[n] = nodes.get(n, 0) | bits
        counts = held.n_gpus
        counts[acc] = counts.get(acc, 0) + bits.bit_count()

    def _give_whole(self, job: str, n: int, bits: int) -> None:
        held_on = self._held_on[n]
        left = held_on[job] & ~bits
        if left:
            held_on[job] = left
        else:
            del held_on[job]
        self._whole_mask[n] &= ~bits
        acc = self._node_acc[n]
        if self._node_frac[n]:
            self._fractions_closed(n, bits, acc, False)
        self._whole_changed(n, bits, +1)
        held = self._jobs[job]
        nodes = held.nodes
        left = nodes[n] & ~bits
        if left:
            nodes[n] = left
        else:
            del nodes[n]
        _bump(held.n_gpus, acc, -bits.bit_count())
        if not nodes and held.empty():
            del self._jobs[job]

    def _fractions_closed(self, n: int, bits: int, acc: str, closed: bool) -> None:
        """GPUs `bits` of a fraction node were taken whole (closed to shares) or given back."""
        index = self._frac_index[acc]
        base = self._cluster.tables.gpu_base[n]
        for g in _mask_ids(bits):
            if closed:
                index.move(base + g, MILLI, 0)
            else:
                index.move(base + g, 0, MILLI)

    def _slice_key(self, sid: int) -> tuple[str, str]:
        t = self._cluster.tables
        return t.node_acc[t.gpu_node[t.slice_gpu[sid]]], t.slice_profile[sid]

    def _take_slice(self, job: str, sid: int) -> None:
        self._slice_holder[sid] = job
        self._slice_set_of[sid].remove(sid)
        parts = self._held(job).own_parts()
        parts.slices.add(sid)
        key = self._slice_key(sid)
        _bump(parts.n_slices, key, 1)
        _bump(parts.n_slice_milli, key[0], self._cluster.tables.slice_span[sid][1])

    def _give_slice(self, job: str, sid: int) -> None:
        self._slice_holder[sid] = None
        self._slice_set_of[sid].add(sid)
        held = self._jobs[job]
        parts = held.own_parts()
        parts.slices.discard(sid)
        key = self._slice_key(sid)
        _bump(parts.n_slices, key, -1)
        _bump(parts.n_slice_milli, key[0], -self._cluster.tables.slice_span[sid][1])
        self._forget_if_empty(job, held)

    def _add_share(self, job: str, g: int, milli: int) -> None:
        t = self._cluster.tables
        before = self._used[g]
        self._used[g] = before + milli
        shares = self._shares[g]
        if shares is None:
            shares = self._shares[g] = {}
        _bump(shares, job, milli)
        acc = t.node_acc[t.gpu_node[g]]
        self._frac_index[acc].move(g, MILLI - before, MILLI - before - milli)
        if before == 0:
            self._whole_changed(t.gpu_node[g], 1 << t.gpu_local[g], -1)
        parts = self._held(job).own_parts()
        _bump(parts.shares, g, milli)
        _bump(parts.n_milli, acc, milli)

    def _sub_share(self, job: str, g: int, milli: int) -> None:
        t = self._cluster.tables
        before = self._used[g]
        after = before - milli
        self._used[g] = after
        shares = self._shares[g]
        assert shares is not None
        _bump(shares, job, -milli)
        if not shares:
            self._shares[g] = None
        acc = t.node_acc[t.gpu_node[g]]
        self._frac_index[acc].move(g, MILLI - before, MILLI - after)
        if after == 0:
            self._whole_changed(t.gpu_node[g], 1 << t.gpu_local[g], +1)
        held = self._jobs[job]
        parts = held.own_parts()
        _bump(parts.shares, g, -milli)
        _bump(parts.n_milli, acc, -milli)
        self._forget_if_empty(job, held)


class Branch(StateView):
    """An open what-if on a `State`: mutations are logged and undone on exit.

    `commit()` keeps the changes: into the parent branch's log when nested (so
    the parent can still undo them), or for good at the top — unless the
    branch came from `Snapshot.what_if()`, whose top level can never commit.
    """

    __slots__ = (
        "_closed",
        "_committable",
        "_log",
        "_parent",
        "_start_syncs",
        "_start_version",
        "_state",
    )

    def __init__(self, state: State, parent: Branch | None, committable: bool) -> None:
        self._state = state
        self._parent = parent
        self._committable = committable
        self._log: list[_Record] = []
        self._start_version = state._version
        self._start_syncs = state._group_syncs
        self._closed = False

    def _core(self) -> State:
        if self._closed:
            raise BranchError("this branch is closed (committed or rolled back)")
        if self._state._branches[-1] is not self:
            raise BranchError("this branch has an open nested branch; use the innermost one")
        return self._state

    def __enter__(self) -> Branch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._closed:
            self.rollback()

    @property
    def changes(self) -> int:
        """Undo records held: the cost of rolling back, in primitive moves."""
        return len(self._log)

    def allocate(self, job: str, *claims: Claim) -> None:
        self._state._writable(self)
        self._state._apply(job, claims, release=False)

    def release(self, job: str, *claims: Claim) -> None:
        self._state._writable(self)
        self._state._apply(job, claims, release=True)

    def release_job(self, job: str) -> Holdings:
        """Remove a job for the what-if (Kueue's SimulateWorkloadRemoval, minus the restore)."""
        self._state._writable(self)
        holdings = self._state.holdings(job)
        self._state._release_all(job)
        return holdings

    def release_all(self, job: str) -> None:
        """`release_job` without building the `Holdings` it returns."""
        self._state._writable(self)
        self._state._release_all(job)

    def branch(self) -> Branch:
        """A nested what-if; its commit merges into this branch, which can still roll back."""
        self._state._writable(self)
        return self._state._open_branch(committable=True)

    def commit(self) -> None:
        self._state._writable(self)
        if not self._committable:
            raise BranchError("a what-if on a snapshot never commits; apply its decisions instead")
        if self._parent is not None:
            self._parent._log.extend(self._log)
        self._log = []
        self._closed = True
        self._state._branches.pop()

    def rollback(self) -> None:
        state = self._state
        state._writable(self)
        state._undo(self._log)
        self._log = []
        state._version = self._start_version
        if state._group_syncs != self._start_syncs:
            # group indexes were re-filed inside the branch: file them back now, so an
            # iterator opened before the branch reads the index as it was (as with
            # indexes kept up to date at every move)
            state._sync_groups()
        self._closed = True
        state._branches.pop()


class Snapshot(StateView):
    """A read-only view of a `State` at one version: what `decide()` receives.

    Creating one is O(1): it shares the state's indexes and checks on every read
    that the state is still at its version, so a policy can never act on a view
    that silently changed under it. `what_if()` opens a branch that always rolls
    back, the only way a policy tries moves.
    """

    __slots__ = ("_state", "_version_at")

    def __init__(self, state: State) -> None:
        self._state = state
        self._version_at = state._version

    def _core(self) -> State:
        if self._state._version != self._version_at:
            raise StaleViewError(
                f"snapshot of version {self._version_at} read at version {self._state._version}; "
                "take a new snapshot (or read through the open what-if branch)"
            )
        return self._state

    @property
    def current(self) -> bool:
        """Whether the state is still at this snapshot's version."""
        return self._state._version == self._version_at

    def what_if(self) -> Branch:
        """`with snapshot.what_if() as w:` try moves on `w`; they are undone on exit."""
        return self._core()._open_branch(committable=False)


__all__ = ["Branch", "Snapshot", "State", "StateView"]
