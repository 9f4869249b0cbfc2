"""Reasons as data (issue 30): every pending reason is made of records, and every record
agrees with the numbers it names and with the state the cycle ran on.

Hypothesis over decide() on random small clusters, teams and queues (the worlds of
`test_decide_properties`), under a best-effort, a backfilling and a strict profile:

- the sentence a job gets is exactly the records' sentences joined (nothing is said that
  no record holds);
- each record's numbers are what its sentence says (every number appears in the text);
- each capacity record is true of the state: the free GPUs it names lie between what was
  free after the cycle and before it (a cycle only takes GPUs when nothing is preempted),
  and the shape it names does not fit in what it says is there;
- each quota record names a room smaller than what the job needs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from hypothesis import event, given, settings
from hypothesis import strategies as st

from gpufleet.cluster import Cluster, State
from gpufleet.sched.decide import decide
from gpufleet.sched.quota import QuotaWait
from gpufleet.sched.reasons import Reasons, reason_parts
from gpufleet.sched.waits import (
    CapacityWait,
    NoAccelerator,
    NoEstimates,
    NoQuota,
    PreemptionFutile,
    ReservationAhead,
    ReservedFor,
    ShareWait,
    SliceWait,
    StrictFifo,
    TooLarge,
    UnknownLevel,
    UnknownTeam,
    Wait,
    text_of,
)
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

from .scenarios import A100, H100, PLENTY, cluster, job, leaves, running, team, teams
from .test_decide_properties import worlds

HOUR = 3600.0
SCALE = float(os.environ.get("GPUFLEET_PROPERTY_SCALE", "1"))


def _numbers_in(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"(?<![\w.])\d+(?![\w.])", text)}


def _free(state: State) -> int:
    return state.free_total(H100)


@settings(max_examples=int(300 * SCALE), deadline=None)
@given(worlds(), st.sampled_from(["fifo", "default", "strict-fifo", "slurm-like"]))
def test_every_reason_is_its_records_and_they_hold(
    world: tuple[Cluster, State, list[JobSpec], TeamsSpec, str], profile: str
) -> None:
    cluster, state, pending, teams, _ = world
    free_before = _free(state)
    d = decide(cluster, state, [], pending, teams, profile=profile)
    reasons = d.pending_reasons
    assert isinstance(reasons, Reasons)
    with state.branch() as after:
        for job, placements in d.admitted.items():
            after.allocate(job, *[c for p in placements for c in p.claims()])
        free_after = after.free_total(H100)
    for name in reasons:
        waits = reasons.waits(name)
        assert waits, name
        sentence, _ = reason_parts(reasons, name)
        texts = [text_of(w) for w in waits]
        # the sentence is the records' sentences, joined, and nothing else
        rebuilt = texts[0] + "".join(
            "; " + t.removeprefix("waiting: ").removeprefix("cannot run: ") for t in texts[1:]
        )
        assert sentence == rebuilt
        for w in waits:
            assert not isinstance(w, str), f"{name}: a part without a record: {w!r}"
            event(f"{profile}: {w.kind}")
            _check(
                w,
                name=name,
                pending=d.pending_reasons,
                admitted=d.admitted,
                profile=profile,
                free_before=free_before,
                free_after=free_after,
                preempted=bool(d.preempted),
            )


def _check(
    w: Wait,
    *,
    name: str,
    pending: Mapping[str, str],
    admitted: Mapping[str, object],
    profile: str,
    free_before: int,
    free_after: int,
    preempted: bool,
) -> None:
    """One record against its sentence and the state it was found in."""
    said = _numbers_in(w.text())
    if isinstance(w, CapacityWait):
        assert {w.workers, w.gpus_per_worker} <= said
        if w.case == "single-nodes":
            assert w.room_workers is not None
            assert w.free_gpus is not None
            assert {w.room_workers, w.free_gpus} <= said
            assert w.room_workers < w.workers  # it would fit otherwise
            assert w.free_gpus <= free_before
            # GPUs a backfill reservation holds are counted free (they are idle) and named
            assert 0 <= w.reserved_gpus <= w.free_gpus
            if w.reserved_gpus and w.reserved_gpus < w.free_gpus:
                assert w.reserved_gpus in said
            if not preempted:  # the cycle only took GPUs after the record was made
                assert w.free_gpus >= free_after
        else:
            assert w.level is not None
            assert w.most_free_in_level is not None
            assert w.most_free_in_level in said
            if w.case == "group-short":
                assert w.most_free_in_level < w.needed_gpus
            else:
                assert w.most_free_in_level >= w.needed_gpus
            assert w.most_free_in_level <= free_before
    elif isinstance(w, QuotaWait):
        assert w.need_milli > w.room_milli
    elif isinstance(w, ReservedFor):
        assert {w.gpus, w.waits_for_jobs} <= said
        assert w.start_in_s >= 0
    elif isinstance(w, ReservationAhead):
        assert w.job in pending or w.job in admitted
        assert w.gpus in said
    elif isinstance(w, StrictFifo):
        assert w.blocking_job in pending  # the blocker waits too
        assert w.blocking_job != name
    elif isinstance(w, ShareWait):
        assert w.milli in said
    elif isinstance(w, NoQuota | UnknownTeam | UnknownLevel):
        assert w.text().startswith("cannot run: ")
    elif isinstance(w, TooLarge):
        assert w.text().startswith("cannot run: ")
        assert {w.workers, w.gpus_per_worker, w.most_workers} <= said
        assert w.most_workers < w.workers
    else:
        assert isinstance(w, SliceWait | NoAccelerator | NoEstimates | PreemptionFutile), w
    assert not {"kind", "text"} & set(w.numbers())


def test_records_word_the_sentences_the_plugins_wrote() -> None:
    """The records reproduce the scheduler's established wording (the simulator's
    fingerprints hash it): one of each capacity case, spot note included."""
    assert CapacityWait("single-nodes", "h100", 2, 8, room_workers=1, free_gpus=12).text() == (
        "waiting: room for 1 of 2 workers of 8 h100 GPUs on single nodes (12 free h100 GPUs in all)"
    )
    assert CapacityWait(
        "group-short", "h100", 4, 8, level="leaf", most_free_in_level=24, spot_excluded=True
    ).text() == (
        "waiting: no leaf has 32 free h100 GPUs for 4×8 (most free in one leaf: 24)"
        "; spot nodes excluded (this job may not run on spot)"
    )
    assert CapacityWait(
        "fragmented", "h100", 2, 8, level="leaf", most_free_in_level=20, most_room_in_level=1
    ).text() == (
        "waiting: no leaf can hold 2×8 h100 GPUs with each worker on one node (free GPUs are "
        "fragmented; most free in one leaf: 20; at most 1 of 2 workers fit in one leaf)"
    )
    assert ReservationAhead("12", 16, "h100", 30.0).text() == (
        "a 16-GPU reservation for job '12' starts now"
    )
    assert ReservedFor(8, "h100", ("a", "b", "c", "d", "e"), 7200.0, 1).text() == (
        "reserved 8 h100 GPUs on a, b, c, d and 1 more from ~2 h (when 1 running job is "
        "expected to end)"
    )


def test_a_reservation_and_the_job_behind_it_as_records() -> None:
    """EASY backfill: the blocked gang's record is its reservation (GPUs, nodes, when), and
    the job that may not delay it names that reservation and its job."""
    c, state = cluster(*leaves(2))
    held = [
        JobSpec.model_validate(
            {
                "name": "r",
                "team": "research",
                "gpus": 4,
                "state": "running",
                "started_s": 0.0,
                "runtime_estimate_s": 3 * HOUR,
                "placement": [{"node": "h-0", "gpus": [0, 1, 2, 3]}],
            }
        )
    ]
    pending = [
        job("big", gpus=8, workers=2, submitted_s=1),
        job("long", gpus=4, submitted_s=2, runtime_estimate_s=10 * HOUR),
    ]
    d = decide(c, state, held, pending, PLENTY, profile="slurm-like", now_s=2 * HOUR)
    reasons = d.pending_reasons
    assert isinstance(reasons, Reasons)
    big = reasons.waits("big")
    reserved = [w for w in big if isinstance(w, ReservedFor)]
    assert len(reserved) == 1
    (r,) = reserved
    assert (r.gpus, r.accelerator, sorted(r.nodes)) == (16, H100, ["h-0", "h-1"])
    assert r.start_in_s == HOUR  # the running job ends at 3 h; now is 2 h
    assert r.waits_for_jobs == 1
    assert isinstance(big[0], CapacityWait)  # the capacity it lacks comes first
    long_ = reasons.waits("long")
    # the 12 idle GPUs are free, all of them held for big's reservation (it said "0 free")
    capacity = long_[0]
    assert isinstance(capacity, CapacityWait)
    assert (capacity.free_gpus, capacity.reserved_gpus) == (12, 12)
    assert "(12 free h100-sxm5-80gb GPUs in all, all of them held for a reservation)" in (
        text_of(capacity)
    )
    ahead = [w for w in long_ if isinstance(w, ReservationAhead)]
    assert [(w.job, w.gpus, w.start_in_s) for w in ahead] == [("big", 16, HOUR)]
    assert reason_parts(reasons, "long")[0] == "; ".join(
        [text_of(long_[0])] + [text_of(w) for w in long_[1:]]
    ).replace("; waiting: ", "; ")


def test_a_share_no_node_offers_cannot_run() -> None:
    """A fraction request where no node takes fractions never runs: it said "no GPU has
    250/1000 free to share", a wait for a share nobody offers."""
    c, state = cluster(*leaves(1))
    d = decide(c, state, [], [job("frac", gpu_fraction=0.25)], PLENTY)
    assert isinstance(d.pending_reasons, Reasons)
    (share,) = d.pending_reasons.waits("frac")
    assert isinstance(share, ShareWait)
    assert share.unshared
    assert d.pending_reasons["frac"].startswith(
        "cannot run: no h100-sxm5-80gb GPU is shared by fractions here"
    )
    c, state = cluster(*leaves(1, fractions=True))
    full = [job(f"f{i}", gpu_fraction=0.5, submitted_s=i) for i in range(17)]
    d = decide(c, state, [], full, PLENTY, profile="fifo")
    assert d.pending_reasons["f16"].startswith("waiting: no h100-sxm5-80gb GPU has 500/1000")


def test_a_job_that_waits_on_one_accelerator_does_not_open_with_cannot_run() -> None:
    """A job accepting two accelerators, its team without quota for one and the other
    full, waits for the full one: the sentence opens with the wait, the quota follows."""
    c, state = cluster(*leaves(1), *leaves(1, acc=A100, group="a"))
    quota = teams(team("research", {H100: 8}))
    held = [running("r", "h-0", list(range(8)), started_s=0.0)]
    d = decide(c, state, held, [job("both", gpus=8, accelerators=[A100, H100])], quota)
    sentence = d.pending_reasons["both"]
    assert sentence.startswith("waiting: "), sentence
    assert "team research has no quota for a100-sxm4-80gb" in sentence
    only = decide(c, state, held, [job("a", gpus=8, accelerators=[A100])], quota)
    assert only.pending_reasons["a"].startswith("cannot run: team research has no quota")


def test_a_share_no_gpu_takes_cannot_run_even_when_the_quota_is_full() -> None:
    """The quota check came first: with the team's quota in use, a 0.25 share on a cluster
    where no node takes fractions read "waiting: team research quota 8/8 ..." for ever."""
    c, state = cluster(*leaves(1))
    quota = teams(team("research", {H100: 8}))
    held = [running("r", "h-0", list(range(8)), started_s=0.0)]
    d = decide(c, state, held, [job("frac", gpu_fraction=0.25)], quota)
    assert d.pending_reasons["frac"].startswith(
        "cannot run: no h100-sxm5-80gb GPU is shared by fractions here"
    )
    assert not d.preempted


def test_a_slice_where_no_gpu_is_mig_enabled_cannot_run() -> None:
    """It read "waiting: no h100 GPU is cut into 1g.10gb MIG slices", a wait for a re-cut no
    GPU can have: a re-layout only re-cuts GPUs already MIG-enabled."""
    c, state = cluster(*leaves(1))
    d = decide(c, state, [], [job("slice", mig_profile="1g.10gb")], PLENTY)
    assert d.pending_reasons["slice"].startswith(
        "cannot run: no h100-sxm5-80gb GPU is MIG-enabled here, so no 1g.10gb slice exists"
    )
