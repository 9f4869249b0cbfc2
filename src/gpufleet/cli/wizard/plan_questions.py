"""The plan's questions: where the workloads run (cloud, on-prem or both) and on what.

They come after the workloads because the answers depend on them: an fp8 training
run rules out accelerators without fp8 units, and a single workload lends the plan
its name. Regions are checked against the instance catalog, so a typo is caught
with a suggestion instead of an empty price list later.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.instances import load_instances
from gpufleet.cli.wizard.answers import check, field, items, number
from gpufleet.cli.wizard.askers import Asker
from gpufleet.errors import suggest
from gpufleet.specs.plan import OnPremPreferences, PlanSpec


def _parse_deployment(value: object) -> str:
    text = str(value).strip().lower().replace("_", "-").replace(" ", "-")
    text = {"onprem": "on-prem", "on-premises": "on-prem", "own": "on-prem"}.get(text, text)
    return str(check(PlanSpec, "deployment", text))


def _parse_providers(value: object) -> list[str]:
    providers: list[str] = []
    for item in items(value):
        provider = str(check(PlanSpec, "providers", [str(item).strip().lower()])[0])
        if provider not in providers:
            providers.append(provider)
    if not providers:
        raise ValueError("name at least one of aws, gcp, azure")
    return providers


def _known_regions(providers: Sequence[str]) -> list[str]:
    return sorted({r.region for r in load_instances() if r.provider in providers})


def _parse_regions(value: object, providers: Sequence[str]) -> list[str]:
    known = _known_regions(providers)
    by_lower = {r.lower(): r for r in known}
    regions: list[str] = []
    for item in items(value):
        text = str(item).strip()
        region = by_lower.get(text.lower())
        if region is None:
            hints = suggest(text, known, limit=2)
            tail = f"; did you mean {' or '.join(repr(h) for h in hints)}?" if hints else ""
            raise ValueError(f"no {', '.join(providers)} region '{text}' in the catalog{tail}")
        if region not in regions:
            regions.append(region)
    return regions


def _parse_utilization(value: object) -> float:
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            value = float(value.strip()[:-1]) / 100
        except ValueError:
            raise ValueError(f"expected a fraction such as 0.7 or 70%, got {value!r}") from None
    try:
        return float(check(PlanSpec, "expected_utilization", value))
    except ValueError as exc:
        raise ValueError(f"{exc} (a fraction: write 0.7 or 70%)") from None


def _parse_accelerators(value: object, fp8_training: Sequence[str]) -> list[str]:
    names: list[str] = []
    for item in items(value):
        name = str(check(PlanSpec, "accelerators", [str(item).strip()])[0])
        device = get_accelerator(name)
        if fp8_training and device.fp8_dense_tflops is None:
            raise ValueError(
                f"{name} has no fp8 units, but {', '.join(fp8_training)} trains in fp8; "
                "leave it out or train in bf16"
            )
        if name not in names:
            names.append(name)
    return names


def plan_questions(asker: Asker, workloads: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = asker.ask(
        "deployment",
        "Where will it run: cloud, on-prem or both (compare them)",
        _parse_deployment,
        default="both",
        explain=(
            "Cloud rents GPUs by the hour: no capital outlay, pay for what you use. On-prem buys "
            "them: cheaper per GPU-hour when kept busy, but capex, power, space and staff. Both "
            "prices the two side by side with the break-even point."
        ),
    )
    plan: dict[str, Any] = {"kind": "plan", "name": "plan", "deployment": deployment}
    if deployment != "on-prem":
        providers = asker.ask(
            "providers",
            "Which clouds to price (aws, gcp, azure)",
            _parse_providers,
            default="aws, gcp, azure",
            explain="Instance types, networking and prices differ by provider.",
        )
        known = _known_regions(providers)
        regions = asker.ask_optional(
            "regions",
            "Regions to price (e.g. us-east-1, us-central1)",
            lambda v: _parse_regions(v, providers),
            explain=(
                "Prices and GPU availability vary by region. Blank: every region of these "
                "clouds in the instance catalog."
            ),
            blank=f"all {len(known)} {', '.join(providers)} regions in the catalog",
        )
        plan["providers"] = providers
        if regions:
            plan["regions"] = regions
    plan["currency"] = "USD"
    if deployment != "cloud":
        plan["expected_utilization"] = asker.ask(
            "expected_utilization",
            "Expected utilization of owned GPUs (e.g. 0.7 or 70%)",
            _parse_utilization,
            default="0.7",
            explain=(
                "The share of hours your own GPUs do useful work. Owning pays off only when "
                "they are busy: at 35 % each useful GPU-hour costs twice what it costs at 70 %, "
                "which moves the break-even against renting."
            ),
        )
        rack_kw = asker.ask(
            "rack_power_kw",
            "Power per rack in kW",
            field(OnPremPreferences, "rack_power_kw"),
            default="30",
            explain=(
                "An 8-GPU H100 server draws about 10 kW: air-cooled racks (~30 kW) hold two or "
                "three, liquid-cooled ones (60 kW and more) hold more, so fewer racks and "
                "shorter cables, at the cost of liquid cooling."
            ),
        )
        price = asker.ask(
            "electricity_usd_per_kwh",
            "Electricity price in USD per kWh",
            field(OnPremPreferences, "electricity_usd_per_kwh"),
            default="0.10",
            explain="Power × PUE × this price is a main running cost of owned GPUs.",
        )
        plan["on_prem"] = {"rack_power_kw": number(rack_kw), "electricity_usd_per_kwh": price}
    fp8_training = [
        w["name"]
        for w in workloads
        if w["kind"] == "training" and w["training"]["precision"] == "fp8"
    ]
    # imported here: `gpufleet --help` imports this module and need not load the planner
    from gpufleet.plan.planner import DEFAULT_ACCELERATORS

    standard = ", ".join(DEFAULT_ACCELERATORS)
    accelerators = asker.ask_optional(
        "accelerators",
        "Accelerators to consider (e.g. h100, h200, mi300x)",
        lambda v: _parse_accelerators(v, fp8_training),
        explain=(
            "Catalog names or aliases (gpufleet catalog gpus), for example what you can buy "
            f"or rent. Blank: the planner's standard set ({standard}). It compares them and "
            "says why the winner wins."
        ),
        blank=f"the planner's standard set: {standard}",
    )
    if accelerators:
        plan["accelerators"] = accelerators
    plan["name"] = asker.ask(
        "plan_name",
        "A name for the plan",
        field(PlanSpec, "name"),
        default=workloads[0]["name"] if len(workloads) == 1 else "plan",
    )
    plan["workloads"] = workloads
    return plan
