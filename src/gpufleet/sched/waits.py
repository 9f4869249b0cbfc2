"""Why a job waits, as numbers: one frozen record per kind, worded by its own `text()`.

Issue 30 ("reasons as data"): a pending reason used to be a sentence built where the
scheduler found it, so nothing could check it against the numbers it named and a reader
could not ask which resource, how much was needed, how much was free or which job blocked.
Each record here holds exactly the numbers its sentence names, and the sentence is made
from them and from nothing else, so the two cannot disagree; the API and the portal show
the same record as a table (`numbers()`).

The wording is the scheduler's established one (the simulator's fingerprints hash it): a
record's `text()` equals the sentence the plugin used to build by hand. Quota waits are
`sched.quota.QuotaWait`, which predates this module and follows the same protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol

SPOT_NOTE = "; spot nodes excluded (this job may not run on spot)"
WOULD_NOT_HELP = "preempting the jobs it may evict would not free enough"


class Wait(Protocol):
    """One part of a pending reason: its kind, its sentence, and the numbers behind it."""

    kind: ClassVar[str]

    def text(self) -> str: ...

    def numbers(self) -> dict[str, object]: ...


def eta_text(seconds: float) -> str:
    """A coarse, honest duration: "~40 min", "~3.5 h", "~2 d"; "now" under a minute."""
    if seconds < 60:
        return "now"
    if seconds < 5400:
        return f"~{round(seconds / 60)} min"
    if seconds < 172_800:
        return f"~{seconds / 3600:.2g} h"
    return f"~{seconds / 86400:.2g} d"


CapacityCase = Literal["single-nodes", "group-short", "fragmented"]


@dataclass(frozen=True, slots=True)
class CapacityWait:
    """Not enough free whole GPUs where the gang may go.

    `single-nodes`: with no required topology level, `room_workers` workers of
    `gpus_per_worker` fit on single nodes while `workers` are needed; `free_gpus` is the
    flavor's free total. `group-short`: no group of the required `level` has the
    `workers x gpus_per_worker` free; `most_free_in_level` is the best group's count.
    `fragmented`: some group has that many free, but not on few enough nodes.
    `most_room_in_level` (placements that compute it) is how many workers the best group
    could take. `reserved_gpus` idle GPUs are held for an EASY backfill reservation of an
    earlier job: not this job's unless it ends before the reservation starts (saying "0 free"
    beside idle GPUs read as a wrong count). Single nodes count them in `free_gpus`; a group
    case names them apart (its most-free figure is what the job may use)."""

    kind: ClassVar[str] = "capacity"
    case: CapacityCase
    accelerator: str
    workers: int
    gpus_per_worker: int
    room_workers: int | None = None
    free_gpus: int | None = None
    level: str | None = None
    most_free_in_level: int | None = None
    most_room_in_level: int | None = None
    spot_excluded: bool = False
    reserved_gpus: int = 0

    @property
    def needed_gpus(self) -> int:
        return self.workers * self.gpus_per_worker

    def text(self) -> str:
        acc, shape = self.accelerator, f"{self.workers}×{self.gpus_per_worker}"
        if self.case == "single-nodes":
            why = (
                f"waiting: room for {self.room_workers} of {self.workers} workers of "
                f"{self.gpus_per_worker} {acc} GPUs on single nodes ({self.free_gpus} free "
                f"{acc} GPUs in all{self._reserved_note()})"
            )
        else:
            level = self.level
            close = f"most free in one {level}: {self.most_free_in_level}"
            if self.most_room_in_level is not None:
                close += (
                    f"; at most {self.most_room_in_level} of {self.workers} workers fit in "
                    f"one {level}"
                )
            if self.reserved_gpus:  # idle, not free to it: "most free: 0" read as none idle
                close += f"; {self.reserved_gpus} idle {acc} GPUs held for a reservation"
            if self.case == "fragmented":
                why = (
                    f"waiting: no {level} can hold {shape} {acc} GPUs with each worker on one "
                    f"node (free GPUs are fragmented; {close})"
                )
            else:
                need = self.needed_gpus
                why = f"waiting: no {level} has {need} free {acc} GPUs for {shape} ({close})"
        return why + (SPOT_NOTE if self.spot_excluded else "")

    def _reserved_note(self) -> str:
        r = self.reserved_gpus
        if not r:
            return ""
        return f", {'all' if r == self.free_gpus else r} of them held for a reservation"

    def numbers(self) -> dict[str, object]:
        return {
            "case": self.case,
            "accelerator": self.accelerator,
            "needed_gpus": self.needed_gpus,
            "workers": self.workers,
            "gpus_per_worker": self.gpus_per_worker,
            "room_workers": self.room_workers,
            "free_gpus": self.free_gpus,
            "level": self.level,
            "most_free_in_level": self.most_free_in_level,
            "most_room_in_level": self.most_room_in_level,
            "spot_excluded": self.spot_excluded,
            "reserved_gpus": self.reserved_gpus,
        }


SliceCase = Literal["none-free", "not-cut", "no-mig", "spot-only"]


@dataclass(frozen=True, slots=True)
class SliceWait:
    """No free MIG slice of the profile the job may use."""

    kind: ClassVar[str] = "mig-slice"
    case: SliceCase
    accelerator: str
    profile: str

    def text(self) -> str:
        acc, profile = self.accelerator, self.profile
        if self.case == "spot-only":
            return (
                f"waiting: the free {profile} slices on {acc} are on spot capacity, which "
                "this job may not use"
            )
        if self.case == "no-mig":
            return (
                f"cannot run: no {acc} GPU is MIG-enabled here, so no {profile} slice exists "
                "(enable MIG on some, or ask for whole GPUs or a fraction)"
            )
        if self.case == "not-cut":
            return f"waiting: no {acc} GPU is cut into {profile} MIG slices"
        return f"waiting: no free {profile} MIG slice on {acc}"

    def numbers(self) -> dict[str, object]:
        return {"case": self.case, "accelerator": self.accelerator, "profile": self.profile}


@dataclass(frozen=True, slots=True)
class ShareWait:
    """No GPU has the fraction free that the job shares (`milli` thousandths); with
    `unshared`, no GPU of the accelerator takes fractions at all, so the job never runs on it
    (it read as a wait for a share that no node offers)."""

    kind: ClassVar[str] = "gpu-share"
    accelerator: str
    milli: int
    spot_only: bool = False
    unshared: bool = False

    def text(self) -> str:
        acc, share = self.accelerator, f"{self.milli}/1000"
        if self.unshared:
            return (
                f"cannot run: no {acc} GPU is shared by fractions here (no {acc} node has "
                f"fractions: true), so a {share} share never fits"
            )
        if self.spot_only:
            return (
                f"waiting: the {acc} GPUs with {share} free to share are spot capacity, which "
                "this job may not use"
            )
        return f"waiting: no {acc} GPU has {share} free to share"

    def numbers(self) -> dict[str, object]:
        return {
            "accelerator": self.accelerator,
            "needed_gpus": self.milli / 1000,
            "spot_only": self.spot_only,
            "unshared": self.unshared,
        }


@dataclass(frozen=True, slots=True)
class ReservedFor:
    """EASY backfill: this job (first blocked by capacity) holds a reservation."""

    kind: ClassVar[str] = "reserved"
    gpus: int
    accelerator: str
    nodes: tuple[str, ...]
    start_in_s: float
    waits_for_jobs: int

    def text(self) -> str:
        nodes = self.nodes
        shown = ", ".join(nodes[:4]) + (f" and {len(nodes) - 4} more" if len(nodes) > 4 else "")
        n = self.waits_for_jobs
        return (
            f"reserved {self.gpus} {self.accelerator} GPUs on {shown} from "
            f"{eta_text(self.start_in_s)} (when {n} running "
            f"job{'s are' if n != 1 else ' is'} expected to end)"
        )

    def numbers(self) -> dict[str, object]:
        return {
            "accelerator": self.accelerator,
            "needed_gpus": self.gpus,
            "nodes": list(self.nodes),
            "start_in_s": self.start_in_s,
            "waits_for_jobs": self.waits_for_jobs,
        }


@dataclass(frozen=True, slots=True)
class ReservationAhead:
    """Another job's reservation holds GPUs of this flavor; this job does not end before it."""

    kind: ClassVar[str] = "reservation"
    job: str
    gpus: int
    accelerator: str
    start_in_s: float

    def text(self) -> str:
        when = eta_text(self.start_in_s)
        # "starts in now" read oddly (issue 30): under a minute it starts now
        return f"a {self.gpus}-GPU reservation for job '{self.job}' starts " + (
            "now" if when == "now" else f"in {when}"
        )

    def numbers(self) -> dict[str, object]:
        return {
            "accelerator": self.accelerator,
            "blocking_job": self.job,
            "reserved_gpus": self.gpus,
            "start_in_s": self.start_in_s,
        }


@dataclass(frozen=True, slots=True)
class NoEstimates:
    """EASY backfill found no reservation: no prefix of the running jobs' estimated ends
    frees enough GPUs. Mostly because holders have no runtime estimate, but not only (the
    holders of a MIG-cut or down node's GPUs): the sentence says what the search knows and
    no more (it once said "the jobs holding these GPUs have no runtime estimates" where
    none held any)."""

    kind: ClassVar[str] = "no-reservation"

    def text(self) -> str:
        return (
            "no reservation yet: the running jobs' estimated ends never free enough of these "
            "GPUs (a job without a runtime estimate never ends, as far as a reservation knows)"
        )

    def numbers(self) -> dict[str, object]:
        return {}


@dataclass(frozen=True, slots=True)
class StrictFifo:
    """Strict FIFO: an earlier job that cannot start blocks every job behind it."""

    kind: ClassVar[str] = "strict-fifo"
    blocking_job: str

    def text(self) -> str:
        return f"waiting: strict FIFO, job '{self.blocking_job}' ahead of it cannot start yet"

    def numbers(self) -> dict[str, object]:
        return {"blocking_job": self.blocking_job}


@dataclass(frozen=True, slots=True)
class PreemptionFutile:
    """The profile may evict for this job, but evicting what it may would not free enough."""

    kind: ClassVar[str] = "preemption"

    def text(self) -> str:
        return WOULD_NOT_HELP

    def numbers(self) -> dict[str, object]:
        return {}


@dataclass(frozen=True, slots=True)
class NoAccelerator:
    """No accelerator of the cluster fits the request: it never runs here as it is."""

    kind: ClassVar[str] = "no-accelerator"
    accepts: tuple[str, ...]

    def text(self) -> str:
        accepts = ", ".join(self.accepts) or "any"
        return (
            f"cannot run here: no accelerator of this cluster fits the request (accepts: {accepts})"
        )

    def numbers(self) -> dict[str, object]:
        return {"accepts": list(self.accepts)}


@dataclass(frozen=True, slots=True)
class NoQuota:
    """The team has no quota for this accelerator: the job never runs on it."""

    kind: ClassVar[str] = "no-quota"
    team: str
    accelerator: str

    def text(self) -> str:
        return f"cannot run: team {self.team} has no quota for {self.accelerator}"

    def numbers(self) -> dict[str, object]:
        return {"team": self.team, "accelerator": self.accelerator}


@dataclass(frozen=True, slots=True)
class UnknownTeam:
    """The job's team is not in the teams file (which lists `known`)."""

    kind: ClassVar[str] = "unknown-team"
    team: str
    known: tuple[str, ...]

    def text(self) -> str:
        return f"cannot run: team {self.team} is not in the teams file ({', '.join(self.known)})"

    def numbers(self) -> dict[str, object]:
        return {"team": self.team}  # not the other teams' names: a member may read it


@dataclass(frozen=True, slots=True)
class UnknownLevel:
    """The job requires a topology level this cluster does not have."""

    kind: ClassVar[str] = "unknown-level"
    level: str
    known: tuple[str, ...]

    def text(self) -> str:
        known = ", ".join(self.known)
        return f"cannot run: topology level '{self.level}' is not in this cluster ({known})"

    def numbers(self) -> dict[str, object]:
        return {"level": self.level, "levels": list(self.known)}


@dataclass(frozen=True, slots=True)
class TooLarge:
    """A whole-GPU gang the cluster could never hold, even empty (`sched.too_large`): at
    most `most_workers` workers of `gpus_per_worker` GPUs fit on its `accelerator` nodes (in
    one group of `level` when the job requires one; spot nodes aside when excluded)."""

    kind: ClassVar[str] = "too-large"
    accelerator: str
    workers: int
    gpus_per_worker: int
    most_workers: int
    spot_excluded: bool = False
    level: str | None = None
    mig_sliced: bool = False  # some of those nodes' GPUs are cut into MIG slices

    def text(self) -> str:
        acc, per = self.accelerator, self.gpus_per_worker
        sliced = (
            f"; {acc} GPUs cut into MIG slices take only slice requests" if self.mig_sliced else ""
        )
        if self.level is None:
            where = f"this cluster's {acc} nodes hold at most {self.most_workers} such workers"
        else:
            where = f"no {self.level} of this cluster holds more than {self.most_workers}"
        return (
            f"cannot run: {self.workers} workers of {per} {acc} GPUs, but {where} (each "
            f"worker on one node){sliced}" + (SPOT_NOTE if self.spot_excluded else "")
        )

    def numbers(self) -> dict[str, object]:
        return {
            "accelerator": self.accelerator,
            "needed_gpus": self.workers * self.gpus_per_worker,
            "workers": self.workers,
            "gpus_per_worker": self.gpus_per_worker,
            "most_workers": self.most_workers,
            "level": self.level,
            "spot_excluded": self.spot_excluded,
            "mig_sliced": self.mig_sliced,
        }


PREEMPTION_FUTILE = PreemptionFutile()


def text_of(part: str | Wait) -> str:
    """A reason part's sentence: a record words itself, a plain string (a plugin that gives
    no record) is its own sentence."""
    return part if isinstance(part, str) else part.text()


def numbers_of(part: str | Wait) -> dict[str, object]:
    """What the API and the portal show of one part: kind, sentence, and its numbers."""
    if isinstance(part, str):
        return {"kind": "other", "text": part}
    return {"kind": part.kind, "text": part.text(), **part.numbers()}
