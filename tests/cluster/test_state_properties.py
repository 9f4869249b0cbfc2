"""Properties of the cluster state against a brute-force reference model.

The stateful test drives random clusters (whole GPUs, MIG slices and fractions,
multi-level topology, node-, pair- and multi-node scale-up domains) through
random allocate / release / branch / commit / rollback / what-if sequences and
checks, after every step, that every index equals a recount from the model and
that rolled-back branches leave no trace.

Example budget: GPUFLEET_PROPERTY_SCALE multiplies every max_examples (default
1: about 10,000 examples in ~15 s on two cores; set 10 for a soak run).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from gpufleet.cluster import (
    MILLI,
    AllocationError,
    Branch,
    BranchError,
    Claim,
    Cluster,
    MigSlice,
    Node,
    Share,
    StaleViewError,
    State,
    StateView,
    Whole,
    expand_group,
    to_milli,
)
from gpufleet.cluster.index import BucketIndex

SCALE = float(os.environ.get("GPUFLEET_PROPERTY_SCALE", "1"))


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


# -- random clusters -------------------------------------------------------------------------

# (accelerator, MIG layouts to pick per GPU: () = whole GPU)
KINDS: dict[str, tuple[tuple[tuple[str, int], ...], ...]] = {
    "a100-sxm4-80gb": (
        (),
        (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)),
        (("3g.40gb", 2),),
        (("1g.10gb", 7),),
    ),
    "h100-pcie-80gb": ((), (("2g.20gb", 3),)),
    "l4": ((),),
}
LEVELS = (("node",), ("leaf", "node"), ("block", "leaf", "node"))


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    levels = draw(st.sampled_from(LEVELS))
    depth = len(levels) - 1
    path_names = st.tuples(*[st.sampled_from(["a", "b"]) for _ in range(depth)])
    nodes: list[Node] = []
    for g in range(draw(st.integers(1, 3))):
        accelerator = draw(st.sampled_from(sorted(KINDS)))
        gpus = draw(st.integers(1, 4))
        count = draw(st.integers(1, 3))
        paths = draw(st.lists(path_names, min_size=count, max_size=count))
        paths.sort()  # contiguous runs, as node_paths() produces
        domain = draw(st.sampled_from([None, 1, 2, 2 * gpus]))
        group = expand_group(
            f"g{g}",
            accelerator,
            gpus,
            paths,
            domain_gpus=domain,
            fractions=draw(st.booleans()),
        )
        for node in group:
            layouts = KINDS[accelerator]
            mig = tuple(draw(st.sampled_from(layouts)) for _ in range(gpus))
            nodes.append(dataclasses.replace(node, mig=mig if any(mig) else ()))
    return Cluster(levels, tuple(nodes))


# -- the reference model ---------------------------------------------------------------------


class Ctx:
    """Brute-force facts about one cluster, computed once per example (not per step)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.nodes = {n.name: n for n in cluster.nodes}
        self.names = [n.name for n in cluster.nodes]
        self.gpus = [(n.name, g) for n in cluster.nodes for g in range(n.gpus)]
        self.gpu_order = {x: i for i, x in enumerate(self.gpus)}
        self.slices = [cluster.slice_info(x) for x in cluster.slices()]
        self.slice_order = {x.id: i for i, x in enumerate(self.slices)}
        self.profiles = sorted({(x.accelerator, x.profile) for x in self.slices})
        self.fraction_gpus = [
            (n.name, g)
            for n in cluster.nodes
            for g in range(n.gpus)
            if n.fractions and not n.layout(g)
        ]
        max_gpus = max(n.gpus for n in cluster.nodes)
        names, sizes = self.names, [n.gpus for n in cluster.nodes]
        node_i = st.integers(0, len(names) - 1)
        whole = st.builds(
            lambda i, gs: Whole(names[i], tuple(gs)),
            node_i,
            st.lists(st.integers(0, max_gpus), min_size=1, max_size=3),  # may be out of range
        )
        milli = st.sampled_from([125, 250, 333, 500, MILLI]) | st.integers(1, MILLI)
        share = st.builds(
            lambda i, g, m: Share(names[i], g % sizes[i], m), node_i, st.integers(0, 7), milli
        )
        options: list[st.SearchStrategy[Claim]] = [whole, share]
        if self.slices:
            options.append(st.sampled_from([x.id for x in self.slices]).map(MigSlice))
        self.claims: st.SearchStrategy[Claim] = st.one_of(*options)


@dataclass
class Model:
    """Who holds what, by name only: no indexes, no cleverness."""

    whole: dict[tuple[str, int], str] = field(default_factory=dict)
    slices: dict[str, str] = field(default_factory=dict)
    shares: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)

    def used(self, node: str, gpu: int) -> int:
        return sum(self.shares.get((node, gpu), {}).values())

    def free_whole(self, ctx: Ctx) -> dict[tuple[str, int], bool]:
        return {
            (name, g): not ctx.nodes[name].layout(g)
            and (name, g) not in self.whole
            and not self.used(name, g)
            for name, g in ctx.gpus
        }

    def apply(self, ctx: Ctx, job: str, claim: Claim, release: bool) -> bool:
        """Apply one claim if legal; False (model then discarded) if the state must refuse it."""
        if isinstance(claim, Whole):
            node = ctx.nodes[claim.node]
            if not claim.gpus or len(set(claim.gpus)) != len(claim.gpus):
                return False
            if any(not 0 <= g < node.gpus for g in claim.gpus):
                return False
            for g in claim.gpus:
                key = (claim.node, g)
                if release:
                    if self.whole.get(key) != job:
                        return False
                    del self.whole[key]
                else:
                    if node.layout(g) or key in self.whole or self.used(*key):
                        return False
                    self.whole[key] = job
            return True
        if isinstance(claim, MigSlice):
            if release:
                return self.slices.pop(claim.id, None) == job
            if claim.id in self.slices:
                return False
            self.slices[claim.id] = job
            return True
        node = ctx.nodes[claim.node]
        key = (claim.node, claim.gpu)
        shares = self.shares.setdefault(key, {})
        if release:
            if shares.get(job, 0) < claim.milli:
                return False
            shares[job] -= claim.milli
            if not shares[job]:
                del shares[job]
        else:
            if not node.fractions or node.layout(claim.gpu) or key in self.whole:
                return False
            if self.used(*key) + claim.milli > MILLI:
                return False
            shares[job] = shares.get(job, 0) + claim.milli
        if not shares:
            del self.shares[key]
        return True

    def dump(self, ctx: Ctx) -> dict[str, dict[str, list[Any]]]:
        """The state's canonical dump, rebuilt from the model."""
        jobs = set(self.whole.values()) | set(self.slices.values())
        jobs |= {j for shares in self.shares.values() for j in shares}
        gpus = sorted(self.whole, key=ctx.gpu_order.__getitem__)
        slices = sorted(self.slices, key=ctx.slice_order.__getitem__)
        shared = sorted(self.shares, key=ctx.gpu_order.__getitem__)
        return {
            job: {
                "gpus": [list(k) for k in gpus if self.whole[k] == job],
                "slices": [x for x in slices if self.slices[x] == job],
                "shares": [[*k, self.shares[k][job]] for k in shared if job in self.shares[k]],
            }
            for job in sorted(jobs)
        }


def ranked(counts: dict[Any, int], order: list[Any], at_least: int) -> list[Any]:
    """Brute-force answer of an `..._with_free` query: tightest first, then cluster order."""
    return sorted(
        (x for x in order if x in counts and counts[x] >= at_least),
        key=lambda x: counts[x],  # stable: ties keep cluster order
    )


def fingerprint(view: StateView) -> tuple[Any, ...]:
    """Every query answer over the whole cluster: two states that agree here are equal."""
    c = view.cluster
    parts: list[Any] = [view.dump(), [view.free_gpu_ids(n.name) for n in c.nodes]]
    for acc in c.accelerators:
        parts.append(list(view.nodes_with_free(acc, 0)))
        parts.append(list(view.domains_with_free(acc, 0)))
        parts.append(list(view.gpus_with_free_milli(acc, 0)))
        for level in c.levels[:-1]:
            parts.append(list(view.groups_with_free(level, acc, 0)))
            parts.append([view.free_in_group(level, g, acc) for g in c.groups(level)])
    parts.append([view.free_slices_on(n.name) for n in c.nodes])
    return tuple(parts)


JOBS = st.sampled_from(["j0", "j1", "j2", "j3"])


class ClusterStateMachine(RuleBasedStateMachine):
    """Random moves on a random cluster, checked against `Model` after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.ctx: Ctx
        self.state: State
        self.model = Model()
        # open branches, innermost last, each with the model, fingerprint and version at opening
        self.stack: list[tuple[Branch, Model, tuple[Any, ...], int]] = []
        # free whole GPUs last seen at each free epoch: within an epoch they may only shrink
        self.free_at_epoch: dict[int, frozenset[tuple[str, int]]] = {}

    @initialize(cluster=clusters())
    def build(self, cluster: Cluster) -> None:
        self.ctx = Ctx(cluster)
        self.state = State(cluster)

    @property
    def writer(self) -> State | Branch:
        return self.stack[-1][0] if self.stack else self.state

    def attempt(self, job: str, claims: list[Claim], release: bool) -> None:
        trial = copy.deepcopy(self.model)
        legal = all(trial.apply(self.ctx, job, c, release) for c in claims)
        before = self.state.dump()
        act = self.writer.release if release else self.writer.allocate
        if legal:
            act(job, *claims)
            self.model = trial
        else:
            with pytest.raises(AllocationError):
                act(job, *claims)
            assert self.state.dump() == before  # all or nothing

    def free_claims(self) -> st.SearchStrategy[Claim] | None:
        """Claims on what the model says is free: mostly legal, so states fill up."""
        ctx, m = self.ctx, self.model
        free = m.free_whole(ctx)
        by_node: dict[str, list[int]] = {}
        for (node, g), ok in free.items():
            if ok:
                by_node.setdefault(node, []).append(g)
        options: list[st.SearchStrategy[Claim]] = [
            st.lists(st.sampled_from(gs), min_size=1, max_size=len(gs), unique=True).map(
                lambda picked, node=node: Whole(node, tuple(picked))  # type: ignore[misc]
            )
            for node, gs in by_node.items()
        ]
        slices = [x.id for x in ctx.slices if x.id not in m.slices]
        if slices:
            options.append(st.sampled_from(slices).map(MigSlice))
        room = [(g, MILLI - m.used(*g)) for g in ctx.fraction_gpus if g not in m.whole]
        options.extend(
            # up to one thousandth too many: the overflow boundary must be exact
            st.integers(1, left + 1).map(lambda k, g=g: Share(g[0], g[1], k))  # type: ignore[misc]
            for g, left in room
            if left
        )
        return st.one_of(*options) if options else None

    @rule(job=JOBS, data=st.data())
    def allocate_free(self, job: str, data: st.DataObject) -> None:
        free = self.free_claims()
        pool = self.ctx.claims if free is None else free
        self.attempt(job, data.draw(st.lists(pool, min_size=1, max_size=3)), release=False)

    @rule(job=JOBS, data=st.data())
    def allocate_anything(self, job: str, data: st.DataObject) -> None:
        claims = data.draw(st.lists(self.ctx.claims, min_size=1, max_size=3))
        self.attempt(job, claims, release=False)

    @precondition(lambda self: bool(self.state.jobs()))
    @rule(data=st.data())
    def release_held(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self.state.jobs()))
        held = self.state.holdings(job)
        parts: list[Claim] = [Whole(n, (g,)) for n, g in held.gpus]
        parts += [MigSlice(x) for x in held.slices]
        parts += [Share(n, g, k) for n, g, k in held.shares]
        claims = data.draw(st.lists(st.sampled_from(parts), min_size=1, max_size=3, unique=True))
        self.attempt(job, claims, release=True)

    @rule(job=JOBS, data=st.data())
    def release_anything(self, job: str, data: st.DataObject) -> None:
        claims = data.draw(st.lists(self.ctx.claims, min_size=1, max_size=3))
        self.attempt(job, claims, release=True)

    @rule(job=JOBS, returning=st.booleans())
    def release_job(self, job: str, returning: bool) -> None:
        held = self.state.holdings(job)
        if returning:
            released = self.writer.release_job(job)
            assert released == held
        else:
            self.writer.release_all(job)  # the same move, without the holdings
        for claim in held.claims():
            assert self.model.apply(self.ctx, job, claim, release=True)
        assert self.state.holdings(job).empty

    @precondition(lambda self: len(self.stack) < 3)
    @rule()
    def open_branch(self) -> None:
        branch = self.writer.branch().__enter__()
        self.stack.append(
            (branch, copy.deepcopy(self.model), fingerprint(self.state), self.state.version)
        )

    @precondition(lambda self: bool(self.stack))
    @rule()
    def commit(self) -> None:
        branch, _, _, _ = self.stack.pop()
        branch.commit()
        branch.__exit__(None, None, None)

    @precondition(lambda self: bool(self.stack))
    @rule(by_exception=st.booleans())
    def roll_back(self, by_exception: bool) -> None:
        branch, model, seen, version = self.stack.pop()
        if by_exception:
            with pytest.raises(KeyError), branch:
                raise KeyError("a what-if failed")
        else:
            branch.__exit__(None, None, None)
        self.model = model
        assert fingerprint(self.state) == seen
        assert self.state.version == version

    @rule(data=st.data())
    def what_if(self, data: st.DataObject) -> None:
        snap = self.state.snapshot()
        seen = fingerprint(snap)
        moves = data.draw(st.lists(st.tuples(JOBS, st.booleans(), self.ctx.claims), max_size=6))
        with snap.what_if() as w:
            for job, release, claim in moves:
                with contextlib.suppress(AllocationError):
                    (w.release if release else w.allocate)(job, claim)
            with pytest.raises(BranchError):
                w.commit()
            if w.changes:
                with pytest.raises(StaleViewError):
                    snap.free_gpus(self.ctx.names[0])
        assert snap.current
        assert fingerprint(snap) == seen

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def holdings_match_the_model_and_nothing_is_double_booked(self) -> None:
        ctx = self.ctx
        dump = self.state.dump()
        assert dump == self.model.dump(ctx)
        whole: Counter[tuple[str, int]] = Counter()
        slices: Counter[str] = Counter()
        shared: Counter[tuple[str, int]] = Counter()
        for held in dump.values():
            whole.update((node, g) for node, g in held["gpus"])
            slices.update(held["slices"])
            for node, gpu, milli in held["shares"]:
                shared[(node, gpu)] += milli
        assert all(n == 1 for n in whole.values())
        assert all(n == 1 for n in slices.values())
        assert all(0 < m <= MILLI for m in shared.values())  # fractions per GPU <= 1
        assert not set(whole) & set(shared)
        assert not any(ctx.nodes[node].layout(g) for node, g in whole)

    @invariant()
    def whole_gpu_indexes_match_a_recount(self) -> None:
        ctx, s = self.ctx, self.state
        c = ctx.cluster
        free = self.model.free_whole(ctx)
        for n in c.nodes:
            ids = tuple(g for g in range(n.gpus) if free[(n.name, g)])
            assert s.free_gpu_ids(n.name) == ids
            assert s.free_gpus(n.name) == len(ids)
        for acc in c.accelerators:
            mine = [n for n in c.nodes if n.accelerator == acc]
            per_node = {n.name: sum(free[(n.name, g)] for g in range(n.gpus)) for n in mine}
            for k in (0, 1, 2, 4):
                want = ranked(per_node, ctx.names, k)
                assert list(s.nodes_with_free(acc, k)) == want
                assert s.count_nodes_with_free(acc, k) == len(want)
                assert s.free_on_nodes_with(acc, k) == sum(per_node[name] for name in want)
                assert s.tightest_with_free(acc, k) == (want[0] if want else None)
            assert s.free_total(acc) == sum(per_node.values())
            for i, level in enumerate(c.levels[:-1]):
                per_group: dict[str, int] = {}
                for n in mine:
                    name = "/".join(n.path[: i + 1])
                    per_group[name] = per_group.get(name, 0) + per_node[n.name]
                order = list(c.groups(level))
                for k in (0, 1, 4):
                    assert list(s.groups_with_free(level, acc, k)) == ranked(per_group, order, k)
                for group in order:
                    assert s.free_in_group(level, group, acc) == per_group.get(group, 0)
            per_domain: dict[str, int] = {}
            for n in mine:
                for g in range(n.gpus):
                    per_domain[n.domain(g)] = per_domain.get(n.domain(g), 0) + free[(n.name, g)]
            for k in (0, 1, 2):
                assert list(s.domains_with_free(acc, k)) == ranked(per_domain, list(c.domains), k)

    @invariant()
    def worker_room_matches_a_recount(self) -> None:
        ctx, s = self.ctx, self.state
        c = ctx.cluster
        free = self.model.free_whole(ctx)
        per_node = {n.name: sum(free[(n.name, g)] for g in range(n.gpus)) for n in c.nodes}
        for acc in c.accelerators:
            mine = [n for n in c.nodes if n.accelerator == acc]
            for per in (1, 2, 3, 4):
                assert s.worker_room(acc, per) == sum(per_node[n.name] // per for n in mine)
            for i, level in enumerate(c.levels):
                last = i == len(c.levels) - 1
                members: dict[str, list[str]] = {}
                for n in mine:
                    name = n.name if last else "/".join(n.path[: i + 1])
                    members.setdefault(name, []).append(n.name)
                for group in c.groups(level):
                    for per in (1, 2, 3):
                        want = sum(per_node[x] // per for x in members.get(group, []))
                        assert s.worker_room_in_group(level, group, acc, per) == want
                most = max((sum(per_node[x] for x in m) for m in members.values()), default=0)
                assert s.most_free_in_group(level, acc) == most
        for domain in c.domains:
            nodes = dict.fromkeys(node for node, _ in c.domain_members(domain))
            for per in (1, 2, 3):
                want = sum(per_node[x] // per for x in nodes)
                assert s.worker_room_in_domain(domain, per) == want
        with pytest.raises(ValueError, match="at least one GPU"):
            s.worker_room(c.nodes[0].accelerator, 0)

    @invariant()
    def worker_rooms_after_bound_the_room_once_jobs_end(self) -> None:
        """Backfill's search skips the prefixes below this bound, so it must never be under
        the room a recount gives once the prefix's jobs have released everything, and it
        is exact where they hold whole GPUs alone."""
        ctx, s, m = self.ctx, self.state, self.model
        c = ctx.cluster
        jobs = sorted(s.jobs())
        for acc in c.accelerators:
            mine = [n for n in c.nodes if n.accelerator == acc]
            for per in (1, 2, 3):
                bounds = list(s.worker_rooms_after(jobs, acc, per))
                assert len(bounds) == len(jobs) + 1
                for k in range(len(jobs) + 1):
                    gone = set(jobs[:k])
                    free = {
                        (name, g): not ctx.nodes[name].layout(g)
                        and m.whole.get((name, g), "") in {"", *gone}
                        and all(j in gone for j in m.shares.get((name, g), {}))
                        for name, g in ctx.gpus
                    }
                    want = sum(sum(free[(n.name, g)] for g in range(n.gpus)) // per for n in mine)
                    assert bounds[k] >= want
                    whole_only = not any(j in gone for j in m.slices.values()) and not any(
                        j in gone for held in m.shares.values() for j in held
                    )
                    if whole_only:
                        assert bounds[k] == want
        with pytest.raises(ValueError, match="at least one GPU"):
            list(s.worker_rooms_after([], c.nodes[0].accelerator, 0))

    @invariant()
    def free_gpus_only_shrink_within_a_free_epoch(self) -> None:
        free = frozenset(k for k, ok in self.model.free_whole(self.ctx).items() if ok)
        epoch = self.state.free_epoch
        seen = self.free_at_epoch.get(epoch)
        assert seen is None or free <= seen
        self.free_at_epoch[epoch] = free

    @invariant()
    def slice_and_fraction_indexes_match_a_recount(self) -> None:
        ctx, s, m = self.ctx, self.state, self.model
        for acc, profile in ctx.profiles:
            want = [
                x.id
                for x in ctx.slices
                if x.accelerator == acc and x.profile == profile and x.id not in m.slices
            ]
            assert list(s.free_slices(acc, profile)) == want
            assert s.count_free_slices(acc, profile) == len(want)
        open_milli = {
            gpu: 0 if gpu in m.whole else MILLI - m.used(*gpu) for gpu in ctx.fraction_gpus
        }
        for gpu, milli in open_milli.items():
            assert s.free_milli(*gpu) == milli
        for acc in ctx.cluster.accelerators:
            mine = {g: v for g, v in open_milli.items() if ctx.nodes[g[0]].accelerator == acc}
            for k in (0, 1, 250, MILLI):
                assert list(s.gpus_with_free_milli(acc, k)) == ranked(mine, ctx.gpus, k)

    @invariant()
    def usage_sums_match_holdings(self) -> None:
        total = self.state.usage_by(lambda job: "all").get("all")
        m = self.model
        assert (sum(total.gpus.values()) if total else 0) == len(m.whole)
        assert (sum(total.slices.values()) if total else 0) == len(m.slices)
        assert (sum(total.milli.values()) if total else 0) == sum(
            sum(sh.values()) for sh in m.shares.values()
        )

    def teardown(self) -> None:
        while self.stack:
            self.stack.pop()[0].__exit__(None, None, None)


ClusterStateMachine.TestCase.settings = settings(
    max_examples=examples(650),
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestClusterState = ClusterStateMachine.TestCase


# -- smaller properties ----------------------------------------------------------------------


@settings(max_examples=examples(3500), deadline=None)
@given(
    initial=st.lists(st.integers(0, 9), max_size=12),
    moves=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 9)), max_size=25),
    k=st.integers(-1, 11),
)
def test_bucket_index_answers_like_a_sort(
    initial: list[int], moves: list[tuple[int, int]], k: int
) -> None:
    values = dict(enumerate(initial))
    index = BucketIndex(values.items())
    for item, new in moves:
        if item in values:
            index.move(item, values[item], new)
            values[item] = new
    want = sorted((i for i, v in values.items() if v >= k), key=lambda i: (values[i], i))
    assert list(index.at_least(k)) == want
    assert index.count_at_least(k) == len(want)
    sizes = Counter(values[i] for i in want)
    assert list(index.sizes_at_least(k)) == sorted(sizes.items())
    assert index.max_value(-1) == max(values.values(), default=-1)
    assert index.first_at_least(k) == (want[0] if want else None)
    per = max(k, 1)
    assert index.room(per) == sum(v // per for v in values.values())


def test_free_epochs_never_repeat_across_states() -> None:
    cluster = Cluster(("node",), tuple(expand_group("g", "l4", 2, [(), ()])))
    a, b = State(cluster), State(cluster)
    epochs = {a.free_epoch, b.free_epoch}
    a.allocate("j", Whole("g-0", (0,)))
    assert a.free_epoch in epochs  # taking GPUs keeps the epoch
    with a.branch() as w:
        w.allocate("k", Whole("g-1", (1,)))
        assert w.free_epoch in epochs
    assert a.free_epoch not in epochs  # the rollback freed g-1/gpu1
    epochs.add(a.free_epoch)
    b.allocate("j", Whole("g-0", (0,)))
    b.release("j", Whole("g-0", (0,)))
    assert b.free_epoch not in epochs


@settings(max_examples=examples(600), deadline=None)
@given(cluster=clusters())
def test_slice_ids_round_trip_and_are_unique(cluster: Cluster) -> None:
    ids = list(cluster.slices())
    assert len(set(ids)) == len(ids)
    for sid, name in enumerate(ids):
        assert cluster.slice_index(name) == sid
    for n in cluster.nodes:
        for g in range(n.gpus):
            assert sum(x.startswith(f"{n.name}/gpu{g}/") for x in ids) == sum(
                count for _, count in n.layout(g)
            )


@settings(max_examples=examples(2700), deadline=None)
@given(
    count=st.integers(1, 40),
    gpus=st.integers(1, 8),
    domain=st.none() | st.integers(1, 80),
    leaves=st.integers(1, 4),
)
def test_scaleup_domains_partition_gpus_within_a_leaf(
    count: int, gpus: int, domain: int | None, leaves: int
) -> None:
    per_leaf = -(-count // leaves)
    paths = [(f"l{i // per_leaf}",) for i in range(count)]
    c = Cluster(
        ("leaf", "node"), tuple(expand_group("g", "gb200", gpus, paths, domain_gpus=domain))
    )
    size = gpus if domain is None else max(domain // gpus, 1) * gpus if domain >= gpus else domain
    members = [c.domain_members(d) for d in c.domains]
    assert sum(len(m) for m in members) == c.gpu_count  # every GPU in exactly one domain
    for m in members:
        assert len(m) <= size
        assert len({c.node(node).path for node, _ in m}) == 1  # never straddles two leaves
    if domain is not None and domain <= gpus and gpus % domain == 0:
        assert all(len(m) == domain for m in members)


@settings(max_examples=examples(2700), deadline=None)
@given(st.fractions(min_value=Fraction(1, 10**6), max_value=1))
def test_to_milli_never_gives_less_than_asked_nor_a_whole_unit_more(value: Fraction) -> None:
    milli = to_milli(value)
    assert Fraction(milli, MILLI) >= value
    assert Fraction(milli - 1, MILLI) < value
    assert 1 <= milli <= MILLI
