"""What a plan costs: cloud prices, the cheapest purchase mix, on-prem TCO and break-even.

Design note: docs/design/0007-cost-model.md. In short:

- `cloud_prices` turns the catalog into one price per GPU-hour for each way of buying it:
  on-demand and spot list prices from instances.csv, 1- and 3-year reserved prices as
  on-demand × (1 − discount) from commitments.csv, and AWS Capacity Block rates.
- `optimise_mix` buys a `Demand` (a steady baseline plus burst GPU-hours) at least cost with a
  HiGHS linear program, then rounds reserved GPUs to whole GPUs.
- `on_prem_tco` prices owning the fleet: capex (systems, network, storage), opex (power ×
  PUE, colocation, support, staff), straight-line depreciation, cost per delivered GPU-hour.
- `break_even_months` is when renting would have cost more than owning.
- `sensitivity` is the tornado: total cost as one input moves at a time.
- `cost_breakdown` assembles the plan's `CostBreakdown`.

Every figure read from the catalog and every default is written to the `Assumptions` log with
its source; numbers gpufleet chooses without a source say so ("gpufleet assumption").
Money is USD throughout.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from scipy.optimize import linprog

from gpufleet.catalog.commitments import Commitment, load_commitments
from gpufleet.catalog.instances import PROVIDERS, CloudInstance, instances_for
from gpufleet.catalog.onprem import OnPremCost, load_onprem_costs
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.model import CostBreakdown
from gpufleet.specs.plan import OnPremPreferences

HOURS_PER_YEAR = 8_760.0
HOURS_PER_MONTH = HOURS_PER_YEAR / 12.0
BREAK_EVEN_LIMIT_MONTHS = 120.0

ON_DEMAND = "on_demand"
SPOT = "spot"
RESERVED_1Y = "reserved_1y"
RESERVED_3Y = "reserved_3y"
CAPACITY_BLOCK = "capacity_block"
RESERVED_TERM_YEARS: dict[str, float] = {RESERVED_1Y: 1.0, RESERVED_3Y: 3.0}

# gpufleet assumption, no source: switch, NIC, optics and cable prices were not found in the
# research (onprem_costs.md §7), so the scale-out network is priced as a share of the systems.
NETWORK_FRACTION_OF_SYSTEMS = 0.10
NETWORK_SOURCE = (
    "gpufleet assumption (no sourced price): InfiniBand/Ethernet switch, NIC, optics and "
    "cable prices were not found in the research notes; the scale-out network is taken as "
    f"{NETWORK_FRACTION_OF_SYSTEMS:.0%} of the systems' price. Systems priced whole (DGX) "
    "already include their NICs. Pass network_capex_usd to override."
)

_KIND_RANK: dict[str, int] = {"vendor": 0, "doc": 1, "analyst": 2, "blog/press": 3, "community": 4}
# Programs that discount a commitment of 1 or 3 years, in order of preference per provider:
# the GPU-covering program first (GCP resource CUDs cover GPUs per the vendor row).
_RESERVED_PROGRAMS: dict[str, tuple[str, ...]] = {
    "aws": ("reserved-instance", "savings-plan"),
    "gcp": ("cud-resource", "cud", "cud-spend"),
    "azure": ("reservation", "savings-plan"),
}
# AWS pricing pages name regions; instances.csv uses the codes (AWS Regions and Zones docs).
_AWS_REGION_CODES: dict[str, str] = {
    "US East (N. Virginia)": "us-east-1",
    "US East (Ohio)": "us-east-2",
    "US West (Oregon)": "us-west-2",
    "Asia Pacific (Melbourne)": "ap-southeast-4",
}


class NoOnPremPriceError(UserError, ValueError):
    """The catalog has no purchase price for this accelerator; the caller turns it into a note."""


# --------------------------------------------------------------------------- demand


@dataclass(frozen=True)
class Demand:
    """What the plan needs from one accelerator type over the horizon.

    `baseline_gpus` run every hour of the horizon (inference fleets, long training) and are
    never put on spot. `burst_gpu_hours` is work above that (training runs); the
    `interruptible_fraction` of it tolerates spot, at `spot_overhead_fraction` extra work for
    lost progress since the last checkpoint and restarts. `burst_window_hours`, when given,
    is the time the burst must fit in (a training deadline): reserved GPUs then lend the burst
    only their hours inside that window. Without it the burst may spread over the horizon.
    """

    accelerator: str
    baseline_gpus: int
    burst_gpu_hours: float
    interruptible_fraction: float
    spot_overhead_fraction: float
    horizon_hours: float
    burst_window_hours: float | None = None

    def __post_init__(self) -> None:
        if self.baseline_gpus < 0:
            raise ValueError(f"baseline_gpus {self.baseline_gpus} is negative")
        if self.burst_gpu_hours < 0:
            raise ValueError(f"burst_gpu_hours {self.burst_gpu_hours} is negative")
        if not 0.0 <= self.interruptible_fraction <= 1.0:
            raise ValueError(f"interruptible_fraction {self.interruptible_fraction} is not 0-1")
        if self.spot_overhead_fraction < 0:
            raise ValueError(f"spot_overhead_fraction {self.spot_overhead_fraction} is negative")
        if self.horizon_hours <= 0:
            raise ValueError(f"horizon_hours {self.horizon_hours} is not positive")
        window = self.burst_window_hours
        if window is not None and not 0 < window <= self.horizon_hours:
            raise ValueError(f"burst_window_hours {window} is not within the horizon")

    @property
    def window_hours(self) -> float:
        return self.horizon_hours if self.burst_window_hours is None else self.burst_window_hours

    @property
    def gpu_hours(self) -> float:
        """All GPU-hours the demand needs (spot overhead excluded)."""
        return self.baseline_gpus * self.horizon_hours + self.burst_gpu_hours


# --------------------------------------------------------------------------- cloud prices


def _per_gpu(value: object, row: CloudInstance) -> float | None:
    if value is None or not row.accelerators_count:
        return None
    return float(str(value)) / float(row.accelerators_count)


def _priced_rows(
    accelerator: str, providers: Sequence[str], regions: Sequence[str]
) -> list[CloudInstance]:
    try:
        rows = instances_for(accelerator=accelerator)
    except UnknownNameError:
        return []
    wanted_providers = {p.strip().lower() for p in providers}
    wanted_regions = {r.strip().lower() for r in regions}
    return [
        r
        for r in rows
        if r.provider in wanted_providers
        and (not wanted_regions or r.region.lower() in wanted_regions)
        and r.is_whole_price
        and (r.accelerators_count or 0) >= 1  # fractional-GPU types price a slice
    ]


def _row_text(row: CloudInstance) -> str:
    return f"instances.csv {row.provider} {row.name} {row.region} ({row.source})"


@dataclass(frozen=True)
class _Discount:
    fraction: float
    row: Commitment
    upper_bound: bool
    longest_term_only: bool


def _discount(provider: str, accelerator: str, term_years: float) -> _Discount | None:
    """The commitment discount to use for a provider and term, or None when none is sourced.

    Rows with a discount for exactly this term come first; an "up to X %" figure stated for
    "1 or 3 years" without saying which is taken for the 3-year term only (a headline
    maximum is reached at the longest term). Then by source kind (vendor first), exact
    figures before upper bounds, the provider's preferred program, and the smaller discount.
    """
    programs = _RESERVED_PROGRAMS.get(provider, ())
    found: list[tuple[tuple[int, int, int, int, float], _Discount]] = []
    for row in load_commitments():
        if row.provider != provider or row.program not in programs:
            continue
        if row.accelerator not in (None, accelerator):
            continue
        if row.discount_fraction is not None:
            fraction, upper = row.discount_fraction, False
        elif row.discount_max_fraction is not None:
            fraction, upper = row.discount_max_fraction, True
        else:
            continue
        if row.term_years is not None:
            if row.term_years != term_years:
                continue
            exact_term, longest_only = 0, False
        elif row.term_max_years is not None:
            if row.term_max_years != term_years:
                continue
            exact_term, longest_only = 1, True
        else:
            continue  # no term stated: cannot tell which commitment it prices
        key = (
            exact_term,
            _KIND_RANK[row.source_kind],
            int(upper),
            programs.index(row.program),
            fraction,
        )
        found.append((key, _Discount(fraction, row, upper, longest_only)))
    if not found:
        return None
    return min(found, key=lambda item: item[0])[1]


def _discount_text(d: _Discount) -> str:
    parts = [
        f"commitments.csv {d.row.provider} {d.row.program} '{d.row.scope}' "
        f"[{d.row.source_kind}] ({d.row.source})"
    ]
    if d.upper_bound:
        parts.append("an 'up to' figure: an upper bound, not a typical discount")
    if d.longest_term_only:
        parts.append(
            "stated for 1- or 3-year terms without saying which; gpufleet applies it to the "
            "3-year term only"
        )
    if d.row.notes:
        parts.append(f"notes: {d.row.notes}")
    return "; ".join(parts)


def _capacity_block_rows(
    accelerator: str, providers: Sequence[str], regions: Sequence[str]
) -> list[Commitment]:
    if "aws" not in {p.strip().lower() for p in providers}:
        return []
    wanted = {r.strip().lower() for r in regions}
    out = []
    for row in load_commitments():
        if row.program != "capacity-block" or row.accelerator != accelerator:
            continue
        if row.rate_per_accelerator_usd_per_hour is None:
            continue
        codes = {_AWS_REGION_CODES.get(name, name).lower() for name in row.regions}
        if wanted and not codes & wanted:
            continue
        out.append(row)
    return out


def cloud_prices(
    accelerator: str,
    providers: Sequence[str],
    regions: Sequence[str],
    log: Assumptions,
) -> dict[str, float]:
    """Lowest price per GPU-hour of each way to buy `accelerator` in the allowed places.

    Keys (each only when some provider prices it): `on_demand` (lowest on-demand list price
    per GPU among whole-instance rows), `spot` (lowest `spot_min_usd_per_hour` per GPU),
    `reserved_1y` and `reserved_3y` (per provider: its lowest on-demand price × (1 − its
    commitment discount for the term); the lowest across providers), `capacity_block` (AWS
    Capacity Block per-accelerator rate). A provider without a price for the accelerator is
    skipped. Every row used is logged.
    """
    rows = _priced_rows(accelerator, providers, regions)
    prices: dict[str, float] = {}
    cheapest_by_provider: dict[str, tuple[float, CloudInstance]] = {}
    best_spot: tuple[float, CloudInstance] | None = None
    for row in rows:
        od = _per_gpu(row.on_demand_usd_per_hour, row)
        if od is not None:
            current = cheapest_by_provider.get(row.provider)
            if current is None or od < current[0]:
                cheapest_by_provider[row.provider] = (od, row)
        spot = _per_gpu(row.spot_min_usd_per_hour, row)
        if spot is not None and (best_spot is None or spot < best_spot[0]):
            best_spot = (spot, row)
    where = f"providers {', '.join(providers)}" + (
        f", regions {', '.join(regions)}" if regions else ", any region"
    )
    if cheapest_by_provider:
        od_price, od_row = min(cheapest_by_provider.values(), key=lambda item: item[0])
        prices[ON_DEMAND] = od_price
        log.add(
            f"{accelerator} on-demand price",
            f"${od_price:.4f}/GPU-h",
            f"lowest on-demand list price per GPU ({where}): {_row_text(od_row)}",
        )
    if best_spot is not None:
        prices[SPOT] = best_spot[0]
        log.add(
            f"{accelerator} spot price",
            f"${best_spot[0]:.4f}/GPU-h",
            f"lowest spot price per GPU ({where}; spot_min_usd_per_hour, the cheapest zone "
            f"of the region; spot prices move hourly): {_row_text(best_spot[1])}",
        )
    for key, term in RESERVED_TERM_YEARS.items():
        options: list[tuple[float, str]] = []
        for provider, (od, row) in sorted(cheapest_by_provider.items()):
            discount = _discount(provider, accelerator, term)
            if discount is None:
                log.add(
                    f"{provider} {term:.0f}-year commitment discount",
                    "none sourced",
                    "commitments.csv has no discount figure for this term; the provider is "
                    "left out of the reserved price",
                )
                continue
            price = od * (1.0 - discount.fraction)
            text = (
                f"{provider}: ${od:.4f}/GPU-h on-demand ({row.name} {row.region}) × "
                f"(1 − {discount.fraction:.0%}); {_discount_text(discount)}"
            )
            options.append((price, text))
        if options:
            price, text = min(options)
            prices[key] = price
            log.add(f"{accelerator} {key} price", f"${price:.4f}/GPU-h", f"lowest of: {text}")
    blocks = _capacity_block_rows(accelerator, providers, regions)
    if blocks:
        block = min(blocks, key=lambda r: r.rate_per_accelerator_usd_per_hour or 0)
        rate = float(block.rate_per_accelerator_usd_per_hour or 0)
        prices[CAPACITY_BLOCK] = rate
        log.add(
            f"{accelerator} capacity block price",
            f"${rate:.4f}/GPU-h",
            f"commitments.csv aws capacity-block {';'.join(block.instance_types)} in "
            f"{';'.join(block.regions)} [{block.source_kind}] ({block.source}); used for burst "
            "work only (blocks last days to weeks, booked ahead, rates change with supply)",
        )
    return prices


# --------------------------------------------------------------------------- purchase mix

# LP variables, in order. Hours are in units of one GPU for the whole horizon (hours / H)
# so every coefficient is of order 1.
_R1, _R3, _OD_IN, _OD_OUT, _OD_W, _CB, _SPOT, _Y_BW, _Y_BO, _Y_W = range(10)
_N_VARS = 10


@dataclass(frozen=True)
class _Solution:
    x: tuple[float, ...]
    total_usd: float


def _reserved_paid_hours(demand: Demand, key: str) -> float:
    """Hours a reserved GPU is paid for: the horizon, or its whole term when that is longer."""
    return max(demand.horizon_hours, RESERVED_TERM_YEARS[key] * HOURS_PER_YEAR)


def _solve(
    demand: Demand, prices: Mapping[str, float], fixed: tuple[int, int] | None
) -> _Solution | None:
    h = demand.horizon_hours
    t_in = demand.window_hours / h  # share of the horizon inside the burst window
    t_out = 1.0 - t_in
    b = float(demand.baseline_gpus)
    w = demand.burst_gpu_hours / h
    inflate = 1.0 + demand.spot_overhead_fraction
    cost = np.zeros(_N_VARS)
    upper: list[float | None] = [None] * _N_VARS
    for key, index in ((RESERVED_1Y, _R1), (RESERVED_3Y, _R3)):
        if key in prices:
            cost[index] = prices[key] * _reserved_paid_hours(demand, key)
        else:
            upper[index] = 0.0
    for key, indices in (
        (ON_DEMAND, (_OD_IN, _OD_OUT, _OD_W)),
        (CAPACITY_BLOCK, (_CB,)),
        (SPOT, (_SPOT,)),
    ):
        for index in indices:
            if key in prices:
                cost[index] = prices[key] * h
            else:
                upper[index] = 0.0
    bounds: list[tuple[float, float | None]] = [(0.0, u) for u in upper]
    if fixed is not None:
        bounds[_R1] = (float(fixed[0]), float(fixed[0]))
        bounds[_R3] = (float(fixed[1]), float(fixed[1]))
        if (fixed[0] and upper[_R1] == 0.0) or (fixed[1] and upper[_R3] == 0.0):
            return None
    a_ub = np.zeros((7, _N_VARS))
    b_ub = np.zeros(7)
    # reserved hours inside the window feed the baseline there and the burst
    a_ub[0, [_Y_BW, _Y_W]] = 1.0
    a_ub[0, [_R1, _R3]] = -t_in
    # reserved hours outside the window feed only the baseline
    a_ub[1, _Y_BO] = 1.0
    a_ub[1, [_R1, _R3]] = -t_out
    # baseline inside the window: reserved or on-demand, never spot or blocks
    a_ub[2, [_Y_BW, _OD_IN]] = -1.0
    b_ub[2] = -b * t_in
    # baseline outside the window
    a_ub[3, [_Y_BO, _OD_OUT]] = -1.0
    b_ub[3] = -b * t_out
    # burst: reserved, on-demand, capacity blocks, spot net of its overhead
    a_ub[4, [_Y_W, _OD_W, _CB]] = -1.0
    a_ub[4, _SPOT] = -1.0 / inflate
    b_ub[4] = -w
    # spot does at most the interruptible share of the burst
    a_ub[5, _SPOT] = 1.0 / inflate
    b_ub[5] = demand.interruptible_fraction * w
    # burst-only options never exceed the burst
    a_ub[6, _CB] = 1.0
    a_ub[6, _SPOT] = 1.0 / inflate
    b_ub[6] = w
    scale = float(np.max(cost)) or 1.0
    result = linprog(cost / scale, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if result.status != 0 or result.x is None:
        return None
    x = tuple(float(v) for v in result.x)
    return _Solution(x, float(np.dot(cost, result.x)))


def _rounded_candidates(relaxed: _Solution) -> set[tuple[int, int]]:
    """Whole-GPU reservations near the LP optimum: floor/ceil of each term and of the total."""
    r1, r3 = max(relaxed.x[_R1], 0.0), max(relaxed.x[_R3], 0.0)
    out = {(a, c) for a in {math.floor(r1), math.ceil(r1)} for c in {math.floor(r3), math.ceil(r3)}}
    for total in {math.floor(r1 + r3), math.ceil(r1 + r3)}:
        out |= {(total, 0), (0, total)}
    out.add((0, 0))
    return out


def optimise_mix(demand: Demand, prices: Mapping[str, float], log: Assumptions) -> dict[str, float]:
    """The cheapest way to buy `demand` at `prices` (USD per GPU-hour, keys as cloud_prices).

    A linear program solved by HiGHS (scipy.optimize.linprog, method="highs") over: 1- and
    3-year reserved GPUs (paid every hour of the horizon, or of their term when that is
    longer), on-demand GPU-hours, Capacity Block GPU-hours and spot GPU-hours. Constraints:
    the baseline is covered every hour by reserved or on-demand GPUs, never spot or blocks;
    the burst by any of them, with spot at most `interruptible_fraction` of it and each spot
    hour delivering 1 / (1 + spot_overhead_fraction) hours of work; reserved GPUs lend the
    burst only their hours inside the burst window. Reserved GPUs are then made whole: the
    LP is re-solved with them fixed at the floor and ceiling of the optimum (the cost is
    convex in the reserved count, so one of these is the whole-GPU optimum) and the cheapest
    is returned. `lp_bound_usd` is the relaxed optimum, a lower bound on any purchase.
    Raises ValueError when the prices cannot cover the demand (no on-demand or reserved
    price for a baseline, or burst work with only spot where not all of it may be spot).
    """
    hours = demand.gpu_hours
    out: dict[str, float] = {
        "reserved_1y_gpus": 0.0,
        "reserved_3y_gpus": 0.0,
        "reserved_gpus": 0.0,
        "on_demand_gpu_hours": 0.0,
        "capacity_block_gpu_hours": 0.0,
        "spot_gpu_hours": 0.0,
        "spot_work_gpu_hours": 0.0,
        "reserved_usd": 0.0,
        "on_demand_usd": 0.0,
        "capacity_block_usd": 0.0,
        "spot_usd": 0.0,
        "total_usd": 0.0,
        "lp_bound_usd": 0.0,
        "demand_gpu_hours": hours,
    }
    if hours <= 0:
        return out
    relaxed = _solve(demand, prices, None)
    if relaxed is None:
        offered = ", ".join(sorted(prices)) or "none"
        raise ValueError(
            f"the prices for {demand.accelerator} ({offered}) cannot cover the demand: the "
            "baseline needs an on-demand or reserved price, and burst work beyond the "
            "interruptible share needs one that is not spot"
        )
    solutions = [
        s
        for s in (_solve(demand, prices, fixed) for fixed in sorted(_rounded_candidates(relaxed)))
        if s is not None
    ]
    best = min(solutions, key=lambda s: (s.total_usd, s.x[_R1] + s.x[_R3]))
    h = demand.horizon_hours
    x = best.x
    inflate = 1.0 + demand.spot_overhead_fraction
    r1, r3 = round(x[_R1]), round(x[_R3])
    od_hours = (x[_OD_IN] + x[_OD_OUT] + x[_OD_W]) * h
    out.update(
        reserved_1y_gpus=float(r1),
        reserved_3y_gpus=float(r3),
        reserved_gpus=float(r1 + r3),
        on_demand_gpu_hours=od_hours,
        capacity_block_gpu_hours=x[_CB] * h,
        spot_gpu_hours=x[_SPOT] * h,
        spot_work_gpu_hours=x[_SPOT] * h / inflate,
        reserved_usd=sum(
            n * prices.get(key, 0.0) * _reserved_paid_hours(demand, key)
            for n, key in ((r1, RESERVED_1Y), (r3, RESERVED_3Y))
        ),
        on_demand_usd=od_hours * prices.get(ON_DEMAND, 0.0),
        capacity_block_usd=x[_CB] * h * prices.get(CAPACITY_BLOCK, 0.0),
        spot_usd=x[_SPOT] * h * prices.get(SPOT, 0.0),
        total_usd=best.total_usd,
        lp_bound_usd=relaxed.total_usd,
    )
    out["effective_usd_per_gpu_hour"] = best.total_usd / hours
    log.add(
        "purchase mix method",
        "HiGHS linear program (scipy.optimize.linprog), reserved GPUs rounded to whole GPUs",
        "gpufleet (derived): minimise reserved + on-demand + capacity-block + spot cost; "
        "baseline never on spot; spot only for the interruptible share of the burst, inflated "
        "by the spot overhead (docs/design/0007-cost-model.md)",
    )
    log.add(
        "reserved capacity payment",
        "every hour of the horizon, or of the whole term when the term is longer",
        "gpufleet assumption: a commitment is paid for its term whether used or not; a "
        "horizon longer than one term is assumed to renew at the same rate",
    )
    if demand.burst_window_hours is None and demand.burst_gpu_hours > 0:
        log.add(
            f"{demand.accelerator} burst window",
            "the whole horizon",
            "gpufleet assumption: without a window, burst work may spread over the horizon, "
            "so reserved GPUs above the baseline can absorb it; give burst_window_hours for "
            "deadline-bound runs",
        )
    return out


# --------------------------------------------------------------------------- on-prem TCO


@dataclass(frozen=True)
class HardwarePrice:
    """The purchase price of the accelerators' systems and where it comes from."""

    per_gpu_usd: float  # accelerator (or whole system) price per GPU
    host_per_node_usd: float  # added per node when the price is for accelerators alone
    basis: str  # "system" | "accelerator + host"
    source: str

    def systems_usd(self, gpus: int, nodes: int) -> float:
        return self.per_gpu_usd * gpus + self.host_per_node_usd * nodes


def _best_rows(rows: Sequence[OnPremCost]) -> list[OnPremCost]:
    """Rows of the best source kind, bounded figures before lower bounds."""
    if not rows:
        return []
    key = min((_KIND_RANK[r.source_kind], r.high is None) for r in rows)
    return [r for r in rows if (_KIND_RANK[r.source_kind], r.high is None) == key]


def _rows_text(rows: Sequence[OnPremCost]) -> str:
    parts = []
    for r in rows:
        value = f"${r.low:,.0f}" + ("+" if r.high is None else "")
        if r.high is not None and r.high != r.low:
            value = f"${r.low:,.0f}-${r.high:,.0f}"
        what = r.system or r.accelerator or r.item
        parts.append(f"{what} {value} per {r.unit_gpus} GPU(s) [{r.source_kind}] ({r.source})")
    return "; ".join(parts)


def hardware_price(accelerator: str, system: str | None = None) -> HardwarePrice:
    """Purchase price per GPU from onprem_costs.csv, preferring whole-system prices.

    A system price (a DGX, an NVL72 rack) includes CPUs, memory, NICs and chassis, so it is
    used when one exists for the accelerator (rows of `system` first when given). Otherwise
    an accelerator-only price plus the one sourced non-GPU bill of materials (DGX H100's,
    per node). Among candidate rows the best source kind wins (vendor, doc, analyst,
    blog/press, community), ranges before lower bounds; the price is the median of the rows'
    midpoints per GPU. Raises NoOnPremPriceError when nothing prices the accelerator.
    """
    table = load_onprem_costs()

    def per_gpu_rows(item: str) -> list[OnPremCost]:
        return [
            r
            for r in table
            if r.item == item and r.accelerator == accelerator and r.unit_gpus is not None
        ]

    systems = per_gpu_rows("system-price")
    if system is not None and any(r.system == system for r in systems):
        systems = [r for r in systems if r.system == system]
    chosen = _best_rows(systems)
    if chosen:
        per_gpu = statistics.median(r.mid / (r.unit_gpus or 1) for r in chosen)
        bound = " (lower bound: 'from'/'upward of')" if chosen[0].high is None else ""
        return HardwarePrice(
            per_gpu,
            0.0,
            "system",
            f"whole-system price{bound}, median of {len(chosen)} row(s) of onprem_costs.csv: "
            + _rows_text(chosen),
        )
    chosen = _best_rows(per_gpu_rows("accelerator-price"))
    if chosen:
        per_gpu = statistics.median(r.mid / (r.unit_gpus or 1) for r in chosen)
        boms = _best_rows([r for r in table if r.item == "system-non-accelerator-bom"])
        host = statistics.median(r.mid for r in boms) if boms else 0.0
        host_text = (
            f"; plus ${host:,.0f} per node for the host (CPUs, memory, NICs, chassis): the "
            f"only sourced non-GPU bill of materials, {_rows_text(boms)}, applied to every "
            "node as an approximation"
            if boms
            else "; no host price sourced, hosts not included"
        )
        return HardwarePrice(
            per_gpu,
            host,
            "accelerator + host",
            f"accelerator price, median of {len(chosen)} row(s) of onprem_costs.csv: "
            + _rows_text(chosen)
            + host_text,
        )
    priced = sorted(
        {
            r.accelerator
            for r in table
            if r.item in ("system-price", "accelerator-price") and r.accelerator and r.unit_gpus
        }
    )
    raise NoOnPremPriceError(
        f"no on-prem purchase price for {accelerator} in onprem_costs.csv, so its TCO is not "
        f"computed (priced: {', '.join(priced)})"
    )


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _sourced_range(
    item: str,
    basis: str | None = None,
    convert: Callable[[float], float] = float,
    unit: str = "",
) -> str:
    """'onprem_costs.csv <item> rows: low-high unit (n rows; kinds)', values converted."""
    rows = [
        r
        for r in load_onprem_costs()
        if r.item == item and (basis is None or r.unit_basis == basis)
    ]
    if not rows:
        return f"no sourced '{item}' figure"
    values = [convert(r.low) for r in rows] + [convert(r.high) for r in rows if r.high is not None]
    low, high = min(values), max(values)
    span = _num(low) if low == high else f"{_num(low)}-{_num(high)}"
    kinds = sorted({r.source_kind for r in rows}, key=_KIND_RANK.__getitem__)
    what = f"'{item}'" + (f" ({basis})" if basis else "")
    return f"onprem_costs.csv {what}: {span}{unit} ({len(rows)} row(s); {', '.join(kinds)})"


def _log_preferences(prefs: OnPremPreferences, log: Assumptions) -> None:
    given = prefs.model_fields_set

    def origin(*fields: str) -> str:
        return "given in the plan spec" if set(fields) & given else "gpufleet default"

    log.add("on-prem PUE", f"{prefs.pue:g}", f"{origin('pue')}; sourced {_sourced_range('pue')}")
    log.add(
        "on-prem electricity",
        f"${prefs.electricity_usd_per_kwh:g}/kWh",
        f"{origin('electricity_usd_per_kwh')}; sourced "
        + _sourced_range("electricity", unit=" USD/kWh"),
    )
    per_month = _sourced_range(
        "colocation", "per kW-year", lambda v: v / 12.0, " USD per kW-month (derived: ÷ 12)"
    )
    per_rack = _sourced_range("colocation", "per rack-month", unit=" USD per rack-month")
    owned = (
        "0 means an owned facility whose building is not in the TCO (sourced build cost: "
        + _sourced_range("facility-build", unit=" USD per MW")
        + "); "
        if prefs.colocation_usd_per_kw_month == 0
        else ""
    )
    log.add(
        "on-prem colocation",
        f"${prefs.colocation_usd_per_kw_month:g}/kW-month of IT power",
        f"{origin('colocation_usd_per_kw_month')}; {owned}sourced {per_month}; {per_rack}",
    )
    log.add(
        "on-prem depreciation",
        f"{prefs.depreciation_years:g} years, straight line",
        f"{origin('depreciation_years')}; sourced " + _sourced_range("depreciation", unit=" years"),
    )
    log.add(
        "on-prem support",
        f"{prefs.support_fraction_per_year:.0%} of capex per year",
        f"{origin('support_fraction_per_year')}; sourced "
        + _sourced_range("hardware-support", unit=" of the purchase price per year"),
    )
    log.add(
        "on-prem staff",
        f"{prefs.staff_fte_per_100_nodes:g} FTE per 100 nodes at "
        f"${prefs.fte_usd_per_year:,.0f}/FTE-year",
        f"{origin('staff_fte_per_100_nodes', 'fte_usd_per_year')}; sourced "
        + _sourced_range("staff-ratio", convert=lambda v: 100.0 / v, unit=" FTE per 100 nodes")
        + "; "
        + _sourced_range("staff-cost", unit=" USD per FTE-year"),
    )


def on_prem_tco(  # noqa: PLR0917 - the positional signature is the agreed API
    accelerator: str,
    gpus: int,
    nodes: int,
    it_power_kw: float,
    facility_power_kw: float,
    prefs: OnPremPreferences,
    horizon_years: float,
    utilization: float,
    log: Assumptions,
    *,
    system: str | None = None,
    storage_capex_usd: float | None = None,
    network_capex_usd: float | None = None,
    gpu_price_scale: float = 1.0,
) -> dict[str, float]:
    """Total cost of owning the fleet over `horizon_years` (USD; keys below).

    capex = systems + network + storage, where systems = per-GPU price × gpus (+ host per
    node when the price is for accelerators alone; `hardware_price`), network =
    NETWORK_FRACTION_OF_SYSTEMS × systems unless given, storage as given (0 when not).
    opex per year = facility kW × 8,760 h × $/kWh (the design's power drawn all year)
    + colocation $/kW-month × IT kW × 12 + support fraction × capex + FTE per 100 nodes ×
    nodes / 100 × $/FTE-year. Depreciation per year = capex / depreciation years (straight
    line). total = (depreciation + opex) per year × horizon years, and per_gpu_hour = total /
    (gpus × horizon × 8,760 × utilization): the cost of one delivered GPU-hour.
    `gpu_price_scale` multiplies the systems' price (sensitivity).
    """
    if gpus <= 0 or nodes <= 0:
        raise ValueError(f"on-prem TCO needs GPUs and nodes (got {gpus} GPUs, {nodes} nodes)")
    if not 0 < utilization <= 1:
        raise ValueError(f"utilization {utilization} is not in (0, 1]")
    if horizon_years <= 0:
        raise ValueError(f"horizon_years {horizon_years} is not positive")
    price = hardware_price(accelerator, system)
    systems = price.systems_usd(gpus, nodes) * gpu_price_scale
    log.add(
        f"{accelerator} purchase price",
        f"${price.per_gpu_usd:,.0f}/GPU"
        + (f" + ${price.host_per_node_usd:,.0f}/node" if price.host_per_node_usd else ""),
        price.source,
    )
    if network_capex_usd is None:
        network = NETWORK_FRACTION_OF_SYSTEMS * systems
        log.add(
            "on-prem network capex", f"{NETWORK_FRACTION_OF_SYSTEMS:.0%} of systems", NETWORK_SOURCE
        )
    else:
        network = network_capex_usd
    if storage_capex_usd is None:
        storage = 0.0
        log.add(
            "on-prem storage capex",
            "not included",
            "no sourced on-prem storage price (storage.csv prices managed cloud offerings only)",
        )
    else:
        storage = storage_capex_usd
    capex = systems + network + storage
    expected_facility = it_power_kw * prefs.pue
    if facility_power_kw > 0 and not math.isclose(
        facility_power_kw, expected_facility, rel_tol=0.01
    ):
        log.add(
            "on-prem facility power",
            f"{facility_power_kw:g} kW",
            f"from the design; differs from IT {it_power_kw:g} kW × PUE {prefs.pue:g} = "
            f"{expected_facility:g} kW",
        )
    facility = facility_power_kw if facility_power_kw > 0 else expected_facility
    power = facility * HOURS_PER_YEAR * prefs.electricity_usd_per_kwh
    colocation = prefs.colocation_usd_per_kw_month * it_power_kw * 12.0
    support = prefs.support_fraction_per_year * capex
    staff = prefs.staff_fte_per_100_nodes * nodes / 100.0 * prefs.fte_usd_per_year
    opex = power + colocation + support + staff
    depreciation = capex / prefs.depreciation_years
    total = (depreciation + opex) * horizon_years
    delivered = gpus * horizon_years * HOURS_PER_YEAR * utilization
    _log_preferences(prefs, log)
    log.add(
        "on-prem power draw",
        "the design's facility power, every hour of the year",
        "gpufleet assumption (conservative): idle GPUs draw less than the design power",
    )
    log.add(
        "on-prem TCO method",
        "(capex / depreciation years + opex per year) × horizon years; per delivered "
        "GPU-hour at the expected utilization",
        "gpufleet (derived); docs/design/0007-cost-model.md",
    )
    return {
        "capex": capex,
        "capex_systems": systems,
        "capex_network": network,
        "capex_storage": storage,
        "capex_per_gpu": capex / gpus,
        "opex_per_year": opex,
        "opex_power_per_year": power,
        "opex_colocation_per_year": colocation,
        "opex_support_per_year": support,
        "opex_staff_per_year": staff,
        "depreciation_per_year": depreciation,
        "total": total,
        "per_gpu_hour": total / delivered,
        "delivered_gpu_hours": delivered,
        "gpus": float(gpus),
        "nodes": float(nodes),
        "horizon_years": horizon_years,
        "utilization": utilization,
    }


def break_even_months(
    tco: Mapping[str, float], cloud_gpu_hour_usd: float, gpus: int, utilization: float
) -> float | None:
    """Months until renting the used GPU-hours costs more than buying and running the fleet.

    Renting costs cloud price × gpus × utilization × 730 h a month (only the hours used are
    rented); owning costs the capex on day one plus opex per year / 12 a month. They cross at
    capex / (rent − opex) per month. None when renting is cheaper every month (rent ≤ opex)
    or the crossing is beyond 10 years. Replacement at the end of the depreciation period is
    not in this cash view.
    """
    rent = cloud_gpu_hour_usd * gpus * utilization * HOURS_PER_MONTH
    own = tco["opex_per_year"] / 12.0
    if rent <= own:
        return None
    months = tco["capex"] / (rent - own)
    return months if months <= BREAK_EVEN_LIMIT_MONTHS else None


# --------------------------------------------------------------------------- sensitivity


@dataclass(frozen=True)
class Factor:
    """One tornado input: multipliers of its base value at the low and the high end."""

    name: str
    low: float
    high: float


UTILIZATION = "utilization"
GPU_PRICE = "gpu_price"
MFU = "mfu"
FAILURE_RATE = "failure_rate"
ELECTRICITY = "electricity_price"
DEFAULT_FACTORS: tuple[Factor, ...] = (
    Factor(UTILIZATION, 0.8, 1.2),
    Factor(GPU_PRICE, 0.7, 1.3),
    Factor(MFU, 0.85, 1.15),
    Factor(FAILURE_RATE, 0.5, 2.0),
    Factor(ELECTRICITY, 0.5, 1.5),
)
# GPU-hours of training at a failure-rate multiplier, relative to the base (1.0 at 1.0):
# a callable (e.g. from the goodput model) or the precomputed (at low, at high) pair.
FailureHours = Callable[[float], float] | tuple[float, float]


@dataclass(frozen=True)
class OnPremInputs:
    """The on-prem fleet to price (from the cluster design)."""

    gpus: int
    nodes: int
    it_power_kw: float
    facility_power_kw: float
    prefs: OnPremPreferences
    utilization: float
    system: str | None = None
    storage_capex_usd: float | None = None
    network_capex_usd: float | None = None


@dataclass(frozen=True)
class SensitivityInputs:
    """Everything one tornado recomputes: the deployment's cost at the base and each end.

    Cloud: the optimised mix total for the demand. On-prem: cost per delivered GPU-hour ×
    the GPU-hours to deliver (the fleet's at the base, gpus × horizon × utilization), so that
    a higher utilization means a smaller fleet for the same work. MFU and failure rate scale
    the burst (training) GPU-hours; the baseline is not scaled.
    """

    deployment: Literal["cloud", "on-prem"]
    demand: Demand
    prices: Mapping[str, float]
    on_prem: OnPremInputs | None = None
    failure_hours: FailureHours | None = None


def _failure_multiplier(inputs: SensitivityInputs, factor: Factor, setting: float) -> float:
    fh = inputs.failure_hours
    if setting == 1.0 or fh is None:
        return 1.0
    if callable(fh):
        return float(fh(setting))
    low, high = fh
    if setting == factor.low:
        return low
    if setting == factor.high:
        return high
    raise ValueError(f"failure-rate multiplier {setting} has no precomputed GPU-hours")


def _scenario_cost(inputs: SensitivityInputs, settings: Mapping[str, float], train: float) -> float:
    """Total cost with every input at its base × `settings`; training hours × `train`."""
    demand = inputs.demand
    scaled = replace(demand, burst_gpu_hours=demand.burst_gpu_hours * train)
    price = settings.get(GPU_PRICE, 1.0)
    if inputs.deployment == "cloud":
        prices = {k: v * price for k, v in inputs.prices.items()}
        return optimise_mix(scaled, prices, Assumptions())["total_usd"]
    op = inputs.on_prem
    if op is None:
        raise ValueError("an on-prem sensitivity needs on-prem inputs")
    prefs = op.prefs.model_copy(
        update={
            "electricity_usd_per_kwh": op.prefs.electricity_usd_per_kwh
            * settings.get(ELECTRICITY, 1.0)
        }
    )
    utilization = min(1.0, op.utilization * settings.get(UTILIZATION, 1.0))
    horizon_years = demand.horizon_hours / HOURS_PER_YEAR
    tco = on_prem_tco(
        demand.accelerator,
        op.gpus,
        op.nodes,
        op.it_power_kw,
        op.facility_power_kw,
        prefs,
        horizon_years,
        utilization,
        Assumptions(),
        system=op.system,
        storage_capex_usd=op.storage_capex_usd,
        network_capex_usd=op.network_capex_usd,
        gpu_price_scale=price,
    )
    base_work = op.gpus * horizon_years * HOURS_PER_YEAR * op.utilization
    total_hours = demand.gpu_hours
    burst_share = demand.burst_gpu_hours / total_hours if total_hours > 0 else 0.0
    work = base_work * (1.0 + burst_share * (train - 1.0))
    return tco["per_gpu_hour"] * work


def _label(factor: str, multiplier: float) -> str:
    if factor == FAILURE_RATE:
        return f"×{multiplier:g}"
    return f"{(multiplier - 1.0) * 100:+.0f} %"


def sensitivity(
    inputs: SensitivityInputs,
    factors: Sequence[Factor] = DEFAULT_FACTORS,
    log: Assumptions | None = None,
) -> list[dict[str, float | str]]:
    """Tornado rows: the deployment's total cost with one factor at its low and high end.

    utilization × (1 ± 20 %) (capped at 1; on-prem only: cloud rents the hours it uses), GPU
    price × (1 ± 30 %) (cloud prices or the systems' purchase price), MFU × (1 ± 15 %)
    (training GPU-hours ÷ the multiplier), failure rate × 0.5 / × 2 (training GPU-hours ×
    `failure_hours`; the row is left out when it is not given), electricity × (1 ± 50 %)
    (on-prem only). Each row: factor, low_label, high_label, low_usd, high_usd, base_usd,
    swing_usd = |high − low|; rows ordered by swing, largest first.
    """
    base = _scenario_cost(inputs, {}, 1.0)
    rows: list[dict[str, float | str]] = []
    for factor in factors:
        if factor.name == FAILURE_RATE and inputs.failure_hours is None:
            if log is not None:
                log.add(
                    "sensitivity: failure rate",
                    "left out",
                    "no goodput overhead was supplied for failure-rate multipliers",
                )
            continue
        ends: list[float] = []
        for setting in (factor.low, factor.high):
            if factor.name == MFU:
                ends.append(_scenario_cost(inputs, {}, 1.0 / setting))
            elif factor.name == FAILURE_RATE:
                train = _failure_multiplier(inputs, factor, setting)
                ends.append(_scenario_cost(inputs, {}, train))
            else:
                ends.append(_scenario_cost(inputs, {factor.name: setting}, 1.0))
        rows.append(
            {
                "factor": factor.name,
                "low_label": _label(factor.name, factor.low),
                "high_label": _label(factor.name, factor.high),
                "low_usd": ends[0],
                "high_usd": ends[1],
                "base_usd": base,
                "swing_usd": abs(ends[1] - ends[0]),
            }
        )
    rows.sort(key=lambda r: -float(r["swing_usd"]))
    if log is not None:
        log.add(
            "sensitivity method",
            f"{inputs.deployment} total cost, one factor at a time",
            "gpufleet (derived): utilization ±20 %, GPU price ±30 %, MFU ±15 %, failure rate "
            "×0.5/×2, electricity ±50 % (docs/design/0007-cost-model.md)",
        )
    return rows


# --------------------------------------------------------------------------- breakdown


def _spot_max_cost(demand: Demand, prices: Mapping[str, float]) -> float | None:
    """Every spot-eligible burst hour on spot (with its overhead), the rest on-demand."""
    eligible = demand.interruptible_fraction * demand.burst_gpu_hours
    if eligible <= 0 or SPOT not in prices or ON_DEMAND not in prices:
        return None
    rest = demand.gpu_hours - eligible
    return (
        eligible * (1.0 + demand.spot_overhead_fraction) * prices[SPOT] + rest * prices[ON_DEMAND]
    )


def cost_breakdown(
    demand: Demand,
    log: Assumptions,
    *,
    providers: Sequence[str] = PROVIDERS,
    regions: Sequence[str] = (),
    on_prem: OnPremInputs | None = None,
    deployment: Literal["cloud", "on-prem"] | None = None,
    failure_hours: FailureHours | None = None,
    factors: Sequence[Factor] = DEFAULT_FACTORS,
) -> CostBreakdown:
    """The plan's cost section for one accelerator's demand.

    on_demand: all GPU-hours at the on-demand price. reserved: the cheapest purchase of
    reserved GPUs alone (whole GPUs, either term). spot: every spot-eligible burst hour on
    spot with its overhead and the rest on-demand (None when nothing may run on spot). mix:
    `optimise_mix` plus the prices used (`price_<kind>_usd_per_gpu_hour`).
    savings_vs_on_demand = 1 − mix total / on-demand total. tco: `on_prem_tco` when on-prem
    inputs are given (empty, with a note in the log, when the accelerator has no purchase
    price). break_even_months: against the mix's blended price per GPU-hour (on-demand when
    there is no mix). sensitivity: the tornado for `deployment` (default: on-prem when a TCO
    exists, else cloud).
    """
    prices = cloud_prices(demand.accelerator, providers, regions, log)
    hours = demand.gpu_hours
    on_demand = prices[ON_DEMAND] * hours if ON_DEMAND in prices else None
    mix: dict[str, float] = {}
    if prices:
        try:
            mix = optimise_mix(demand, prices, log)
        except ValueError as exc:
            log.add(f"{demand.accelerator} purchase mix", "not computed", str(exc))
    reserved_prices = {k: v for k, v in prices.items() if k in RESERVED_TERM_YEARS}
    reserved: float | None = None
    if reserved_prices:
        reserved = optimise_mix(demand, reserved_prices, Assumptions())["total_usd"]
    spot = _spot_max_cost(demand, prices)
    savings: float | None = None
    if mix and on_demand:
        savings = max(0.0, 1.0 - mix["total_usd"] / on_demand)
    if mix:
        mix.update({f"price_{k}_usd_per_gpu_hour": v for k, v in sorted(prices.items())})
    tco: dict[str, float] = {}
    if on_prem is not None:
        try:
            tco = on_prem_tco(
                demand.accelerator,
                on_prem.gpus,
                on_prem.nodes,
                on_prem.it_power_kw,
                on_prem.facility_power_kw,
                on_prem.prefs,
                demand.horizon_hours / HOURS_PER_YEAR,
                on_prem.utilization,
                log,
                system=on_prem.system,
                storage_capex_usd=on_prem.storage_capex_usd,
                network_capex_usd=on_prem.network_capex_usd,
            )
        except NoOnPremPriceError as exc:
            log.add(f"{demand.accelerator} on-prem TCO", "not computed", str(exc))
    break_even: float | None = None
    rent_rate: float | None = None
    if mix and hours > 0:
        rent_rate = mix["total_usd"] / hours
        rent_what = "the optimised mix's blended price"
    elif ON_DEMAND in prices:
        rent_rate = prices[ON_DEMAND]
        rent_what = "the on-demand price"
    if tco and on_prem is not None and rent_rate is not None:
        break_even = break_even_months(tco, rent_rate, on_prem.gpus, on_prem.utilization)
        log.add(
            "break-even rent",
            f"${rent_rate:.4f}/GPU-h",
            f"{rent_what} per GPU-hour, for gpus × utilization hours a month (derived)",
        )
    chosen = deployment or ("on-prem" if tco else "cloud")
    rows: list[dict[str, float | str]] = []
    if (chosen == "on-prem" and tco) or (chosen == "cloud" and mix):
        rows = sensitivity(
            SensitivityInputs(chosen, demand, prices, on_prem, failure_hours), factors, log
        )
    return CostBreakdown(
        on_demand=on_demand,
        reserved=reserved,
        spot=spot,
        mix=mix,
        savings_vs_on_demand=savings,
        tco=tco,
        break_even_months=break_even,
        sensitivity=rows,
    )
