"""Whose on-demand price the optimised mix's saving is against (CFO review, (b)).

pretrain-8b rents AWS capacity blocks ("Rent 512 × h100-sxm5-80gb on aws") and its report
said "The optimised mix saves 8.7% against on-demand prices": the on-demand figure was GCP's
a3-highgpu-8g at $5.38/GPU-h, the cheapest provider's, not AWS's own $6.88. The saving stays
against the cheapest on-demand price (the no-commitment alternative, and the plan's On-demand
total) and now says whose it is and what the provider the mix buys from asks. Expected
figures come from the Cloud options table (`plan.cloud`, a separate reading of the catalog),
not from the cost model's price table.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpufleet.cli.main import main
from gpufleet.formatting import fmt_pct, fmt_usd
from gpufleet.plan.cost.prices import InstanceOffer
from gpufleet.plan.cost.reference import on_demand_reference
from gpufleet.plan.model import CloudOffer, Plan

EXAMPLES = Path(__file__).parents[2] / "examples"
GCP = InstanceOffer("gcp", "a3-highgpu-8g", "us-central1", 8)
AWS = InstanceOffer("aws", "p5.48xlarge", "us-east-1", 8)


def test_a_mix_bought_elsewhere_names_both_prices() -> None:
    text = on_demand_reference(
        3_075_800.4, "gcp", {"aws": (6.8807, AWS), "gcp": (5.3832, GCP)}, {"aws": 2_808_820.0}
    )
    assert text == (
        "on-demand at the cheapest provider where the plan may rent, gcp a3-highgpu-8g in "
        "us-central1 at $5.38/GPU-h ($3,075,800 for the same GPU-hours); the mix buys 100.0% "
        "of its cost from aws, whose lowest on-demand price is $6.88/GPU-h (p5.48xlarge in "
        "us-east-1)"
    )


def test_a_mix_bought_from_the_cheapest_provider_names_it_alone() -> None:
    text = on_demand_reference(
        27_701_265.0,
        "gcp",
        {"aws": (6.8807, AWS), "gcp": (5.3832, GCP)},
        {"gcp": 27_066_564.0, "aws": 10.0},
    )
    assert text == (
        "on-demand at the cheapest provider where the plan may rent, gcp a3-highgpu-8g in "
        "us-central1 at $5.38/GPU-h ($27,701,265 for the same GPU-hours)"
    )


def test_one_provider_is_not_called_the_cheapest() -> None:
    text = on_demand_reference(100.0, "aws", {"aws": (6.8807, AWS)}, {"aws": 50.0})
    assert text.startswith("on-demand at aws p5.48xlarge in us-east-1 at $6.88/GPU-h")


def _per_gpu(offer: CloudOffer) -> float:
    return (offer.on_demand_usd_per_hour or 0.0) / offer.gpus


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`gpufleet plan examples/plan-pretrain-8b.yaml`: the reports and the terminal."""
    out = tmp_path_factory.mktemp("pretrain-8b")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["plan", str(EXAMPLES / "plan-pretrain-8b.yaml"), "--out", str(out)])
    assert code == 0, buffer.getvalue()
    return out, buffer.getvalue()


def test_pretrain_8b_names_the_on_demand_price_its_saving_is_against(
    written: tuple[Path, str],
) -> None:
    out, _ = written
    result = Plan.model_validate_json((out / "plan.json").read_text(encoding="utf-8"))
    cost = result.cost
    assert result.recommendation.provider == "aws"
    assert next(iter(cost.mix_by_provider)) == "aws"
    # the cheapest on-demand offer in the Cloud options table, and AWS's own
    offers = [o for rows in result.cloud.values() for o in rows]
    cheapest = min(offers, key=_per_gpu)
    aws = min(result.cloud["aws"], key=_per_gpu)
    assert (cheapest.provider, cheapest.instance, cheapest.region) == (
        "gcp",
        "a3-highgpu-8g",
        "us-central1",
    )
    rented = cost.mix["rented_gpu_hours"]
    assert cost.on_demand == pytest.approx(_per_gpu(cheapest) * rented)
    assert cost.savings_vs_on_demand == pytest.approx(1.0 - cost.mix["total_usd"] / cost.on_demand)
    assert round(cost.savings_vs_on_demand * 100, 1) == 8.7
    share = cost.mix_by_provider["aws"] / sum(cost.mix_by_provider.values())
    assert cost.price_caveats["on_demand"] == (
        "on-demand at the cheapest provider where the plan may rent, gcp a3-highgpu-8g in "
        f"us-central1 at ${_per_gpu(cheapest):.2f}/GPU-h ({fmt_usd(cost.on_demand)} for the "
        f"same GPU-hours); the mix buys {fmt_pct(share)} of its cost from aws, whose lowest "
        f"on-demand price is ${_per_gpu(aws):.2f}/GPU-h ({aws.instance} in {aws.region})"
    )
    assert f"${_per_gpu(cheapest):.2f}" == "$5.38"
    assert f"${_per_gpu(aws):.2f}" == "$6.88"


def test_every_format_says_the_same(written: tuple[Path, str]) -> None:
    out, terminal = written
    data = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    cost = data["cost"]
    clause = cost["price_caveats"]["on_demand"]
    sentence = f"saves **{fmt_pct(cost['savings_vs_on_demand'])}†** against {clause}."
    markdown = (out / "plan.md").read_text(encoding="utf-8")
    assert sentence in markdown
    assert "against on-demand prices" not in markdown
    assert "Note on the On-demand price" not in markdown  # said once, in the sentence
    html = (out / "plan.html").read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", "", html)
    assert f"saves {fmt_pct(cost['savings_vs_on_demand'])}† against {clause}." in text
    # the terminal states the same On-demand total the saving divides by
    assert f"on-demand {fmt_usd(cost['on_demand'])}" in terminal
    assert fmt_usd(cost["on_demand"]) in clause
    if shutil.which("pdftotext") is not None:
        pdf = subprocess.run(
            ["pdftotext", str(out / "plan.pdf"), "-"], capture_output=True, check=True, text=True
        ).stdout
        assert " ".join(clause.split()) in " ".join(pdf.split())
