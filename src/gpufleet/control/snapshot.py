"""The queue snapshot's stored form: columns of numbers, each reason sentence kept once.

Every cycle the reconciler writes the pending queue (in the order the scheduler looked at
it) and each job's reason into one `queue_snapshot` row, and every API worker reads it back
once per cycle, between requests. With 10,000 waiting jobs the first form (a list of
`[id, team]` pairs and a map of id -> sentence) was 1.6 MB of JSON: each sentence differed
from its neighbours only in "N jobs ahead of you", so none repeated. Written every two
seconds, compressed by the database and parsed by each worker in about 18 ms of held GIL,
it showed in the API's p99 (docs/benchmarks.md, issue 23). This form stores the distinct
sentences once and the rest as parallel arrays of integers, about a sixth of the size and
a quarter of the parse time; `Queue` answers position and reason lookups from it.

`order`:   {"teams": [name, ...], "jobs": [id, ...], "team": [index into teams, ...]}
`reasons`: {"texts": [sentence, ...], "text": [index into texts or -1, ...],
            "ahead": [jobs waiting ahead, ...], "waits": [[record, ...], ...]}, aligned
            with `order["jobs"]` except `waits`, aligned with `texts`: each sentence's
            parts as `sched.waits` records (kind, the part's sentence, its numbers), kept
            once per sentence as the sentence is (issue 30: reasons as data). A row
            written before records were stored has no `waits`: its jobs show none.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from gpufleet.sched.decide import reason_parts, with_ahead
from gpufleet.sched.reasons import reason_waits
from gpufleet.sched.waits import numbers_of

NO_REASON = -1


def encode(
    order: Sequence[tuple[int, str]], reasons: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(`order` column, `reasons` column) for the queue `order` ((job id, team), first
    considered first) and the cycle's reasons keyed by job name (`str(id)`)."""
    teams: dict[str, int] = {}
    texts: dict[str, int] = {}
    waits: list[list[dict[str, object]]] = []
    team_at: list[int] = []
    text_at: list[int] = []
    ahead_at: list[int] = []
    for job_id, team in order:
        team_at.append(teams.setdefault(team, len(teams)))
        name = str(job_id)
        if name in reasons:
            base, ahead = reason_parts(reasons, name)
            at = texts.setdefault(base, len(texts))
            if at == len(waits):  # a sentence not seen before: its records, once
                waits.append([numbers_of(w) for w in reason_waits(reasons, name)])
            text_at.append(at)
            ahead_at.append(ahead)
        else:
            text_at.append(NO_REASON)
            ahead_at.append(0)
    return (
        {"teams": list(teams), "jobs": [job_id for job_id, _ in order], "team": team_at},
        {"texts": list(texts), "text": text_at, "ahead": ahead_at, "waits": waits},
    )


@dataclass(frozen=True)
class Queue:
    """A decoded snapshot: the pending jobs in queue order, and their reasons."""

    teams: list[str]
    jobs: list[int]
    team_at: list[int]
    texts: list[str]
    text_at: list[int]
    ahead_at: list[int]
    waits_at: list[list[dict[str, Any]]]  # per text: its parts' records ([] if not stored)

    @classmethod
    def decode(cls, order: Any, reasons: Any) -> Queue:
        """The columns as stored; a row in any other shape reads as an empty queue (the
        next cycle rewrites it), never as an error on a request's path."""
        try:
            queue = cls(
                list(order["teams"]),
                list(order["jobs"]),
                list(order["team"]),
                list(reasons["texts"]),
                list(reasons["text"]),
                list(reasons["ahead"]),
                [list(w) for w in reasons.get("waits", [])],
            )
        except (KeyError, TypeError, AttributeError):
            return cls([], [], [], [], [], [], [])
        n = len(queue.jobs)
        if not (len(queue.team_at) == len(queue.text_at) == len(queue.ahead_at) == n):
            return cls([], [], [], [], [], [], [])
        if len(queue.waits_at) != len(queue.texts):
            return replace(queue, waits_at=[[] for _ in queue.texts])
        return queue

    def __len__(self) -> int:
        return len(self.jobs)

    @cached_property
    def cluster_pos(self) -> dict[int, int]:
        """Job id -> its place in the whole queue (1 = next)."""
        return {job_id: i for i, job_id in enumerate(self.jobs, start=1)}

    @cached_property
    def team_pos(self) -> dict[int, int]:
        """Job id -> its place among its own team's waiting jobs (1 = next)."""
        seen = [0] * len(self.teams)
        out: dict[int, int] = {}
        for job_id, t in zip(self.jobs, self.team_at, strict=True):
            seen[t] += 1
            out[job_id] = seen[t]
        return out

    def reason(self, job_id: int) -> str | None:
        """The cycle's sentence for a waiting job, None when it has none."""
        pos = self.cluster_pos.get(job_id)
        if pos is None or self.text_at[pos - 1] == NO_REASON:
            return None
        return with_ahead(self.texts[self.text_at[pos - 1]], self.ahead_at[pos - 1])

    def waits(self, job_id: int) -> list[dict[str, Any]]:
        """The parts of the cycle's reason for a waiting job as records (kind, sentence,
        numbers; `sched.waits`), [] when it has none or the row predates them."""
        pos = self.cluster_pos.get(job_id)
        if pos is None or self.text_at[pos - 1] == NO_REASON:
            return []
        return self.waits_at[self.text_at[pos - 1]]

    def team_of(self, job_id: int) -> str | None:
        pos = self.cluster_pos.get(job_id)
        return None if pos is None else self.teams[self.team_at[pos - 1]]

    def __iter__(self) -> Iterator[tuple[int, str]]:
        """(job id, team) in queue order."""
        teams = self.teams
        return ((job_id, teams[t]) for job_id, t in zip(self.jobs, self.team_at, strict=True))
