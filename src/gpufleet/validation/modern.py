"""What the modern-row validations share: accelerator names, skip reasons and summaries.

The rows of `training_modern.csv` and `inference_modern.csv` name devices the way their
publications do (`H100-SXM5-80GB`, `GB200-NVL72`, `TPU-v5p`). Each is mapped here, by an
explicit table, to the catalog accelerator the estimators know; a device the catalog does
not hold is skipped with the reason, never silently, and a name missing from the table is a
data error. A row the estimators cannot express is skipped with one of a fixed set of
reasons (`SkipReason`), so the summary can count every row either as validated or as
skipped for a stated cause.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from gpufleet.errors import UserError

ROW_SETS = ("calibration", "modern", "all")


def check_rows(value: str) -> str:
    """A `--rows` value, or a user error listing the accepted ones."""
    if value not in ROW_SETS:
        raise UserError(f"--rows: '{value}' is not one of {', '.join(ROW_SETS)}")
    return value


@dataclass(frozen=True)
class DeviceName:
    """One device name used in the modern rows and what the catalog holds for it."""

    catalog: str | None  # catalog accelerator name; None = not in the catalog
    why: str  # why this mapping (or why none) is right


# Row `gpu` -> catalog accelerator. Conventions of the names: ground-truth README.
ACCELERATORS: dict[str, DeviceName] = {
    "H100-SXM5-80GB": DeviceName("h100-sxm5-80gb", "DGX/HGX H100 SXM5, 700 W"),
    "H100-HBM2e-96GB-500W": DeviceName(
        None,
        "Grand Teton H100, 96 GB HBM2e at 500 W; the catalog has the 80 GB HBM3 700 W SXM5",
    ),
    "H200-SXM-141GB": DeviceName("h200-sxm-141gb", "HGX/DGX H200"),
    "B200-180GB": DeviceName("b200-sxm-192gb", "DGX B200 (the catalog's b200-180gb alias)"),
    "GB200-NVL72": DeviceName("gb200", "one Blackwell GPU of a GB200 NVL72 rack"),
    "MI300X-192GB": DeviceName("mi300x", "AMD Instinct MI300X, 750 W"),
    "MI325X-256GB": DeviceName("mi325x", "AMD Instinct MI325X, 1000 W"),
    "TPU-v5p": DeviceName("tpu-v5p", "one TPU v5p chip"),
}


class SkipReason(StrEnum):
    """Why a modern row is not compared: the estimator cannot express the published run."""

    accelerator_not_in_catalog = "accelerator not in the catalog"
    precision_not_modelled = "precision not modelled by the estimator"
    precision_not_on_device = "precision not in the accelerator's datasheet"
    zero_stage_not_in_profile = "ZeRO stage not offered by the framework profile"
    layout_refused = "layout refused by the model's rules"


class NotExpressibleError(Exception):
    """Raised while rebuilding a row that the estimator cannot express."""

    def __init__(self, reason: SkipReason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Skipped:
    id: str
    source: str
    gpu: str
    reason: SkipReason
    detail: str


def accelerator_of(gpu: str) -> str:
    """The catalog accelerator of a row's `gpu`; NotExpressibleError when the catalog
    lacks it, UserError when the mapping table does not know the name."""
    entry = ACCELERATORS.get(gpu)
    if entry is None:
        known = ", ".join(sorted(ACCELERATORS))
        raise UserError(f"modern row gpu '{gpu}' is not in the mapping table; known: {known}")
    if entry.catalog is None:
        raise NotExpressibleError(SkipReason.accelerator_not_in_catalog, f"{gpu}: {entry.why}")
    return entry.catalog


def source_of(row: dict[str, str], sources: Sequence[tuple[str, str]]) -> str:
    """A short name of the publication: the first label whose marker is in `source`."""
    for marker, label in sources:
        if marker in row["source"]:
            return label
    raise UserError(f"modern row {row['id']}: no known publication in source {row['source']!r}")


@dataclass(frozen=True)
class Group:
    """Rows sharing a key (accelerator, source, precision): how many and how far off."""

    key: str
    rows: int
    median_abs: float
    median_signed: float


T = TypeVar("T")


def median_abs(errors: Sequence[float]) -> float:
    return statistics.median(abs(e) for e in errors) if errors else float("nan")


def median_signed(errors: Sequence[float]) -> float:
    return statistics.median(errors) if errors else float("nan")


def groups(items: Sequence[T], key: Callable[[T], str], error: Callable[[T], float]) -> list[Group]:
    """One Group per key, in order of first appearance."""
    by: dict[str, list[float]] = {}
    for item in items:
        by.setdefault(key(item), []).append(error(item))
    return [Group(k, len(v), median_abs(v), median_signed(v)) for k, v in by.items()]


def skip_counts(skipped: Sequence[Skipped]) -> dict[str, int]:
    """Skipped rows per reason, every reason listed (zero included) in a fixed order."""
    return {r.value: sum(s.reason is r for s in skipped) for r in SkipReason}
