"""What a plan costs: cloud prices, the cheapest purchase mix, on-prem TCO and break-even.

Design note: docs/design/0007-cost-model.md. One module per job, each reading only the ones
listed before it:

- `demand`: the `Demand` (a steady baseline plus burst GPU-hours) every other module prices.
- `prices`: `cloud_prices` turns the catalog into one price per GPU-hour for each way of
  buying it: on-demand and spot list prices from instances.csv, 1- and 3-year reserved prices
  as on-demand × (1 − discount) from commitments.csv, and AWS Capacity Block rates.
- `instances`: `on_whole_instances` rounds a `Demand` to the whole instances the priced offer
  rents (8 GPUs for every H100/H200 row), so every cloud figure prices what can be rented.
- `mix`: `optimise_mix` buys a `Demand` at least cost with a HiGHS linear program, then rounds
  reserved GPUs to whole instances.
- `steady`: `SteadyRent` prices steady use of the owned fleet (a flat demand) with the same
  optimiser, never on spot, and solves the break-even utilisation against it.
- `tco`: `on_prem_tco` prices owning the fleet: capex (systems, network, storage), opex
  (power × PUE, colocation, support, staff), straight-line depreciation, cost per delivered
  GPU-hour; `break_even_months` is when renting would have cost more than owning.
- `tornado`: `sensitivity` is the tornado, total cost as one input moves at a time.
- `breakdown`: `cost_breakdown` assembles the plan's `CostBreakdown` from all of the above.

Every figure read from the catalog and every default is written to the `Assumptions` log with
its source; numbers gpufleet chooses without a source say so ("gpufleet assumption").
Money is USD throughout.
"""

from gpufleet.plan.cost.breakdown import cost_breakdown
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand
from gpufleet.plan.cost.mix import optimise_mix
from gpufleet.plan.cost.prices import (
    CAPACITY_BLOCK,
    ON_DEMAND,
    RESERVED_1Y,
    RESERVED_3Y,
    SPOT,
    cloud_prices,
)
from gpufleet.plan.cost.tco import (
    NETWORK_FRACTION_OF_SYSTEMS,
    HardwarePrice,
    NoOnPremPriceError,
    OnPremInputs,
    break_even_months,
    hardware_price,
    on_prem_tco,
)
from gpufleet.plan.cost.tornado import (
    DEFAULT_FACTORS,
    Factor,
    FailureHours,
    SensitivityInputs,
    sensitivity,
)

__all__ = [
    "CAPACITY_BLOCK",
    "DEFAULT_FACTORS",
    "HOURS_PER_YEAR",
    "NETWORK_FRACTION_OF_SYSTEMS",
    "ON_DEMAND",
    "RESERVED_1Y",
    "RESERVED_3Y",
    "SPOT",
    "Demand",
    "Factor",
    "FailureHours",
    "HardwarePrice",
    "NoOnPremPriceError",
    "OnPremInputs",
    "SensitivityInputs",
    "break_even_months",
    "cloud_prices",
    "cost_breakdown",
    "hardware_price",
    "on_prem_tco",
    "optimise_mix",
    "sensitivity",
]
