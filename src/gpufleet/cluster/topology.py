"""The cluster as the scheduler sees it: nodes, GPUs, MIG slices, scale-up domains, topology.

A `Cluster` is frozen: it says what exists, never who uses it (that is
`State`). Keeping the two apart lets one cluster back many states — the live
one, a simulator's, each what-if — without copying the description, and lets
every state share the flat lookup tables built here once.

Identity conventions, documented in docs/design/0008-cluster-state.md:

- a node is `<group>-<i>` when expanded from a spec node group;
- a topology group at level L is named by the path down to it, joined by "/"
  ("b1", "b1/l2"), so two leaves both called "l1" under different blocks stay
  distinct; at the "node" level the group is the node itself;
- a GPU is (node, index); a MIG slice is "<node>/gpu<g>/mig:<profile>#<k>";
- a scale-up domain is the node (default), a run of nodes ("<group>/nvl<j>")
  when the accelerator's NVLink domain is larger than a node (GB200 NVL72), or
  part of a node ("<node>/nvl<j>") when it is smaller (PCIe cards in NVLink pairs).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, TypeVar

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.mig import check_layout, get_mig_profile, layout_shares, layout_starts
from gpufleet.cluster.claims import MILLI
from gpufleet.cluster.errors import InvalidClusterError
from gpufleet.errors import UnknownNameError

if TYPE_CHECKING:
    from gpufleet.specs.cluster import ClusterSpec

Capacity = Literal["reserved", "on-demand", "spot"]
# One GPU's MIG layout: (profile, count) pairs in a fixed order; () = not partitioned.
GpuLayout = tuple[tuple[str, int], ...]
NODE_LEVEL = "node"
T = TypeVar("T")

_SLICE_ID = re.compile(r"(?P<node>.+)/gpu(?P<gpu>\d+)/mig:(?P<profile>[^#/]+)#(?P<k>\d+)")


def slice_id(node: str, gpu: int, profile: str, k: int) -> str:
    """The id of the k-th instance of `profile` on GPU `gpu` of `node`."""
    return f"{node}/gpu{gpu}/mig:{profile}#{k}"


@dataclass(frozen=True, slots=True)
class Node:
    """One machine: its GPUs, where it sits, and how its GPUs may be split.

    `domains` gives each GPU's scale-up domain name; empty means the node is
    one domain named after itself. `mig` gives each GPU's MIG layout; empty
    means no GPU is partitioned, and an empty layout for one GPU leaves that
    GPU whole.
    """

    name: str
    accelerator: str
    gpus: int
    path: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    capacity: Capacity = "on-demand"
    fractions: bool = False
    group: str = ""
    domains: tuple[str, ...] = ()
    mig: tuple[GpuLayout, ...] = ()

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidClusterError("a node needs a name")
        if self.gpus < 1:
            raise InvalidClusterError(f"node {self.name}: gpus must be >= 1, got {self.gpus}")
        object.__setattr__(self, "path", tuple(self.path))
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "domains", tuple(self.domains))
        object.__setattr__(self, "mig", tuple(tuple(layout) for layout in self.mig))
        for what, per_gpu in (("domains", self.domains), ("mig", self.mig)):
            if per_gpu and len(per_gpu) != self.gpus:
                raise InvalidClusterError(
                    f"node {self.name}: {what} lists {len(per_gpu)} GPUs, the node has {self.gpus}"
                )

    def domain(self, gpu: int) -> str:
        """Scale-up domain of one GPU of this node."""
        return self.domains[gpu] if self.domains else self.name

    def layout(self, gpu: int) -> GpuLayout:
        """MIG layout of one GPU; () when the GPU is whole.

        The scheduler never turns a cut GPU whole (a re-layout goes from one MIG layout to
        another, `sched.relayout`), so a whole-GPU request can only ever use `whole_gpus`."""
        return self.mig[gpu] if self.mig else ()

    @property
    def whole_gpus(self) -> int:
        """GPUs not cut into MIG slices: what a whole-GPU request can use."""
        return self.gpus if not self.mig else sum(1 for layout in self.mig if not layout)


@dataclass(frozen=True, slots=True)
class SliceInfo:
    """What a MIG slice id stands for."""

    id: str
    node: str
    gpu: int
    accelerator: str
    profile: str
    index: int
    compute_slices: int
    memory_bytes: int
    first_slice: int  # its first compute slice on the GPU (instances end to end, layout order)
    milli: int  # its weight in thousandths of the GPU: a whole GPU's slices add up to 1000


class Tables:
    """Flat lookup tables shared by every `State` of one cluster; read-only by convention.

    Everything is indexed by small dense ints (node index, global GPU id, slice
    id, group id) so that the state can keep plain lists, which are several
    times faster than dicts keyed by names in the allocation hot path.
    """

    def __init__(self, levels: tuple[str, ...], nodes: tuple[Node, ...]) -> None:
        self.node_by_name: dict[str, int] = {}
        self.node_acc: list[str] = []
        self.gpu_base: list[int] = []  # global id of each node's GPU 0; one extra at the end
        self.gpu_node: list[int] = []
        self.gpu_mig: list[bool] = []
        self.gpu_domain: list[int] = []
        self.domain_names: list[str] = []
        self.domain_by_name: dict[str, int] = {}
        self.domain_acc: list[str] = []
        self.domain_gpus: list[list[int]] = []
        # groups per level above "node": names (path prefixes), and each node's group ids
        depth = len(levels) - 1
        self.group_names: list[list[str]] = [[] for _ in range(depth)]
        self.group_by_name: list[dict[str, int]] = [{} for _ in range(depth)]
        self.node_groups: list[tuple[int, ...]] = []
        # aggregates: one per (level, group, accelerator); each node feeds `depth` of them
        self.agg_ids: dict[tuple[int, int, str], int] = {}
        self.agg_level: list[int] = []
        self.agg_group: list[int] = []
        self.agg_acc: list[str] = []
        self.node_aggs: list[tuple[int, ...]] = []
        # MIG slices: slice id -> GPU, profile, k; per GPU the first slice and profile offsets
        self.slice_gpu: list[int] = []
        self.slice_profile: list[str] = []
        self.slice_k: list[int] = []
        # per slice (its first compute slice on the GPU, instances end to end in layout order;
        # its weight in thousandths of the GPU, `catalog.mig.span_share`: a GPU's slices add
        # up to exactly 1000 when they use all of it); the pairs are shared per layout
        self.slice_span: list[tuple[int, int]] = []
        self.gpu_slice_start: list[int] = []
        self.gpu_slice_offsets: list[Mapping[str, tuple[int, int]] | None] = []
        self.profile_info: dict[tuple[str, str], tuple[int, int]] = {}
        # per (accelerator, layout): profile offsets and slice spans, checked once per shape
        self._layouts: dict[
            tuple[str, GpuLayout],
            tuple[Mapping[str, tuple[int, int]], tuple[tuple[int, int], ...]],
        ] = {}
        for n, node in enumerate(nodes):
            if node.name in self.node_by_name:
                raise InvalidClusterError(f"node name '{node.name}' is used twice")
            if len(node.path) != depth:
                raise InvalidClusterError(
                    f"node {node.name}: path {'/'.join(node.path) or '()'} has "
                    f"{len(node.path)} levels; expected {depth} ({', '.join(levels[:-1])})"
                )
            self.node_by_name[node.name] = n
            self.node_acc.append(node.accelerator)
            self._add_groups(node, depth)
            self.gpu_base.append(len(self.gpu_node))
            for g in range(node.gpus):
                self._add_gpu(n, node, g)
        self.gpu_base.append(len(self.gpu_node))
        self.gpu_slice_start.append(len(self.slice_gpu))  # sentinel: slices end here
        self.gpu_local: list[int] = [gid - self.gpu_base[n] for gid, n in enumerate(self.gpu_node)]
        self.accelerators: tuple[str, ...] = tuple(sorted(set(self.node_acc)))
        # distinct scale-up domains of each node's GPUs, in GPU order
        self.node_domains: list[tuple[int, ...]] = [
            tuple(dict.fromkeys(self.gpu_domain[self.gpu_base[n] : self.gpu_base[n + 1]]))
            for n in range(len(nodes))
        ]
        self.max_node_gpus: int = max((node.gpus for node in nodes), default=0)
        # A domain that is exactly one node's GPUs (NVLink inside the node, the common case)
        # has that node's free count; where every domain of an accelerator is such a node,
        # the state answers domain questions from its node counters instead of keeping a
        # second copy of them (design 0008, "node-aligned domains").
        self.domain_node: list[int] = [-1] * len(self.domain_names)
        for n, doms in enumerate(self.node_domains):
            if len(doms) == 1 and all(self.gpu_node[g] == n for g in self.domain_gpus[doms[0]]):
                self.domain_node[doms[0]] = n
        self.node_aligned: frozenset[str] = frozenset(self.accelerators) - {
            self.domain_acc[d] for d, n in enumerate(self.domain_node) if n < 0
        }
        # domain -> the node whose counters stand for it (-1: it keeps its own), and
        # node -> its one domain where that holds
        self.domain_alias: list[int] = [
            n if self.domain_acc[d] in self.node_aligned else -1
            for d, n in enumerate(self.domain_node)
        ]
        self.node_domain: list[int] = [-1] * len(nodes)
        for d, n in enumerate(self.domain_alias):
            if n >= 0:
                self.node_domain[n] = d

    def _add_groups(self, node: Node, depth: int) -> None:
        groups: list[int] = []
        aggs: list[int] = []
        for level in range(depth):
            name = "/".join(node.path[: level + 1])
            gid = self.group_by_name[level].get(name)
            if gid is None:
                gid = len(self.group_names[level])
                self.group_names[level].append(name)
                self.group_by_name[level][name] = gid
            groups.append(gid)
            key = (level, gid, node.accelerator)
            agg = self.agg_ids.get(key)
            if agg is None:
                agg = len(self.agg_level)
                self.agg_ids[key] = agg
                self.agg_level.append(level)
                self.agg_group.append(gid)
                self.agg_acc.append(node.accelerator)
            aggs.append(agg)
        self.node_groups.append(tuple(groups))
        self.node_aggs.append(tuple(aggs))

    def _add_gpu(self, n: int, node: Node, g: int) -> None:
        gid = len(self.gpu_node)
        self.gpu_node.append(n)
        domain = node.domain(g)
        d = self.domain_by_name.get(domain)
        if d is None:
            d = len(self.domain_names)
            self.domain_by_name[domain] = d
            self.domain_names.append(domain)
            self.domain_acc.append(node.accelerator)
            self.domain_gpus.append([])
        elif self.domain_acc[d] != node.accelerator:
            raise InvalidClusterError(
                f"scale-up domain '{domain}' mixes {self.domain_acc[d]} and "
                f"{node.accelerator} (node {node.name})"
            )
        self.gpu_domain.append(d)
        self.domain_gpus[d].append(gid)
        layout = node.layout(g)
        self.gpu_mig.append(bool(layout))
        self.gpu_slice_start.append(len(self.slice_gpu))
        if not layout:
            self.gpu_slice_offsets.append(None)
            return
        key = (node.accelerator, layout)
        known = self._layouts.get(key)
        if known is None:
            known = self._layouts[key] = (
                _layout_offsets(node.accelerator, layout),
                _layout_spans(node.accelerator, layout),
            )
        self.gpu_slice_offsets.append(known[0])
        self.slice_span.extend(known[1])
        for profile, count in layout:
            self.profile_info.setdefault(
                (node.accelerator, profile), _profile_size(node.accelerator, profile)
            )
            for k in range(count):
                self.slice_gpu.append(gid)
                self.slice_profile.append(profile)
                self.slice_k.append(k)


@cache
def _profile_size(accelerator: str, profile: str) -> tuple[int, int]:

    row = get_mig_profile(accelerator, profile)
    return row.compute_slices, row.memory_bytes


def _layout_spans(accelerator: str, layout: GpuLayout) -> tuple[tuple[int, int], ...]:
    """(first compute slice, weight in thousandths) of each instance, in layout order."""

    starts = layout_starts(accelerator, layout)
    return tuple(zip(starts, layout_shares(accelerator, layout, MILLI), strict=True))


def _layout_offsets(accelerator: str, layout: GpuLayout) -> Mapping[str, tuple[int, int]]:
    """profile -> (first slice offset on the GPU, count); checks the layout once per shape."""

    seen: set[str] = set()
    for profile, count in layout:
        if profile in seen:
            raise InvalidClusterError(f"MIG layout lists {profile} twice")
        seen.add(profile)
        if count < 1:
            raise InvalidClusterError(f"MIG layout: {profile} count must be >= 1, got {count}")
        canonical = get_mig_profile(accelerator, profile).profile
        if canonical != profile:
            raise InvalidClusterError(
                f"MIG layout: write profile '{profile}' as '{canonical}' (canonical spelling)"
            )
    problems = check_layout(accelerator, dict(layout))
    if problems:
        raise InvalidClusterError(f"MIG layout on {accelerator}: " + "; ".join(problems))
    out: dict[str, tuple[int, int]] = {}
    offset = 0
    for profile, count in layout:
        out[profile] = (offset, count)
        offset += count
    return MappingProxyType(out)


@dataclass(frozen=True)
class Cluster:
    """What exists: nodes in a named topology tree. Immutable and shared by all states."""

    levels: tuple[str, ...]
    nodes: tuple[Node, ...]
    name: str = "cluster"
    tables: Tables = field(init=False, repr=False, compare=False)
    _derived: dict[object, object] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        levels = tuple(self.levels)
        object.__setattr__(self, "levels", levels)
        object.__setattr__(self, "nodes", tuple(self.nodes))
        if not levels or levels[-1] != NODE_LEVEL:
            raise InvalidClusterError(f"topology levels must end with 'node', got {levels}")
        if len(set(levels)) != len(levels):
            raise InvalidClusterError(f"topology levels repeat a name: {levels}")
        object.__setattr__(self, "tables", Tables(levels, self.nodes))
        object.__setattr__(self, "_derived", {})

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_spec(cls, spec: ClusterSpec) -> Cluster:
        """Expand each node group into nodes `<group>-<i>` with their paths, domains and MIG."""

        nodes: list[Node] = []
        for group in spec.node_groups:
            device = get_accelerator(group.accelerator)
            instances = group.mig_instances()
            layout: GpuLayout = ()
            if instances:
                layout = tuple(
                    (get_mig_profile(device.name, p).profile, c) for p, c in instances.items()
                )
            nodes.extend(
                expand_group(
                    group.name,
                    device.name,
                    group.gpus_per_node,
                    group.node_paths(spec.topology_levels),
                    mig=layout,
                    domain_gpus=device.scaleup_domain_gpus,
                    labels=group.labels,
                    capacity=group.capacity,
                    fractions=group.fractions,
                )
            )
        return cls(tuple(spec.topology_levels), tuple(nodes), name=spec.name)

    # -- lookups ------------------------------------------------------------------------

    def derived(self, build: Callable[[Cluster], T]) -> T:
        """`build(self)`, computed once per cluster: lookup tables a plugin derives from the
        (frozen) cluster live as long as it does, whatever state or plugin instance asks."""
        found = self._derived.get(build)
        if found is None:
            found = self._derived[build] = build(self)
        return found  # type: ignore[return-value]

    @cached_property
    def gpus_by_accelerator(self) -> Mapping[str, int]:
        """GPUs of each accelerator type in the cluster (computed once)."""
        out: dict[str, int] = {}
        for node in self.nodes:
            out[node.accelerator] = out.get(node.accelerator, 0) + node.gpus
        return MappingProxyType(out)

    def node_index(self, name: str) -> int:
        n = self.tables.node_by_name.get(name)
        if n is None:
            raise UnknownNameError("node", name, self.tables.node_by_name)
        return n

    def node(self, name: str) -> Node:
        return self.nodes[self.node_index(name)]

    @property
    def accelerators(self) -> tuple[str, ...]:
        return self.tables.accelerators

    @property
    def gpu_count(self) -> int:
        return len(self.tables.gpu_node)

    def level_index(self, level: str) -> int:
        """Position of a level above "node"; "node" itself is len(levels) - 1."""
        try:
            return self.levels.index(level)
        except ValueError:
            raise UnknownNameError("topology level", level, self.levels) from None

    def groups(self, level: str) -> tuple[str, ...]:
        """Names of the groups at one level, in the order their first node appears."""
        i = self.level_index(level)
        if i == len(self.levels) - 1:
            return tuple(node.name for node in self.nodes)
        return tuple(self.tables.group_names[i])

    def group_of(self, node: str, level: str) -> str:
        """The group of `node` at `level`: its path prefix, or the node at level "node"."""
        i = self.level_index(level)
        if i == len(self.levels) - 1:
            return self.node(node).name
        return "/".join(self.node(node).path[: i + 1])

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(self.tables.domain_names)

    def domains_are_nodes(self, accelerator: str) -> bool:
        """Whether every scale-up domain of `accelerator` is exactly one node's GPUs (NVLink
        inside the node: the common case). A placement may then treat "one domain" and
        "one node" as the same tier, and the state answers domain queries from its node
        index (design 0008)."""
        return accelerator in self.tables.node_aligned

    def domain_of(self, node: str, gpu: int) -> str:
        return self.tables.domain_names[self.tables.gpu_domain[self.gpu_id(node, gpu)]]

    def domain_members(self, domain: str) -> tuple[tuple[str, int], ...]:
        """(node, gpu) pairs of one scale-up domain."""
        d = self.tables.domain_by_name.get(domain)
        if d is None:
            raise UnknownNameError("scale-up domain", domain, self.tables.domain_by_name)
        return tuple(self.gpu_ref(g) for g in self.tables.domain_gpus[d])

    def gpu_id(self, node: str, gpu: int) -> int:
        """Global GPU id (dense, in node order) of GPU `gpu` on `node`."""
        n = self.node_index(node)
        t = self.tables
        if type(gpu) is not int or not 0 <= gpu < t.gpu_base[n + 1] - t.gpu_base[n]:
            raise UnknownNameError("GPU index", f"{node}/gpu{gpu}", ())
        return t.gpu_base[n] + gpu

    def gpu_ref(self, gid: int) -> tuple[str, int]:
        t = self.tables
        return self.nodes[t.gpu_node[gid]].name, t.gpu_local[gid]

    def slices(self) -> Iterable[str]:
        """Every MIG slice id, in node, GPU and layout order."""
        return (self.slice_name(s) for s in range(len(self.tables.slice_gpu)))

    def slice_name(self, sid: int) -> str:
        t = self.tables
        node, gpu = self.gpu_ref(t.slice_gpu[sid])
        return slice_id(node, gpu, t.slice_profile[sid], t.slice_k[sid])

    def slice_index(self, name: str) -> int:
        """Dense id of a slice from its string id; parses instead of storing 100k+ strings."""
        match = _SLICE_ID.fullmatch(name)
        if match is None:
            raise UnknownNameError("MIG slice id (<node>/gpu<g>/mig:<profile>#<k>)", name, ())
        gid = self.gpu_id(match["node"], int(match["gpu"]))
        offsets = self.tables.gpu_slice_offsets[gid]
        profile, k = match["profile"], int(match["k"])
        span = None if offsets is None else offsets.get(profile)
        if span is None or k >= span[1]:
            known = [] if offsets is None else list(offsets)
            raise UnknownNameError(f"MIG slice on {match['node']}/gpu{match['gpu']}", name, known)
        return self.tables.gpu_slice_start[gid] + span[0] + k

    def slice_info(self, name: str) -> SliceInfo:
        sid = self.slice_index(name)
        t = self.tables
        node, gpu = self.gpu_ref(t.slice_gpu[sid])
        acc = self.nodes[t.gpu_node[t.slice_gpu[sid]]].accelerator
        compute, memory = t.profile_info[(acc, t.slice_profile[sid])]
        return SliceInfo(
            name,
            node,
            gpu,
            acc,
            t.slice_profile[sid],
            t.slice_k[sid],
            compute,
            memory,
            *t.slice_span[sid],
        )


def scaleup_domains(
    group: str, node: str, run: int, gpus_per_node: int, domain_gpus: int | None
) -> tuple[str, ...]:
    """Per-GPU domain names for one node, or () when the node is exactly one domain.

    `run` numbers the multi-node domain the node belongs to (see `expand_group`).
    A domain size that does not divide evenly rounds down to whole nodes (or
    whole GPUs), so a domain never claims links that are not there.
    """
    if domain_gpus is None or domain_gpus == gpus_per_node:
        return ()
    if domain_gpus > gpus_per_node:
        if domain_gpus // gpus_per_node == 1:
            return ()
        return (f"{group}/nvl{run}",) * gpus_per_node
    return tuple(f"{node}/nvl{g // domain_gpus}" for g in range(gpus_per_node))


def expand_group(
    group: str,
    accelerator: str,
    gpus_per_node: int,
    paths: Sequence[tuple[str, ...]],
    *,
    mig: GpuLayout = (),
    domain_gpus: int | None = None,
    labels: Mapping[str, str] | None = None,
    capacity: Capacity = "on-demand",
    fractions: bool = False,
) -> list[Node]:
    """Nodes `<group>-0 ... <group>-<n-1>`, one per path in `paths`.

    Multi-node scale-up domains (NVL72: 18 nodes of 4 GPUs) are cut from
    consecutive nodes that share a topology path; a change of path starts a new
    domain, since an NVLink domain is one rack and cannot straddle two leaves.
    """
    nodes: list[Node] = []
    per_domain = 1
    if domain_gpus is not None and domain_gpus > gpus_per_node:
        per_domain = domain_gpus // gpus_per_node
    run = -1  # multi-node domain counter, advanced at each full domain or path change
    filled = per_domain
    previous: tuple[str, ...] | None = None
    for i, path in enumerate(paths):
        name = f"{group}-{i}"
        if filled == per_domain or path != previous:
            run += 1
            filled = 0
        filled += 1
        previous = path
        domains = scaleup_domains(group, name, run, gpus_per_node, domain_gpus)
        nodes.append(
            Node(
                name=name,
                accelerator=accelerator,
                gpus=gpus_per_node,
                path=path,
                labels=dict(labels or {}),
                capacity=capacity,
                fractions=fractions,
                group=group,
                domains=domains,
                mig=(mig,) * gpus_per_node if mig else (),
            )
        )
    return nodes
