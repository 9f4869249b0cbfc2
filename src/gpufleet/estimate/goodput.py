"""Goodput: the wall-clock and GPU-hours a training run takes once failures are counted.

A run that would take `ideal_time_s` on a cluster that never fails takes
longer on a real one: it stops to write checkpoints, and every interruption
throws away the work since the last durable checkpoint and costs a restart.
Those costs grow with the GPU count, because each GPU can fail on its own.
This module turns that into one number, the goodput fraction
(useful time / wall time), and from it wall-clock time and GPU-hours. All
functions are pure and numpy-vectorised, so a search can score arrays of
candidate layouts in one call; scalars in give Python floats out.

Model (docs/design/0002-goodput-model.md has the derivations):

1. Interruptions are independent across GPUs (a Poisson process per GPU), so
   the job's interruption rate is `gpus × λ_gpu (+ λ_job)` and the job's mean
   time between failures is `M = 1 / (gpus / gpu_mtbf_s + λ_job)`. The default
   λ_gpu comes from the Llama 3 report (Dubey et al. 2024, §3.3.4): 419
   unexpected interruptions in a 54-day window on 16,384 H100 GPUs, i.e.
   419 / (16384 × 54 × 24 h) = 1.97e-5 per GPU-hour (one GPU: 5.8 years MTBF;
   the 16,384-GPU job: 3.09 h).
2. A synchronous checkpoint stalls training for `δ = checkpoint_bytes /
   storage_bytes_per_s`. An asynchronous one stalls only while each GPU copies
   its shard to host memory (`δ = checkpoint_bytes / gpus /
   snapshot_bytes_per_s_per_gpu`, state evenly sharded as with FSDP/ZeRO) and
   persists it in the background for `w = checkpoint_bytes /
   storage_bytes_per_s`; until that write finishes the snapshot is not
   durable, which is what a failure then costs extra, and the next snapshot
   waits for it (τ ≥ w − δ).
3. Checkpoint interval (compute time between checkpoints): Young (1974),
   `τ = sqrt(2 δ M)`, with Daly's (2006) higher-order correction
   `τ = sqrt(2 δ M) [1 + (1/3) sqrt(δ / 2M) + (1/9) (δ / 2M)] − δ` for
   `δ < 2M`, else `τ = M`. Daly's is used.
4. Expected loss per failure: the rework since the last durable checkpoint,
   `(τ + δ) / 2` (a failure is equally likely anywhere in a period of τ
   compute and δ stall; Daly 2006's first-order model), plus `w` for
   asynchronous checkpoints (the newest snapshot is durable only `w` after it
   was taken), plus the restart time `R`.
5. Goodput, Daly's (2006) first-order model: `T_wall = T_ideal (1 + δ/τ) +
   (T_wall / M)(R + rework)`, so
   `fraction = τ / (τ + δ) × (1 − (R + rework) / M)`. It lies in (0, 1] while
   the model holds. When the job's MTBF is no longer than one stall plus
   restart (plus the background write `w` for asynchronous checkpoints), or
   the expression reaches 0, the job cannot be expected to make progress:
   fraction 0, wall-clock and GPU-hours infinite, and `reason` says which.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError, field_validator

from gpufleet.catalog.table import LIST_SEPARATOR, CatalogRow
from gpufleet.errors import CatalogError

FloatOrArray = float | npt.NDArray[np.float64]
BoolOrArray = bool | npt.NDArray[np.bool_]
StrOrArray = str | npt.NDArray[np.str_]

SECONDS_PER_HOUR = 3600.0
GBYTE = 1e9  # CSV rates are GB/s (10^9 bytes), as in the catalog

DATA_FILE = "reliability.csv"
# The roles a reliability.csv row can supply a model default for (column `default_for`).
DEFAULT_ROLES: tuple[str, ...] = ("interruption_rate", "checkpoint_write", "snapshot", "restart")

# The checkpoint storage a plan designs (`designed_checkpoint_write_bytes_per_s`): blocking
# writes may add this share to a run's compute time at the interval the model picks, so the
# whole checkpoint cost (writes plus the rework a longer interval would bring, about twice
# it at the optimum) stays near 2 %. gpufleet's design choice, cross-checked against
# Llama 3: Tectonic's 2 TB/s under a 6.5 TB checkpoint on 16,384 GPUs is a write share of
# 1.2 % (reliability.csv row llama-3-tectonic-checkpoint-storage). The bandwidth grows as
# 1 / share^2: at 2 % it is a quarter, for about 2 points more GPU time.
CHECKPOINT_WRITE_SHARE = 0.01
# ...and never slower than one checkpoint in five minutes, a common rule of thumb for a
# training cluster's checkpoint storage (gpufleet assumption): what the plan's storage design
# sized alone before, and what binds for small runs, whose MTBF is long.
CHECKPOINT_WRITE_MAX_S = 300.0

REASON_MTBF = (
    "job MTBF is not longer than one checkpoint (stall, plus background write if async) "
    "+ restart: the job is expected to fail before it can save progress"
)
REASON_NEGATIVE = (
    "expected rework + restart per failure reaches the job MTBF: "
    "the first-order model predicts no progress"
)

if TYPE_CHECKING:
    from gpufleet.specs.training import Reliability


class ReliabilityRow(CatalogRow):
    """One published reliability figure (or a flagged gpufleet assumption).

    Wide rather than metric/value so every number keeps its unit in its
    column name (docs/design/0001-catalog-data.md, rule 2). `default_for`
    names which model default a row supplies; `derived_gpu_mtbf_s` is
    computed from the row's own columns by the formula in `derivation`.
    """

    list_columns: ClassVar[frozenset[str]] = frozenset({"default_for"})

    name: str
    metric: str
    accelerator: str | None = None
    accelerators_count: int | None = None
    duration_s: float | None = None
    duration_months: float | None = None
    interruptions_count: int | None = None
    unexpected_interruptions_count: int | None = None
    hardware_attributed_fraction: float | None = None
    goodput_fraction: float | None = None
    goodput_min_fraction: float | None = None
    storage_write_gbytes_per_s: float | None = None
    snapshot_gbytes_per_s_per_gpu: float | None = None
    restart_s: float | None = None
    derived_gpu_mtbf_s: float | None = None
    derivation: str = ""
    default_for: tuple[str, ...] = ()
    is_assumption: bool = False

    @field_validator("default_for")
    @classmethod
    def _known_roles(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [v for v in value if v not in DEFAULT_ROLES]
        if unknown:
            raise ValueError(f"default_for {unknown} not among {list(DEFAULT_ROLES)}")
        return value


def _cell(column: str, raw: str) -> object:
    """Same cell rules as gpufleet.catalog.table: empty is unknown, `;` splits lists."""
    text = raw.strip()
    if column in ReliabilityRow.list_columns:
        return tuple(part.strip() for part in text.split(LIST_SEPARATOR) if part.strip())
    if text == "":
        return "" if column in {"notes", "derivation"} else None
    return text


@cache
def load_reliability() -> tuple[ReliabilityRow, ...]:
    """Rows of estimate/data/reliability.csv, validated; a bad row is a CatalogError.

    `gpufleet.catalog.table.load_rows` reads only gpufleet/catalog/data, so this
    is the same parsing over this package's own data file.
    """
    text = resources.files("gpufleet.estimate").joinpath("data", DATA_FILE).read_text("utf-8")
    reader = csv.DictReader(text.splitlines())
    unknown = [c for c in reader.fieldnames or [] if c not in ReliabilityRow.model_fields]
    if unknown:
        raise CatalogError(f"{DATA_FILE}: columns {unknown} are not fields of ReliabilityRow")
    rows: list[ReliabilityRow] = []
    for line_no, raw in enumerate(reader, start=2):
        values = {k: _cell(k, v or "") for k, v in raw.items()}
        try:
            rows.append(ReliabilityRow.model_validate(values))
        except ValidationError as exc:
            raise CatalogError(f"{DATA_FILE}:{line_no}: {exc}") from exc
    return tuple(rows)


@dataclass(frozen=True)
class ReliabilityDefaults:
    """The figures `goodput` falls back on, each from one row of reliability.csv.

    `sources` holds `name: source` of every row used, so a plan can cite them.
    `job_interruption_rate_per_hour` is a per-job rate added to the per-GPU
    ones (e.g. planned maintenance that does not scale with GPUs); no row
    supplies it and it defaults to 0.
    """

    interruption_rate_per_gpu_hour: float
    restart_s: float
    checkpoint_write_bytes_per_s: float
    sources: tuple[str, ...]
    snapshot_bytes_per_s_per_gpu: float
    job_interruption_rate_per_hour: float = 0.0
    # the entry of `sources` that supplies `checkpoint_write_bytes_per_s` (a caller that
    # passes its own storage does not cite it)
    checkpoint_write_source: str = ""

    def __post_init__(self) -> None:
        positive = {
            "interruption_rate_per_gpu_hour": self.interruption_rate_per_gpu_hour,
            "checkpoint_write_bytes_per_s": self.checkpoint_write_bytes_per_s,
            "snapshot_bytes_per_s_per_gpu": self.snapshot_bytes_per_s_per_gpu,
        }
        for name, value in positive.items():
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value}")
        for name, value in {
            "restart_s": self.restart_s,
            "job_interruption_rate_per_hour": self.job_interruption_rate_per_hour,
        }.items():
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")

    @property
    def gpu_mtbf_s(self) -> float:
        """Mean time between failures of one GPU: 1 / rate, in seconds."""
        return SECONDS_PER_HOUR / self.interruption_rate_per_gpu_hour


def _default_row(rows: tuple[ReliabilityRow, ...], role: str) -> ReliabilityRow:
    matches = [r for r in rows if role in r.default_for]
    if len(matches) != 1:
        names = [r.name for r in matches]
        raise CatalogError(f"{DATA_FILE}: need exactly one row for default {role!r}, got {names}")
    return matches[0]


def _required(row: ReliabilityRow, column: str) -> float:
    value = getattr(row, column)
    if value is None:
        raise CatalogError(f"{DATA_FILE}: row {row.name!r} supplies a default but has no {column}")
    return float(value)


@cache
def default_reliability() -> ReliabilityDefaults:
    """Model defaults from the rows of reliability.csv marked in `default_for`.

    interruption rate = 3600 / derived_gpu_mtbf_s of the Llama 3 row
    (= unexpected interruptions / (GPUs × hours) = 419 / (16384 × 1296 h));
    checkpoint write = the Llama 3 storage fabric's sustained 2 TB/s;
    snapshot = one direction of PCIe Gen5 x16; restart = a flagged assumption.
    """
    rows = load_reliability()
    rate_row = _default_row(rows, "interruption_rate")
    write_row = _default_row(rows, "checkpoint_write")
    snap_row = _default_row(rows, "snapshot")
    restart_row = _default_row(rows, "restart")
    used = (rate_row, write_row, snap_row, restart_row)
    return ReliabilityDefaults(
        interruption_rate_per_gpu_hour=SECONDS_PER_HOUR / _required(rate_row, "derived_gpu_mtbf_s"),
        restart_s=_required(restart_row, "restart_s"),
        checkpoint_write_bytes_per_s=_required(write_row, "storage_write_gbytes_per_s") * GBYTE,
        sources=tuple(f"{r.name}: {r.source}" for r in used),
        snapshot_bytes_per_s_per_gpu=_required(snap_row, "snapshot_gbytes_per_s_per_gpu") * GBYTE,
        checkpoint_write_source=f"{write_row.name}: {write_row.source}",
    )


def young_interval_s(checkpoint_s: npt.ArrayLike, mtbf_s: npt.ArrayLike) -> FloatOrArray:
    """Young (1974), "A first order approximation to the optimum checkpoint interval",
    CACM 17(9): τ = sqrt(2 δ M). Kept beside Daly's to show how much the correction moves it."""
    delta = np.asarray(checkpoint_s, dtype=np.float64)
    mtbf = np.asarray(mtbf_s, dtype=np.float64)
    return _out(np.sqrt(2.0 * delta * mtbf))


def daly_interval_s(checkpoint_s: npt.ArrayLike, mtbf_s: npt.ArrayLike) -> FloatOrArray:
    """Daly (2006), "A higher order estimate of the optimum checkpoint interval for
    restart dumps", FGCS 22(3): compute time between checkpoints

        τ = sqrt(2 δ M) [1 + (1/3) sqrt(δ / 2M) + (1/9) (δ / 2M)] − δ   for δ < 2M
        τ = M                                                          for δ ≥ 2M

    It corrects Young's first-order optimum for failures during checkpoints
    and for the exponential failure law; with δ ≪ M the two agree.
    """
    delta = np.asarray(checkpoint_s, dtype=np.float64)
    mtbf = np.asarray(mtbf_s, dtype=np.float64)
    ratio = delta / (2.0 * mtbf)
    series = np.sqrt(2.0 * delta * mtbf) * (1.0 + np.sqrt(ratio) / 3.0 + ratio / 9.0) - delta
    return _out(np.where(delta < 2.0 * mtbf, series, mtbf))


def job_mtbf_s(
    gpus: npt.ArrayLike, gpu_mtbf_s: npt.ArrayLike, job_rate_per_s: npt.ArrayLike = 0.0
) -> FloatOrArray:
    """Mean time between interruptions of a job on `gpus` GPUs failing independently:
    the rates add, M = 1 / (gpus / gpu_mtbf_s + job_rate_per_s)."""
    rate = np.asarray(gpus, dtype=np.float64) / np.asarray(gpu_mtbf_s, dtype=np.float64)
    return _out(1.0 / (rate + np.asarray(job_rate_per_s, dtype=np.float64)))


def checkpoint_write_s_for_share(mtbf_s: npt.ArrayLike, write_share: float) -> FloatOrArray:
    """The synchronous checkpoint write time δ whose stall is `write_share` of the compute
    time between checkpoints at Daly's interval: δ / τ(δ, M) = share.

    With x = sqrt(δ / 2M), Daly's τ = 2Mx (1 + x/3 + x²/9) − 2Mx², so δ / τ = x / (1 − x/3)².
    Setting that to s gives (s/9) x² − (1 + 2s/3) x + s = 0, whose small root, in the form
    that does not cancel, is x = 2s / (1 + 2s/3 + sqrt(1 + 4s/3)); then δ = 2 M x². Young's
    first-order interval gives x = s (δ = 2 M s²); Daly's differs by under 1 % at s = 1 %.
    Solved rather than approximated so the share a plan states is the one its goodput has.
    """
    if not 0.0 < write_share <= 0.5:
        raise ValueError(f"write_share must be in (0, 0.5], got {write_share}")
    mtbf = _checked("mtbf_s", mtbf_s, strict=True)
    s = write_share
    x = 2.0 * s / (1.0 + 2.0 * s / 3.0 + math.sqrt(1.0 + 4.0 * s / 3.0))
    return _out(2.0 * mtbf * x * x)


def designed_checkpoint_write_bytes_per_s(
    *,
    gpus: npt.ArrayLike,
    checkpoint_bytes: npt.ArrayLike,
    gpu_mtbf_s: npt.ArrayLike | None = None,
    checkpoint_interval_s: npt.ArrayLike | None = None,
    write_share: float = CHECKPOINT_WRITE_SHARE,
    max_write_s: float = CHECKPOINT_WRITE_MAX_S,
    defaults: ReliabilityDefaults | None = None,
) -> FloatOrArray:
    """The aggregate checkpoint write bandwidth to build for a run: the one its goodput uses.

    A plan designs storage and reports goodput from one bandwidth. Sized by a fixed write
    time alone (checkpoint / 300 s), a 405B run on 16,384 GPUs got 21.6 GB/s of storage
    while its goodput assumed Tectonic's 2,000 GB/s; at its own storage it loses 27 % of its
    time, not 8 %. Here the bandwidth comes from the failure rate the goodput model uses:

        write_s = the δ with δ / τ = write_share at Daly's τ for the job's MTBF
                  (`checkpoint_write_s_for_share`), or write_share × the given
                  checkpoint_interval_s when the run fixes its interval;
        bandwidth = checkpoint_bytes / min(write_s, max_write_s).

    So blocking writes cost `write_share` of the compute time (and the interval that goes
    with them about as much again in rework), and a small run, whose long MTBF would allow
    slow storage, still writes a checkpoint within `max_write_s`. The write is synchronous,
    as the training estimate models it: δ / τ = share < 1 also means the storage finishes
    each checkpoint well inside the interval, so it sustains one write per interval. (With
    asynchronous checkpoints, `goodput(async_checkpoint=True)`, only the host snapshot would
    stall, and the storage would still have to write one checkpoint per interval.)

    gpus, checkpoint_bytes (> 0), gpu_mtbf_s and checkpoint_interval_s broadcast as in
    `goodput`; None takes `defaults` (default_reliability()), whose per-job interruption rate
    counts as there. Pass the result to `goodput(storage_bytes_per_s=...)`.
    """
    d = default_reliability() if defaults is None else defaults
    if not max_write_s > 0:
        raise ValueError(f"max_write_s must be > 0, got {max_write_s}")
    size = _checked("checkpoint_bytes", checkpoint_bytes, strict=True)
    if checkpoint_interval_s is None:
        g = _checked("gpus", gpus, strict=True)
        one_gpu_mtbf = _checked("gpu_mtbf_s", _or(gpu_mtbf_s, d.gpu_mtbf_s), strict=True)
        mtbf = job_mtbf_s(g, one_gpu_mtbf, d.job_interruption_rate_per_hour / SECONDS_PER_HOUR)
        write_s = np.asarray(checkpoint_write_s_for_share(mtbf, write_share))
    else:
        interval = _checked("checkpoint_interval_s", checkpoint_interval_s, strict=True)
        if not 0.0 < write_share <= 0.5:
            raise ValueError(f"write_share must be in (0, 0.5], got {write_share}")
        write_s = write_share * interval
    return _out(size / np.minimum(write_s, max_write_s))


@dataclass(frozen=True)
class Goodput:
    """The goodput model's result; arrays when any input was an array, else scalars.

    fraction: useful (failure-free) time / wall time, in [0, 1]; 0 on breakdown.
    checkpoint_interval_s: compute time between checkpoints (τ; Daly's optimum
        unless given).
    checkpoint_write_s: time to write one checkpoint to storage.
    checkpoint_stall_s: time training stops per checkpoint (the write when
        synchronous, the host copy when asynchronous).
    mtbf_s: the job's mean time between interruptions.
    restart_s: time from a failure to training resuming.
    lost_work_per_failure_s: expected rework per failure, restart excluded.
    expected_failures: wall_clock_s / mtbf_s.
    checkpoint_count: ideal_time_s / checkpoint_interval_s.
    wall_clock_s: ideal_time_s / fraction (inf on breakdown).
    gpu_hours: gpus × wall_clock_s / 3600 (inf on breakdown).
    breakdown: True where the model predicts no progress; `reason` says why
        ("" where it holds).
    """

    fraction: FloatOrArray
    checkpoint_interval_s: FloatOrArray
    checkpoint_write_s: FloatOrArray
    checkpoint_stall_s: FloatOrArray
    mtbf_s: FloatOrArray
    restart_s: FloatOrArray
    lost_work_per_failure_s: FloatOrArray
    expected_failures: FloatOrArray
    checkpoint_count: FloatOrArray
    wall_clock_s: FloatOrArray
    gpu_hours: FloatOrArray
    breakdown: BoolOrArray
    reason: StrOrArray


def checkpoint_write_rule(
    rel: Reliability | None, checkpoint_bytes: float
) -> Callable[[int], float]:
    """A training run's checkpoint write bandwidth (bytes/s) on a GPU count: the storage its
    spec states (`rel.checkpoint_storage`), else what gpufleet builds for it
    (`designed_checkpoint_write_bytes_per_s`, at the failure rate and interval its goodput
    uses). The planner costs each layout at this rate and the design builds it, so the plan
    reports goodput from the storage it designs (the design sized checkpoint / 300 s, 21.6
    GB/s for 405B, while the goodput assumed 2,000 GB/s); `estimate training` uses it too,
    so the two agree on a run's wall clock."""
    if rel is not None and rel.checkpoint_storage is not None:
        given = float(rel.checkpoint_storage)
        return lambda _gpus: given

    def designed(gpus: int) -> float:
        return float(
            designed_checkpoint_write_bytes_per_s(
                gpus=gpus,
                checkpoint_bytes=checkpoint_bytes,
                gpu_mtbf_s=rel.gpu_mtbf if rel else None,
                checkpoint_interval_s=rel.checkpoint_interval if rel else None,
            )
        )

    return designed


def goodput(
    *,
    gpus: npt.ArrayLike,
    ideal_time_s: npt.ArrayLike,
    checkpoint_bytes: npt.ArrayLike,
    storage_bytes_per_s: npt.ArrayLike | None = None,
    gpu_mtbf_s: npt.ArrayLike | None = None,
    restart_s: npt.ArrayLike | None = None,
    checkpoint_interval_s: npt.ArrayLike | None = None,
    async_checkpoint: npt.ArrayLike = False,
    snapshot_bytes_per_s_per_gpu: npt.ArrayLike | None = None,
    defaults: ReliabilityDefaults | None = None,
) -> Goodput:
    """Wall-clock time and GPU-hours of a run once checkpoints and failures are counted.

    gpus: GPUs in the job (> 0). ideal_time_s: failure-free, checkpoint-free
    training time (> 0). checkpoint_bytes: bytes one checkpoint writes, chosen
    by the caller (weights + optimizer state, e.g. params × 16 for mixed-precision
    Adam). storage_bytes_per_s: aggregate storage write bandwidth. gpu_mtbf_s:
    MTBF of one GPU (1 / per-GPU rate), overriding the default rate.
    restart_s: failure-to-resume time. checkpoint_interval_s: compute time between
    checkpoints, overriding Daly's optimum. async_checkpoint: snapshot to host
    memory and persist in the background. snapshot_bytes_per_s_per_gpu:
    device-to-host copy rate for async snapshots. Every numeric argument
    broadcasts with the others; None takes `defaults` (default_reliability()).
    """
    d = default_reliability() if defaults is None else defaults
    g = _checked("gpus", gpus, strict=True)
    ideal = _checked("ideal_time_s", ideal_time_s, strict=True)
    size = _checked("checkpoint_bytes", checkpoint_bytes, strict=False)
    write_bw = _checked(
        "storage_bytes_per_s",
        _or(storage_bytes_per_s, d.checkpoint_write_bytes_per_s),
        strict=True,
    )
    snap_bw = _checked(
        "snapshot_bytes_per_s_per_gpu",
        _or(snapshot_bytes_per_s_per_gpu, d.snapshot_bytes_per_s_per_gpu),
        strict=True,
    )
    one_gpu_mtbf = _checked("gpu_mtbf_s", _or(gpu_mtbf_s, d.gpu_mtbf_s), strict=True)
    restart = _checked("restart_s", _or(restart_s, d.restart_s), strict=False)
    is_async = np.asarray(async_checkpoint, dtype=np.bool_)

    mtbf = np.asarray(
        job_mtbf_s(g, one_gpu_mtbf, d.job_interruption_rate_per_hour / SECONDS_PER_HOUR)
    )
    write = size / write_bw
    # Async: only the per-GPU shard's copy to host memory stops training; the
    # storage write runs behind it and delays durability by `write`.
    stall = np.where(is_async, size / g / snap_bw, write)
    lag = np.where(is_async, write, 0.0)
    if checkpoint_interval_s is None:
        tau = np.asarray(daly_interval_s(stall, mtbf))
    else:
        tau = _checked("checkpoint_interval_s", checkpoint_interval_s, strict=True)
    # A snapshot cannot start before the previous background write is durable.
    tau = np.maximum(tau, lag - stall)

    period = tau + stall
    rework = period / 2.0 + lag
    safe_period = np.where(period > 0, period, 1.0)
    compute_share = np.where(period > 0, tau / safe_period, 1.0)
    first_order = compute_share * (1.0 - (rework + restart) / mtbf)

    no_cycle = mtbf <= stall + lag + restart
    no_progress = first_order <= 0.0
    broken = no_cycle | no_progress
    fraction = np.where(broken, 0.0, first_order)
    wall = np.where(broken, np.inf, ideal / np.where(broken, 1.0, fraction))
    reason = np.where(no_cycle, REASON_MTBF, np.where(no_progress, REASON_NEGATIVE, ""))
    shape = np.broadcast_shapes(
        g.shape,
        ideal.shape,
        size.shape,
        write_bw.shape,
        snap_bw.shape,
        one_gpu_mtbf.shape,
        restart.shape,
        is_async.shape,
        tau.shape,
    )

    def full(a: npt.NDArray[np.float64]) -> FloatOrArray:
        return _out(np.broadcast_to(a, shape).astype(np.float64))

    # A (near-)zero checkpoint cost means checkpointing (near-)continuously: the count
    # overflows to inf, which is the right answer, not a warning.
    with np.errstate(over="ignore"):
        count = ideal / np.where(tau > 0, tau, np.inf)
    broken_full = np.broadcast_to(broken, shape)
    reason_full = np.broadcast_to(reason, shape)
    return Goodput(
        fraction=full(fraction),
        checkpoint_interval_s=full(tau),
        checkpoint_write_s=full(write),
        checkpoint_stall_s=full(stall),
        mtbf_s=full(mtbf),
        restart_s=full(restart),
        lost_work_per_failure_s=full(rework),
        expected_failures=full(wall / mtbf),
        checkpoint_count=full(count),
        wall_clock_s=full(wall),
        gpu_hours=full(g * wall / SECONDS_PER_HOUR),
        breakdown=bool(broken_full) if broken_full.ndim == 0 else broken_full.copy(),
        reason=str(reason_full) if reason_full.ndim == 0 else reason_full.copy(),
    )


def _or(value: npt.ArrayLike | None, default: float) -> npt.ArrayLike:
    return default if value is None else value


def _checked(name: str, value: npt.ArrayLike, strict: bool) -> npt.NDArray[np.float64]:
    """As a float array; finite and > 0 (strict) or >= 0, else ValueError naming the input.

    Bad inputs are caller bugs (specs validate user input before it gets here),
    so they fail loudly rather than turning into a NaN inside a search.
    """
    arr = np.asarray(value, dtype=np.float64)
    ok = np.isfinite(arr) & ((arr > 0) if strict else (arr >= 0))
    if not np.all(ok):
        bound = "> 0" if strict else ">= 0"
        bad = np.broadcast_to(arr, ok.shape)[~ok].flat[0]
        raise ValueError(f"{name} must be finite and {bound}; got {float(bad)}")
    return arr


def _out(arr: npt.NDArray[np.float64]) -> FloatOrArray:
    """A 0-d result as a Python float, so scalar callers get scalars."""
    return float(arr) if arr.ndim == 0 else arr


__all__ = [
    "CHECKPOINT_WRITE_MAX_S",
    "CHECKPOINT_WRITE_SHARE",
    "DEFAULT_ROLES",
    "Goodput",
    "ReliabilityDefaults",
    "ReliabilityRow",
    "checkpoint_write_s_for_share",
    "daly_interval_s",
    "default_reliability",
    "designed_checkpoint_write_bytes_per_s",
    "goodput",
    "job_mtbf_s",
    "load_reliability",
    "young_interval_s",
]
