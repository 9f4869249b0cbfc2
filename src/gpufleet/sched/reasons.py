"""Pending reasons as `decide()` hands them out: one sentence per waiting job, worded when read.

Apart from `decide` (its cycle only notes the parts) so the control plane, which stores a
sentence and its "jobs ahead" count apart, reads the one wording of both from here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from gpufleet.sched.waits import Wait, text_of


class Reasons(Mapping[str, str]):
    """Pending job -> the sentence saying what binds it, worded when read.

    A cycle over a long queue leaves hundreds of jobs waiting, each with a sentence; the
    control plane reads each once, a simulator none. The parts of each sentence are kept
    (shared, never changed after they are noted) and joined when read.
    """

    __slots__ = ("parts",)

    def __init__(self) -> None:
        # job -> (parts of its sentence, jobs ahead); `_Cycle.answered` writes it directly
        self.parts: dict[str, tuple[list[str | Wait], int]] = {}

    def note(self, job: str, why: list[str | Wait], ahead: int) -> None:
        self.parts[job] = (why, ahead)

    def waits(self, job: str) -> list[str | Wait]:
        """The parts of the job's sentence as records (plain strings where a plugin gave no
        record), each once, in the sentence's order."""
        return _distinct(self.parts[job][0])

    def __getitem__(self, job: str) -> str:
        why, ahead = self.parts[job]
        return _sentence(why, ahead)

    def __contains__(self, job: object) -> bool:
        return job in self.parts

    def __iter__(self) -> Iterator[str]:
        return iter(self.parts)

    def __len__(self) -> int:
        return len(self.parts)


NEVER = "cannot run"


def _distinct(why: Sequence[str | Wait]) -> list[str | Wait]:
    """Each part once (two records that word the same sentence count as one), what only
    waits before what can never run: a job that accepts two accelerators, one without quota
    for its team and one full, waits for the full one, and its sentence must not open with
    "cannot run"."""
    seen: dict[str, str | Wait] = {}
    for part in why:
        seen.setdefault(text_of(part), part)
    never = [t for t in seen if t.startswith(NEVER)]
    if not never or len(never) == len(seen):
        return list(seen.values())
    return [p for t, p in seen.items() if not t.startswith(NEVER)] + [seen[t] for t in never]


def _sentence(why: Sequence[str | Wait], ahead: int) -> str:
    parts = [text_of(p) for p in _distinct(why)] or ["waiting"]
    text = parts[0] + "".join(
        "; " + p.removeprefix("waiting: ").removeprefix("cannot run: ") for p in parts[1:]
    )
    return with_ahead(text, ahead)


def with_ahead(reason: str, ahead: int) -> str:
    """A pending reason with the count of jobs still waiting ahead of the job, the one
    wording of it (the control plane stores the two apart and joins them when read). A job
    that cannot run has no place in line: counting the jobs ahead of it read as a wait."""
    if ahead and not reason.startswith(NEVER):
        return f"{reason}; {ahead} job{'s' if ahead > 1 else ''} ahead of you"
    return reason


def reason_waits(reasons: Mapping[str, str], job: str) -> list[str | Wait]:
    """`reasons[job]`'s parts as records where `decide` made them (else the sentence)."""
    if isinstance(reasons, Reasons):
        return reasons.waits(job)
    return [reasons[job]]


def reason_parts(reasons: Mapping[str, str], job: str) -> tuple[str, int]:
    """`reasons[job]` as (its sentence without the jobs-ahead count, that count), so that a
    long queue's sentences, which differ only in the count, are kept once each: a reader
    joins them with `with_ahead`. Reasons not made by `decide` have no count apart."""
    if isinstance(reasons, Reasons):
        why, ahead = reasons.parts[job]
        return _sentence(why, 0), ahead
    return reasons[job], 0
