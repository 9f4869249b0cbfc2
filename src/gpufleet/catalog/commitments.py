"""Commitments: reserved capacity and discount facts for cloud GPU instances.

One row per fact the research notes found: a discount (`discount_fraction`, or
`discount_min_fraction`/`discount_max_fraction` for a range or an "up to" figure), a rate
(`rate_usd_per_hour` per instance, `rate_per_accelerator_*` per device), or a rule with
no number (its text in `scope` and `notes`). `source_kind` keeps the research tag, because
a vendor's own page and a blog's headline "up to 72%" must not be weighed alike: a cost model
should prefer `vendor` rows and show the kind next to any figure it uses.

GPU-specific discount percentages were mostly not found; the generic ones are marked so
in `notes`. Nothing here is an estimate of ours.
"""

from __future__ import annotations

from decimal import Decimal
from functools import cache
from typing import ClassVar, Literal

from pydantic import field_serializer, model_validator

from gpufleet.catalog.table import CatalogRow, load_rows

CommitmentProvider = Literal["aws", "gcp", "azure", "cross-cloud"]
Program = Literal[
    "capacity-block",
    "odcr",
    "reserved-instance",
    "savings-plan",
    "cud",
    "cud-resource",
    "cud-spend",
    "sustained-use",
    "reservation",
    "committed-use",
    "reserved",
    "spot",
    "on-demand",
]
SourceKind = Literal["vendor", "doc", "analyst", "blog/press", "community"]

_RANGES: tuple[tuple[str, str], ...] = (
    ("term_min_years", "term_max_years"),
    ("discount_min_fraction", "discount_max_fraction"),
    ("rate_per_accelerator_min_usd_per_hour", "rate_per_accelerator_max_usd_per_hour"),
)
_FRACTIONS: tuple[str, ...] = (
    "discount_fraction",
    "discount_min_fraction",
    "discount_max_fraction",
)
_MONEY: tuple[str, ...] = (
    "rate_usd_per_hour",
    "rate_per_accelerator_usd_per_hour",
    "rate_per_accelerator_min_usd_per_hour",
    "rate_per_accelerator_max_usd_per_hour",
)


class Commitment(CatalogRow):
    """A discount, rate or rule for committing to (or reserving) cloud capacity."""

    list_columns: ClassVar[frozenset[str]] = frozenset({"instance_types", "regions"})
    table_columns: ClassVar[tuple[str, ...]] = (
        "provider",
        "program",
        "scope",
        "instance_types",
        "term_years",
        "discount_fraction",
        "discount_max_fraction",
        "rate_usd_per_hour",
        "source_kind",
    )

    provider: CommitmentProvider
    program: Program
    instance_types: tuple[str, ...] = ()
    # Canonical gpufleet accelerator when the fact is about one; empty otherwise.
    accelerator: str | None = None
    # Region names as the source writes them (AWS page names, not codes).
    regions: tuple[str, ...] = ()
    term_years: float | None = None
    term_min_years: float | None = None
    term_max_years: float | None = None
    discount_fraction: float | None = None
    discount_min_fraction: float | None = None
    # "up to X%" figures land here alone: a headline maximum, not a typical discount.
    discount_max_fraction: float | None = None
    rate_usd_per_hour: Decimal | None = None
    rate_per_accelerator_usd_per_hour: Decimal | None = None
    rate_per_accelerator_min_usd_per_hour: Decimal | None = None
    rate_per_accelerator_max_usd_per_hour: Decimal | None = None
    scope: str
    source_kind: SourceKind

    @model_validator(mode="after")
    def _consistent(self) -> Commitment:
        for column in _FRACTIONS:
            value: float | None = getattr(self, column)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{column} {value} is not a fraction between 0 and 1")
        for low_col, high_col in _RANGES:
            low, high = getattr(self, low_col), getattr(self, high_col)
            if low is not None and high is not None and low > high:
                raise ValueError(f"{low_col} {low} exceeds {high_col} {high}")
        return self

    @field_serializer(*_MONEY, when_used="json")
    def _money_as_number(self, value: Decimal | None) -> float | None:
        return None if value is None else float(value)


@cache
def load_commitments() -> tuple[Commitment, ...]:
    return load_rows("commitments.csv", Commitment)
