"""The queue snapshot's stored form reads back exactly what the cycle decided."""

from __future__ import annotations

import json
from sched.scenarios import PLENTY, cluster, job, leaves

from hypothesis import given
from hypothesis import strategies as st

from gpufleet.control.snapshot import Queue, encode
from gpufleet.sched.decide import decide, reason_parts, with_ahead


def _decided() -> tuple[list[tuple[int, str]], dict[str, str], Queue]:
    c, state = cluster(*leaves(1))
    pending = [
        job(str(i), gpus=8, submitted_s=i, team="prod" if i % 2 else "research") for i in range(6)
    ]
    d = decide(c, state, [], pending, PLENTY, profile="fifo")
    order = [(int(n), next(j.team for j in pending if j.name == n)) for n in d.considered]
    order = [o for o in order if str(o[0]) not in d.admitted]
    columns = encode(order, d.pending_reasons)
    stored = json.loads(json.dumps(columns))  # as the store's JSON column gives it back
    return order, dict(d.pending_reasons), Queue.decode(*stored)


def test_every_reason_position_and_team_reads_back_as_decided() -> None:
    order, reasons, queue = _decided()
    assert len(order) == 5
    assert len(queue) == 5
    assert list(queue) == order
    per_team: dict[str, int] = {}
    for pos, (job_id, team) in enumerate(order, start=1):
        per_team[team] = per_team.get(team, 0) + 1
        assert queue.cluster_pos[job_id] == pos
        assert queue.team_pos[job_id] == per_team[team]
        assert queue.team_of(job_id) == team
        assert queue.reason(job_id) == reasons[str(job_id)]
    assert "4 jobs ahead of you" in (queue.reason(order[-1][0]) or "")
    assert len(queue.texts) == 1  # five sentences that differ only in the count, kept once


def test_the_count_ahead_is_kept_apart_from_the_sentence() -> None:
    c, state = cluster(*leaves(1))
    pending = [job("a", gpus=8), job("b", gpus=8, submitted_s=1), job("c", gpus=8, submitted_s=2)]
    d = decide(c, state, [], pending, PLENTY, profile="fifo")
    base, ahead = reason_parts(d.pending_reasons, "c")
    assert (ahead, "ahead" in base) == (1, False)
    assert with_ahead(base, ahead) == d.pending_reasons["c"]
    assert reason_parts({"x": "waiting: y"}, "x") == ("waiting: y", 0)  # not made by decide


def test_jobs_without_a_reason_and_unknown_jobs() -> None:
    queue = Queue.decode(*encode([(7, "cv"), (8, "ml")], {"8": "waiting: room"}))
    assert queue.reason(7) is None
    assert queue.reason(8) == "waiting: room"
    assert queue.reason(9) is None
    assert queue.team_of(9) is None


@given(st.sampled_from([None, [], {}, [[1, "cv"]], {"teams": ["cv"], "jobs": [1], "team": []}]))
def test_a_row_in_another_shape_reads_as_an_empty_queue(order: object) -> None:
    """A row written by an earlier version ([id, team] pairs, a map of reasons) or damaged
    reads as no queue until the next cycle rewrites it: never an error on a request."""
    queue = Queue.decode(order, {"1": "waiting"})
    assert len(queue) == 0
    assert list(queue) == []
    assert queue.reason(1) is None


def test_each_reason_reads_back_with_its_records() -> None:
    """Issue 30: the stored records are the cycle's, kept once per sentence, and a row
    written before records were stored still reads (its jobs show no records)."""
    order, reasons, queue = _decided()
    for job_id, _ in order:
        (record,) = queue.waits(job_id)
        assert record["kind"] == "capacity"
        assert record["text"] == (queue.reason(job_id) or "").split("; ")[0]
        assert record["needed_gpus"] == 8
        assert record["free_gpus"] == 0  # the one 8-GPU leaf went to the first job
    assert len(queue.waits_at) == len(queue.texts) == 1
    assert queue.waits(999) == []
    old_order, old_reasons = encode(order, reasons)
    del old_reasons["waits"]
    old = Queue.decode(old_order, old_reasons)
    assert old.reason(order[0][0]) == queue.reason(order[0][0])
    assert old.waits(order[0][0]) == []
