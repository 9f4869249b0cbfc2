"""On-prem TCO: what owning the designed fleet costs, and when that beats renting.

Owning is priced from onprem_costs.csv and the plan's on-prem preferences, not from cloud
prices, so it has its own sources, defaults and log lines; break-even sits here because it
reads the TCO's capex and opex and only a single rent rate from the cloud side.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpufleet.catalog.onprem import OnPremCost, load_onprem_costs
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.formatting import fmt_count, fmt_pct, fmt_usd, fmt_usd_rate
from gpufleet.plan.cost.demand import HOURS_PER_YEAR
from gpufleet.plan.cost.prices import KIND_RANK
from gpufleet.specs.plan import OnPremPreferences

HOURS_PER_MONTH = HOURS_PER_YEAR / 12.0
BREAK_EVEN_LIMIT_MONTHS = 120.0

# gpufleet assumption, no source: switch, NIC, optics and cable prices were not found in the
# research (onprem_costs.md §7), so the scale-out network is priced as a share of the systems.
NETWORK_FRACTION_OF_SYSTEMS = 0.10
NETWORK_SOURCE = (
    "gpufleet assumption (no sourced price): InfiniBand/Ethernet switch, NIC, optics and "
    "cable prices were not found in the research notes; the scale-out network is taken as "
    f"{NETWORK_FRACTION_OF_SYSTEMS:.0%} of the systems' price. Systems priced whole (DGX) "
    "already include their NICs. Pass network_capex_usd to override."
)


class NoOnPremPriceError(UserError, ValueError):
    """The catalog has no purchase price for this accelerator; the caller turns it into a note."""


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
    # demand above the owned fleet, rented (`plan.demand_curve`); part of the on-prem total
    burst_rent_usd: float = 0.0
    owned_work_gpu_hours: float | None = None  # the demand the owned fleet serves (None: all)
    # the GPU-hours `burst_rent_usd` pays for (`DemandCurve.rented_gpu_hours`), so that the
    # rent-or-own table counts them with the rent (None: not given; the report then reads them
    # from the plan's demand curve)
    burst_gpu_hours: float | None = None
    # the most GPUs the owned fleet's work holds at once (the fleet policy's figure on the
    # demand curve, `plan.demand_curve.held_at_once`): the sensitivity never prices a fleet
    # with fewer whole nodes (None: not given; the tornado reads the demand's GPUs at once)
    held_gpus: int | None = None

    def served_gpu_hours(self, work_gpu_hours: float) -> float:
        """The planned work's GPU-hours on the owned fleet: the demand curve's figure (its
        "Served by the owned fleet") where the planner gives it, else all of the work (the
        rent-or-own verdict's reading of the same None)."""
        owned = self.owned_work_gpu_hours
        return work_gpu_hours if owned is None else owned


def delivered_gpu_hours(
    gpus: float, horizon_hours: float, utilization: float, served_gpu_hours: float | None = None
) -> float:
    """The GPU-hours an owned fleet delivers, the denominator of its cost per GPU-hour: the
    stated utilization × the GPU-hours it holds, or the planned work it serves where that is
    more (never more than it holds). A serving fleet sized for a request rate is held, and
    serves, every hour whatever a training queue's utilization says: chat-70b's 8 GPUs
    served 210,240 GPU-hours in the demand table while the TCO divided by 80 % of them,
    168,192. Where the planned work fills less than the stated share (a 90-day run on a
    3-year fleet), the stated utilization stands: it says other work fills the rest.
    `served_gpu_hours` None: the stated utilization alone (the fleet planner's simulated one)."""
    held = gpus * horizon_hours
    stated = held * utilization
    if served_gpu_hours is None:
        return stated
    return max(stated, min(served_gpu_hours, held))


def _per_delivered(
    gpus: int, horizon_years: float, utilization: float, served: float | None, owning: float
) -> dict[str, float]:
    """The TCO's GPU-hours held, served (when known) and delivered, and the owned fleet's
    cost per delivered GPU-hour, in the order the report's table shows them."""
    hours = horizon_years * HOURS_PER_YEAR
    delivered = delivered_gpu_hours(gpus, hours, utilization, served)
    return {
        "held_gpu_hours": gpus * hours,
        **({} if served is None else {"served_gpu_hours": served}),
        "delivered_gpu_hours": delivered,
        "per_gpu_hour": owning / delivered,
    }


def per_gpu_hour_text(tco: Mapping[str, float]) -> str:
    """What the TCO's cost per delivered GPU-hour divides by what, from the TCO's own
    numbers ('' where they are not all there: a plan.json from before it said): the report
    prints it under the TCO table so a reader can redo the division."""
    needed = ("per_gpu_hour", "delivered_gpu_hours", "gpus", "horizon_years", "utilization")
    if any(k not in tco for k in needed) or tco["delivered_gpu_hours"] <= 0:
        return ""
    gpus, years, u = tco["gpus"], tco["horizon_years"], tco["utilization"]
    held = tco.get("held_gpu_hours", gpus * years * HOURS_PER_YEAR)
    delivered = tco["delivered_gpu_hours"]
    owning = tco["per_gpu_hour"] * delivered
    burst = tco.get("burst_rent", 0.0)
    what = (
        f"{fmt_usd(owning)} (the TCO less the {fmt_usd(burst)} renting the demand above the fleet)"
        if burst
        else f"{fmt_usd(owning)} (the TCO)"
    )
    served = tco.get("served_gpu_hours")
    stated = held * u
    span = f"{years:g} year{'' if years == 1 else 's'}"
    text = (
        f"Per delivered GPU-hour: {what} ÷ {fmt_count(round(delivered))} delivered GPU-hours "
        f"= {fmt_usd_rate(tco['per_gpu_hour'])}. "
    )
    if served is not None and delivered > stated:
        return text + (
            f"Delivered: the planned work the owned fleet serves (Demand and the owned fleet), "
            f"{fmt_pct(delivered / held)} of the {fmt_count(round(held))} GPU-hours its "
            f"{fmt_count(gpus)} GPUs hold over {span}, more than the stated "
            f"{fmt_pct(u)} utilization's {fmt_count(round(stated))}: a fleet its work holds "
            "every hour delivers every hour"
        )
    text += (
        f"Delivered: the stated {fmt_pct(u)} utilization × the {fmt_count(round(held))} "
        f"GPU-hours its {fmt_count(gpus)} GPUs hold over {span}"
    )
    if served is not None:
        text += (
            f"; the planned work fills {fmt_pct(min(1.0, served / held))} of them "
            f"({fmt_count(round(served))} GPU-hours): the stated utilization counts on other "
            "work for the rest of its share"
        )
    return text


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
    key = min((KIND_RANK[r.source_kind], r.high is None) for r in rows)
    return [r for r in rows if (KIND_RANK[r.source_kind], r.high is None) == key]


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


def sourced_midpoint(item: str, basis: str) -> float:
    """The median midpoint of the best-sourced onprem_costs.csv rows of `item` per `basis`."""
    rows = _best_rows([r for r in load_onprem_costs() if r.item == item and r.unit_basis == basis])
    if not rows:
        raise ValueError(f"onprem_costs.csv has no '{item}' row per {basis}")
    return statistics.median(r.mid for r in rows)


def colocation_usd_per_kw_month(prefs: OnPremPreferences) -> float:
    """As given, else the sourced per-kW-year midpoint ÷ 12."""
    given = prefs.colocation_usd_per_kw_month
    return given if given is not None else sourced_midpoint("colocation", "per kW-year") / 12.0


def facility_build_usd_per_mw(prefs: OnPremPreferences) -> float:
    """As given, else the sourced per-MW build cost's midpoint."""
    given = prefs.facility_build_usd_per_mw
    return given if given is not None else sourced_midpoint("facility-build", "per MW")


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
    kinds = sorted({r.source_kind for r in rows}, key=KIND_RANK.__getitem__)
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
    build = _sourced_range("facility-build", unit=" USD per MW")

    def basis(given: float | None) -> str:
        return (
            "given in the plan spec"
            if given is not None
            else "gpufleet default: the sourced midpoint"
        )

    if prefs.facility == "colocation":
        rate = colocation_usd_per_kw_month(prefs)
        log.add(
            "on-prem facility",
            f"colocation at ${rate:,.2f}/kW-month of IT power",
            f"{basis(prefs.colocation_usd_per_kw_month)}; sourced {per_month}; {per_rack}",
        )
    elif prefs.facility == "build":
        rate = facility_build_usd_per_mw(prefs)
        log.add(
            "on-prem facility",
            f"built for the fleet at ${rate:,.0f}/MW of IT power, amortised straight-line over "
            f"{prefs.facility_life_years:g} years",
            f"{basis(prefs.facility_build_usd_per_mw)}; sourced {build}; the "
            f"{prefs.facility_life_years:g}-year life is {origin('facility_life_years')} (no "
            "sourced figure; wholesale colocation leases run 5-15 years)",
        )
    else:
        log.add(
            "on-prem facility",
            "an existing building: not in the TCO",
            f"given in the plan spec (facility: existing); building one would cost {build}",
        )
    log.add(
        "on-prem discount rate",
        f"{prefs.discount_rate:.1%} a year",
        f"{origin('discount_rate')} (no sourced figure: set discount_rate to your cost of "
        "capital); used for present values only, the totals are undiscounted",
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


def spread_factor(years: float, rate: float) -> float:
    """Present value of 1 USD paid evenly over `years` from now, at a yearly `rate`
    (continuous: (1 − (1+r)^−T) / (T ln(1+r))); 1 at a zero rate."""
    if rate <= 0 or years <= 0:
        return 1.0
    growth = math.log1p(rate)
    return (1.0 - math.exp(-growth * years)) / (years * growth)


def discount(years: float, rate: float) -> float:
    """Present value of 1 USD paid `years` from now."""
    return math.exp(-math.log1p(rate) * years)


@dataclass(frozen=True)
class Asset:
    """Something bought now and again at the end of each life until the horizon, worth its
    straight-line book value at the horizon: the TCO charges exactly what it uses up."""

    cost_usd: float
    life_years: float

    def purchase_years(self, horizon_years: float) -> list[float]:
        """When it is bought, in years from now (the last purchase before the horizon)."""
        n = max(1, math.ceil(horizon_years / self.life_years - 1e-9))
        return [k * self.life_years for k in range(n)]

    def residual_usd(self, horizon_years: float) -> float:
        if self.cost_usd == 0:
            return 0.0
        age = horizon_years - self.purchase_years(horizon_years)[-1]
        return self.cost_usd * max(0.0, 1.0 - age / self.life_years)

    def replacements_usd(self, horizon_years: float) -> float:
        """What the purchases after the first cost within the horizon (undiscounted)."""
        return self.cost_usd * (len(self.purchase_years(horizon_years)) - 1)

    def present_usd(self, horizon_years: float, rate: float) -> float:
        bought = sum(self.cost_usd * discount(t, rate) for t in self.purchase_years(horizon_years))
        return bought - self.residual_usd(horizon_years) * discount(horizon_years, rate)


def owned_assets(
    hardware_usd: float, building_usd: float, prefs: OnPremPreferences
) -> tuple[Asset, Asset]:
    """The hardware (bought again every depreciation life) and the facility build (every
    facility life): the one schedule of purchases the TCO, its present value and the
    payback all read, so none of them can forget a replacement."""
    return (
        Asset(hardware_usd, prefs.depreciation_years),
        Asset(building_usd, prefs.facility_life_years),
    )


def _log_replacements(assets: Sequence[Asset], horizon_years: float, log: Assumptions) -> None:
    """Say when and for how much an asset the horizon outlives is bought again."""
    for asset, what in zip(assets, ("hardware", "facility build"), strict=True):
        again = asset.purchase_years(horizon_years)[1:]
        if not again or asset.cost_usd == 0:
            continue
        years = ", ".join(f"{t:g}" for t in again)
        log.add(
            f"on-prem {what} replacement",
            f"bought again in year {years} (${asset.cost_usd:,.0f} each)",
            f"the {horizon_years:g}-year horizon outlives its {asset.life_years:g}-year "
            "straight-line life: the TCO pays every purchase and credits the last one's book "
            "value at the horizon's end (total = capex + replacement purchases − residual "
            "value + opex × years); the payback counts the same purchases (gpufleet "
            "assumption: the fleet is replaced like for like, at today's price)",
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
    burst_rent_usd: float = 0.0,
    served_gpu_hours: float | None = None,
) -> dict[str, float]:
    """Total cost of owning the fleet over `horizon_years` (USD; keys below).

    capex = hardware + facility build, where hardware = systems + network + storage: systems
    = per-GPU price × gpus (+ host per node when the price is for accelerators alone;
    `hardware_price`), network = NETWORK_FRACTION_OF_SYSTEMS × systems unless given, storage
    as given (0 when not); facility build = $/MW × IT MW when `facility: build`.
    opex per year = facility kW × 8,760 h × $/kWh (the design's power drawn all year)
    + colocation $/kW-month × IT kW × 12 (`facility: colocation`) + support fraction ×
    hardware + FTE per 100 nodes × nodes / 100 × $/FTE-year. Depreciation per year =
    hardware / depreciation years + facility build / facility life (straight line).
    total = (depreciation + opex) per year × horizon years — capex, plus the hardware (and
    facility) bought again when the horizon outlives its life (`replacement_purchases`,
    `Asset`), less the last purchase's book value at the horizon's end, plus opex: the table
    adds up to the total — and per_gpu_hour = total / delivered GPU-hours: the cost of one
    delivered GPU-hour, where delivered = the stated utilization × gpus × horizon × 8,760, or
    `served_gpu_hours` (the planned work on the owned fleet) where that is more
    (`delivered_gpu_hours`). `burst_rent_usd` (demand above the owned fleet, rented) is
    added to the total, not to per_gpu_hour. present_value
    discounts the same cash flows (`Asset.present_usd`, opex and rent spread evenly) at
    `prefs.discount_rate`.
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
        if network == 0:
            log.add(
                "on-prem network capex",
                "none",
                "no scale-out fabric is designed (the design's verdict says why): front-end "
                "Ethernet comes with the systems",
            )
    if storage_capex_usd is None:
        storage = 0.0
        log.add(
            "on-prem storage capex",
            "not included",
            "no sourced on-prem storage price (storage.csv prices managed cloud offerings only)",
        )
    else:
        storage = storage_capex_usd
    hardware = systems + network + storage
    building = (
        facility_build_usd_per_mw(prefs) * it_power_kw / 1000.0
        if prefs.facility == "build"
        else 0.0
    )
    capex = hardware + building
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
    colocation = (
        colocation_usd_per_kw_month(prefs) * it_power_kw * 12.0
        if prefs.facility == "colocation"
        else 0.0
    )
    support = prefs.support_fraction_per_year * hardware
    staff = prefs.staff_fte_per_100_nodes * nodes / 100.0 * prefs.fte_usd_per_year
    opex = power + colocation + support + staff
    depreciation = hardware / prefs.depreciation_years + building / prefs.facility_life_years
    owning = (depreciation + opex) * horizon_years
    total = owning + burst_rent_usd
    hardware_life, building_life = owned_assets(hardware, building, prefs)
    residual = hardware_life.residual_usd(horizon_years) + building_life.residual_usd(horizon_years)
    replacements = hardware_life.replacements_usd(horizon_years) + building_life.replacements_usd(
        horizon_years
    )
    _log_replacements((hardware_life, building_life), horizon_years, log)
    present = (
        hardware_life.present_usd(horizon_years, prefs.discount_rate)
        + building_life.present_usd(horizon_years, prefs.discount_rate)
        + (opex * horizon_years + burst_rent_usd)
        * spread_factor(horizon_years, prefs.discount_rate)
    )
    _log_preferences(prefs, log)
    log.add(
        "on-prem power draw",
        "the design's facility power, every hour of the year",
        "gpufleet assumption (conservative): idle GPUs draw less than the design power",
    )
    log.add(
        "on-prem TCO method",
        "(hardware / depreciation years + facility build / facility life + opex per year) × "
        "horizon years = capex + replacement purchases (when the horizon outlives the "
        "hardware or the facility) − residual value + opex × years; per delivered GPU-hour: "
        "the stated utilization × the GPU-hours the fleet holds, or the planned work it "
        "serves where that is more (a fleet its work holds every hour delivers every hour); "
        "present value: purchases when made, residual value at the "
        "horizon's end, opex spread evenly, at the discount rate; payback: the same purchases "
        "when made against the monthly saving",
        "gpufleet (derived); docs/design/0007-cost-model.md",
    )
    out = {
        "capex": capex,
        "capex_systems": systems,
        "capex_network": network,
        "capex_storage": storage,
        "capex_facility": building,
        "capex_per_gpu": capex / gpus,
        # bought again when the horizon outlives them: total = capex + this − residual + opex
        "replacement_purchases": replacements,
        # when the hardware and the facility build are bought again (the break-even chart's
        # steps, and what a reader checks the replacement row against)
        "depreciation_years": prefs.depreciation_years,
        "facility_life_years": prefs.facility_life_years,
        "opex_per_year": opex,
        "opex_power_per_year": power,
        "opex_colocation_per_year": colocation,
        "opex_support_per_year": support,
        "opex_staff_per_year": staff,
        "depreciation_per_year": depreciation,
        "residual_value": residual,
        "total": total,
        "present_value": present,
        "discount_rate": prefs.discount_rate,
        # per delivered GPU-hour: what divides by what is `per_gpu_hour_text`
        **_per_delivered(gpus, horizon_years, utilization, served_gpu_hours, owning),
        "gpus": float(gpus),
        "nodes": float(nodes),
        "horizon_years": horizon_years,
        "utilization": utilization,
    }
    if burst_rent_usd:
        out["burst_rent"] = burst_rent_usd
        log.add(
            "on-prem burst rent",
            f"${burst_rent_usd:,.0f} in the total",
            "demand above the owned fleet, rented at the optimised mix (plan/demand_curve.py); "
            "per_gpu_hour is the owned fleet's alone",
        )
    return out


def break_even_months(
    tco: Mapping[str, float],
    cloud_gpu_hour_usd: float,
    gpus: int,
    utilization: float,
    *,
    assets: Sequence[Asset],
) -> float | None:
    """Months until renting the used GPU-hours costs more than buying and running the fleet.

    Renting costs cloud price × gpus × utilization × 730 h a month (only the hours used are
    rented); owning costs its purchases when made (`assets`: the capex on day one and each
    asset again at the end of its life, as the TCO buys them; `owned_assets`) plus opex per
    year / 12 a month. Rent of the demand above the owned fleet is paid the same each
    month whether the fleet is owned or rented, so it cancels and is on neither side (as
    the rent-or-own comparison puts it on both). None when renting is cheaper every month
    (rent ≤ opex), when the savings never catch up with the purchases (a payback longer
    than the hardware's life is overtaken by its replacement, and so is every later one),
    or when the crossing is beyond 10 years.
    """
    rent = cloud_gpu_hour_usd * gpus * utilization * HOURS_PER_MONTH
    own = tco["opex_per_year"] / 12.0
    if rent <= own:
        return None
    months = payback_months(assets, rent - own)
    return months if months is not None and months <= BREAK_EVEN_LIMIT_MONTHS else None


def payback_months(assets: Sequence[Asset], saving_usd_per_month: float) -> float | None:
    """The first month at which the saving, accrued since day one, has paid every purchase
    made by then (purchases within 10 years; None for a saving that is not positive)."""
    if saving_usd_per_month <= 0:
        return None
    limit_years = BREAK_EVEN_LIMIT_MONTHS / 12.0
    purchases = sorted(
        (t * 12.0, a.cost_usd)
        for a in assets
        if a.cost_usd > 0
        for t in a.purchase_years(limit_years)
    )
    spent = sum(usd for month, usd in purchases if month == 0)
    for month, usd in purchases:
        if month == 0:
            continue
        if spent / saving_usd_per_month <= month:
            break
        spent += usd
    return spent / saving_usd_per_month
