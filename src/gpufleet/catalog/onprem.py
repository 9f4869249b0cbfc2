"""On-prem cost facts: hardware prices, power, PUE, colocation, staff and depreciation.

One row per fact the research notes found (team research snapshot of 2026-11-29), copied
here so that gpufleet never reads the notes at run time. `item` says what the fact is about,
`unit_basis` what one unit of its value is, and the value sits in the column whose name
carries the unit:

- money (`value_low_usd`/`value_high_usd`): `per unit` (an accelerator, a kit or a whole
  system; `unit_gpus` is how many accelerators that unit holds), `per kW-year`,
  `per rack-month`, `per MW`, `per FTE-year`, `per system over 3 years`;
- electricity (`value_*_usd_per_kwh`): `per kWh`;
- PUE (`pue_low`/`pue_high`, a ratio of two powers, dimensionless): `ratio`;
- fractions (`value_*_fraction`): `fraction of purchase price per year`,
  `fraction of infrastructure spend`;
- lives (`value_*_years`): `years`;
- staffing ratios (`value_*_nodes`): `nodes per FTE`.

A range the source gives as `a-b` is split into low/high; a single figure fills both; a lower
bound ("upward of", "from") fills low alone. `source_kind` keeps the research tag (vendor,
doc, analyst, blog/press, community) because an analyst estimate and a blog's round number
must not be weighed alike: the cost model prefers the better kind and says which it used.
Arithmetic on a source's figure (per FTE-year from a 3-year total) is written in
`derivation`. Nothing here is an estimate of ours; assumptions live in `gpufleet.plan.cost`.
"""

from __future__ import annotations

from decimal import Decimal
from functools import cache
from typing import ClassVar, Literal

from pydantic import field_serializer, model_validator

from gpufleet.catalog.table import CatalogRow, load_rows

OnPremItem = Literal[
    "accelerator-price",
    "system-price",
    "system-non-accelerator-bom",
    "hardware-support",
    "electricity",
    "power-cooling",
    "pue",
    "facility-build",
    "colocation",
    "staff-ratio",
    "staff-cost",
    "gpu-share-of-spend",
    "depreciation",
]
UnitBasis = Literal[
    "per unit",
    "per kW-year",
    "per rack-month",
    "per MW",
    "per FTE-year",
    "per system over 3 years",
    "per kWh",
    "ratio",
    "fraction of purchase price per year",
    "fraction of infrastructure spend",
    "years",
    "nodes per FTE",
]
SourceKind = Literal["vendor", "doc", "analyst", "blog/press", "community"]

# Which low/high column pair holds the value of a row, by its unit basis.
_PAIRS: dict[str, tuple[str, str]] = {
    "usd": ("value_low_usd", "value_high_usd"),
    "usd_per_kwh": ("value_low_usd_per_kwh", "value_high_usd_per_kwh"),
    "pue": ("pue_low", "pue_high"),
    "fraction": ("value_low_fraction", "value_high_fraction"),
    "years": ("value_low_years", "value_high_years"),
    "nodes": ("value_low_nodes", "value_high_nodes"),
}
_PAIR_OF_BASIS: dict[str, str] = {
    "per unit": "usd",
    "per kW-year": "usd",
    "per rack-month": "usd",
    "per MW": "usd",
    "per FTE-year": "usd",
    "per system over 3 years": "usd",
    "per kWh": "usd_per_kwh",
    "ratio": "pue",
    "fraction of purchase price per year": "fraction",
    "fraction of infrastructure spend": "fraction",
    "years": "years",
    "nodes per FTE": "nodes",
}
_MONEY: tuple[str, ...] = (
    "value_low_usd",
    "value_high_usd",
    "value_low_usd_per_kwh",
    "value_high_usd_per_kwh",
)


class OnPremCost(CatalogRow):
    """A sourced on-prem cost fact; the column holding its value names the unit."""

    # PUE is facility power / IT power: a ratio of two powers, without a unit.
    dimensionless_columns: ClassVar[frozenset[str]] = frozenset({"pue_low", "pue_high"})
    table_columns: ClassVar[tuple[str, ...]] = (
        "item",
        "accelerator",
        "system",
        "unit_basis",
        "unit_gpus",
        "value_low_usd",
        "value_high_usd",
        "source_kind",
    )

    item: OnPremItem
    # Canonical gpufleet accelerator / systems.csv name when the fact is about one.
    accelerator: str | None = None
    system: str | None = None
    unit_basis: UnitBasis
    # Accelerators one priced unit holds (1 for a GPU, 8 for a DGX, 72 for an NVL72 rack).
    unit_gpus: int | None = None
    value_low_usd: Decimal | None = None
    value_high_usd: Decimal | None = None
    value_low_usd_per_kwh: Decimal | None = None
    value_high_usd_per_kwh: Decimal | None = None
    pue_low: float | None = None
    pue_high: float | None = None
    value_low_fraction: float | None = None
    value_high_fraction: float | None = None
    value_low_years: float | None = None
    value_high_years: float | None = None
    value_low_nodes: float | None = None
    value_high_nodes: float | None = None
    source_kind: SourceKind
    derivation: str = ""

    @model_validator(mode="after")
    def _value_in_the_basis_columns(self) -> OnPremCost:
        wanted = _PAIR_OF_BASIS[self.unit_basis]
        for pair, (low_col, high_col) in _PAIRS.items():
            low, high = getattr(self, low_col), getattr(self, high_col)
            if pair != wanted:
                if low is not None or high is not None:
                    raise ValueError(
                        f"{low_col}/{high_col} set on a row priced '{self.unit_basis}'"
                    )
                continue
            if low is None:
                raise ValueError(f"a '{self.unit_basis}' row needs {low_col}")
            if low < 0 or (high is not None and high < low):
                raise ValueError(f"{low_col} {low} and {high_col} {high} do not form a range")
        fraction_low, fraction_high = self.value_low_fraction, self.value_high_fraction
        for value in (fraction_low, fraction_high):
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"fraction {value} is not between 0 and 1")
        if self.pue_low is not None and self.pue_low < 1.0:
            raise ValueError(f"PUE {self.pue_low} is below 1")
        if self.unit_gpus is not None and self.unit_gpus < 1:
            raise ValueError(f"unit_gpus {self.unit_gpus} is not a positive count")
        return self

    @field_serializer(*_MONEY, when_used="json")
    def _money_as_number(self, value: Decimal | None) -> float | None:
        return None if value is None else float(value)

    @property
    def low(self) -> float:
        """The low (or only) figure, in the unit its basis names."""
        low_col, _ = _PAIRS[_PAIR_OF_BASIS[self.unit_basis]]
        return float(getattr(self, low_col))

    @property
    def high(self) -> float | None:
        """The high figure; None for a lower bound ("upward of")."""
        _, high_col = _PAIRS[_PAIR_OF_BASIS[self.unit_basis]]
        value = getattr(self, high_col)
        return None if value is None else float(value)

    @property
    def mid(self) -> float:
        """Midpoint of the range; the low figure for a lower bound."""
        high = self.high
        return self.low if high is None else (self.low + high) / 2.0


@cache
def load_onprem_costs() -> tuple[OnPremCost, ...]:
    return load_rows("onprem_costs.csv", OnPremCost)
