"""A pending job's reason, part by part, as the job page's table (issue 30: reasons as data).

The rows are made from the records the scheduler stored with its sentence
(`sched.waits`, through the API's `JobOut.waits`), never by reading the sentence back, so
the table and the sentence above it name the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufleet.api.schemas import WaitOut
from gpufleet.sched.waits import eta_text

KIND_LABELS = {
    "capacity": "Free GPUs",
    "quota": "Team quota",
    "mig-slice": "MIG slice",
    "gpu-share": "GPU share",
    "reserved": "Its reservation",
    "reservation": "Another job's reservation",
    "no-reservation": "No reservation",
    "strict-fifo": "Strict FIFO",
    "preemption": "Preemption",
    "no-accelerator": "No accelerator fits",
    "no-quota": "No quota",
    "quota-never": "Quota too small",
    "unknown-team": "Unknown team",
    "unknown-level": "Unknown topology level",
    "too-large": "Larger than the cluster",
}


@dataclass(frozen=True)
class WaitRow:
    kind: str
    resource: str
    needs: str
    has: str  # what there is of it now (free, room, when)
    blocking: str
    text: str


def _gpus(value: Any) -> str:
    if not isinstance(value, int | float):
        return "—"
    return f"{value:g}"


def _capacity(n: dict[str, Any]) -> tuple[str, str, str]:
    acc, workers, per = n.get("accelerator", ""), n.get("workers"), n.get("gpus_per_worker")
    needs = f"{_gpus(n.get('needed_gpus'))} ({workers} × {per}, each worker on one node)"
    if n.get("case") == "single-nodes":
        has = (
            f"room for {n.get('room_workers')} of {workers} workers; "
            f"{_gpus(n.get('free_gpus'))} free in all"
        )
        if n.get("reserved_gpus"):  # idle, but held for an earlier job's reservation
            has += f", {_gpus(n.get('reserved_gpus'))} of them held for a reservation"
    else:
        level = n.get("level")
        has = f"most free in one {level}: {_gpus(n.get('most_free_in_level'))}"
        if n.get("most_room_in_level") is not None:
            has += f"; {n['most_room_in_level']} of {workers} workers fit in one {level}"
        if n.get("reserved_gpus"):
            has += f"; {_gpus(n.get('reserved_gpus'))} idle held for a reservation"
        if n.get("case") == "fragmented":
            has += " (fragmented)"
    if n.get("spot_excluded"):
        has += "; spot nodes excluded"
    return f"{acc} GPUs", needs, has


def _quota(n: dict[str, Any]) -> tuple[str, str, str]:
    has = f"holds {_gpus(n.get('used_gpus'))}, guaranteed {_gpus(n.get('guaranteed_gpus'))}; "
    has += f"room {_gpus(n.get('room_gpus'))}"
    held = n.get("guarantee_held_by_others_gpus")
    others = f", {_gpus(held)} of it held by other teams" if held else ""
    if n.get("case") == "cohort-short":
        has += (
            f" ({_gpus(n.get('free_of_guarantee_gpus'))} free of its guarantee{others}, "
            f"{_gpus(n.get('cohort_lends_gpus'))} lent by cohort {n.get('cohort')})"
        )
    elif n.get("case") == "guarantee-lent":
        has += f" ({_gpus(held)} of its guarantee held by other teams of cohort {n.get('cohort')})"
    elif n.get("case") == "capped":
        has += f" (capped at {n.get('cap_gpus')})"
    resource = f"team {n.get('team')}, {n.get('accelerator')}"
    return resource, _gpus(n.get("needed_gpus")), has


def _dict(value: Any) -> dict[str, Any]:
    """A record's mapping of numbers, {} where the stored row has none (an older server's)."""
    return value if isinstance(value, dict) else {}


def wait_row(w: WaitOut) -> WaitRow:
    """One part of the reason as a table row: what it concerns, what the job needs of it,
    what there is, and the job it waits behind."""
    n = w.numbers
    kind = KIND_LABELS.get(w.kind, "Other")
    resource, needs, has = w.accelerator or "—", _gpus(w.needed_gpus), "—"
    if w.kind == "capacity":
        resource, needs, has = _capacity(n)
    elif w.kind == "quota":
        resource, needs, has = _quota(n)
    elif w.kind == "mig-slice":
        resource, needs = f"{n.get('profile')} slice of {n.get('accelerator')}", "1 slice"
        has = {
            "spot-only": "free ones on spot only",
            "not-cut": "no GPU cut into it",
            "no-mig": "no GPU MIG-enabled",
        }.get(str(n.get("case")), "none free")
    elif w.kind == "gpu-share":
        needed = w.needed_gpus or 0.0
        needs = f"{round(needed * 1000)}/1000 of a GPU ({needed:g})"
        has = (
            "no GPU takes fractions here"
            if n.get("unshared")
            else "free only on spot"
            if n.get("spot_only")
            else "no GPU has it free"
        )
    elif w.kind == "reserved":
        nodes = [str(x) for x in n.get("nodes") or []]
        shown = ", ".join(nodes[:4]) + (f" and {len(nodes) - 4} more" if len(nodes) > 4 else "")
        ending = n.get("waits_for_jobs")
        has = (
            f"from {eta_text(float(n.get('start_in_s', 0)))} on {shown or 'no node'}, "
            f"when {ending} running job{'s' if ending != 1 else ''} end"
        )
    elif w.kind == "reservation":
        when = eta_text(float(n.get("start_in_s", 0)))
        needs, has = "—", f"{_gpus(n.get('reserved_gpus'))} GPUs reserved from {when}"
    elif w.kind == "no-reservation":
        has = "the running jobs give no runtime estimates"
    elif w.kind == "preemption":
        has = "evicting what it may would not free enough"
    elif w.kind == "no-accelerator":
        has = "accepts " + (", ".join(str(a) for a in n.get("accepts") or []) or "any")
    elif w.kind == "no-quota":
        has = f"team {n.get('team')} has no quota for it"
    elif w.kind == "quota-never":
        most = _dict(n.get("most_gpus"))
        made = _dict(n.get("made_of"))
        resource = f"team {n.get('team')}, " + (", ".join(str(a) for a in most) or "—")
        has = (
            "; ".join(
                f"{a}: no quota" if m is None else f"{a}: at most {_gpus(m)} ({made.get(a, '')})"
                for a, m in most.items()
            )
            or "—"
        )
    elif w.kind == "unknown-team":
        resource, has = f"team {n.get('team')}", "not in the teams file"
    elif w.kind == "unknown-level":
        levels = ", ".join(str(x) for x in n.get("levels") or [])
        resource, has = f"topology level {n.get('level')}", f"the cluster's levels: {levels}"
    elif w.kind == "too-large":
        workers, per, level = n.get("workers"), n.get("gpus_per_worker"), n.get("level")
        needs = f"{_gpus(w.needed_gpus)} ({workers} × {per}, each worker on one node)"
        where = f"one {level}" if level else "the cluster"
        has = f"{where} holds at most {n.get('most_workers')} such workers, even empty"
        if n.get("spot_excluded"):
            has += " (spot nodes excluded)"
    return WaitRow(kind, resource, needs, has, w.blocking_job or "—", w.text)


def wait_rows(waits: list[WaitOut]) -> list[WaitRow]:
    return [wait_row(w) for w in waits]
