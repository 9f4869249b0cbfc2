"""Cloud instance table: reproducible build, sourced prices, cleaning, lookups."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import io
import sys
import time
from decimal import Decimal
from pathlib import Path
from types import ModuleType

import pytest

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.columns import TEXT_COLUMNS, unit_of
from gpufleet.catalog.instances import (
    CloudInstance,
    get_instance,
    instances_for,
    load_instances,
)
from gpufleet.catalog.table import data_file
from gpufleet.errors import UnknownNameError

REPO = Path(__file__).resolve().parents[2]
GIB = 2**30
MIB = 2**20
TEXT = {
    "provider",
    "name",
    "region",
    "price_scope",
    "accelerator",
    "provider_accelerator_name",
    "arch",
}


def _load_build_script() -> ModuleType:
    path = REPO / "scripts" / "build_instances.py"
    spec = importlib.util.spec_from_file_location("build_instances", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def build_script() -> ModuleType:
    return _load_build_script()


def row(provider: str, name: str, region: str) -> CloudInstance:
    return get_instance(provider, name, region)


def test_build_from_raw_copies_reproduces_instances_csv_byte_for_byte(
    build_script: ModuleType,
) -> None:
    text, _summary = build_script.build()
    shipped = (REPO / "src/gpufleet/catalog/data/instances.csv").read_bytes()
    assert text.encode("utf-8") == shipped


def test_build_summary_counts_the_documented_cleaning(build_script: ModuleType) -> None:
    _text, summary = build_script.build()
    counts = summary.counts
    assert counts["gcp: exact duplicate accelerator rows removed"] == 154
    assert counts["gcp: 700.0 placeholder Price values dropped"] == 24
    assert counts["gcp: 700.0 placeholder SpotPrice values dropped"] == 32
    assert counts["gcp: host Price 0.0 values dropped"] == 11
    assert counts["aws: source zone rows"] == 2274
    assert counts["gcp: source accelerator rows"] == 2403
    assert counts["gcp: source host rows"] == 659
    assert counts["azure: source rows"] == 187


def test_build_rejects_an_edited_raw_copy(build_script: ModuleType, tmp_path: Path) -> None:
    for name in build_script.RAW_FILES:
        (tmp_path / name).write_bytes((build_script.RAW_DIR / name).read_bytes())
    azure = tmp_path / "azure_gpu_vms.csv.gz"
    edited = gzip.decompress(azure.read_bytes()).replace(b"98.32", b"9.832", 1)
    azure.write_bytes(gzip.compress(edited))
    with pytest.raises(ValueError, match="SHA-256"):
        build_script.build(tmp_path)


def test_loading_is_fast() -> None:
    load_instances.cache_clear()
    start = time.perf_counter()
    rows = load_instances()
    elapsed = time.perf_counter() - start
    assert len(rows) > 2000
    assert elapsed < 1.0, f"load_instances took {elapsed:.3f} s"


def test_numeric_columns_carry_units() -> None:
    header = next(csv.reader(io.StringIO(data_file("instances.csv"))))
    numeric = [c for c in header if c not in TEXT and c not in TEXT_COLUMNS]
    assert numeric, "expected numeric columns"
    for column in numeric:
        assert unit_of(column) is not None, column
    assert set(header) == set(CloudInstance.model_fields)


def test_one_row_per_provider_name_region_in_sorted_order() -> None:
    keys = [(r.provider, r.name, r.region) for r in load_instances()]
    assert len(keys) == len(set(keys))
    assert keys == sorted(keys)


def test_every_accelerator_is_a_canonical_catalog_name() -> None:
    for inst in load_instances():
        if inst.accelerator is not None:
            assert get_accelerator(inst.accelerator).name == inst.accelerator


@pytest.mark.parametrize(
    ("provider", "name", "region", "price"),
    [
        # Examples the research notes quote from the source (USD per instance-hour).
        ("aws", "p4d.24xlarge", "us-east-1", "21.957642"),
        ("aws", "p4de.24xlarge", "us-east-1", "27.44705"),
        ("aws", "p5.48xlarge", "us-east-1", "55.04"),
        ("aws", "p5.48xlarge", "us-east-2", "55.04"),
        ("aws", "p5.48xlarge", "us-west-2", "55.04"),
        ("aws", "p5.4xlarge", "us-east-1", "6.88"),
        ("aws", "p5en.48xlarge", "us-east-1", "63.296"),
        ("aws", "p6-b200.48xlarge", "us-east-1", "113.9328"),
        ("aws", "p6-b300.48xlarge", "us-west-2", "142.416"),
        ("aws", "trn1.32xlarge", "us-east-1", "21.5"),
        ("aws", "trn1n.32xlarge", "us-east-1", "24.78"),
        ("aws", "g6e.48xlarge", "us-east-1", "30.13118"),
        ("aws", "dl1.24xlarge", "us-east-1", "13.10904"),
        ("azure", "Standard_ND96amsr_A100_v4", "eastus", "32.77"),
        ("azure", "Standard_ND96isr_H100_v5", "eastus", "98.32"),
        ("azure", "Standard_NC40ads_H100_v5", "eastus", "6.98"),
    ],
)
def test_quoted_list_prices(provider: str, name: str, region: str, price: str) -> None:
    assert row(provider, name, region).on_demand_usd_per_hour == Decimal(price)


def test_aws_accelerator_mapping_and_exact_units() -> None:
    p5 = row("aws", "p5.48xlarge", "us-east-1")
    assert p5.accelerator == "h100-sxm5-80gb"
    assert p5.accelerators_count == 8
    assert p5.host_vcpus == 192
    assert p5.host_memory_bytes == 2048 * GIB
    assert p5.accelerator_memory_bytes == 81920 * MIB
    assert p5.price_scope == "instance"
    assert p5.is_whole_price
    assert p5.on_demand_usd_per_accelerator_hour == Decimal("6.88")
    small = row("aws", "p5.4xlarge", "us-east-1")
    assert (small.accelerator, small.accelerators_count) == ("h100-sxm5-80gb", 1)
    assert small.accelerator_memory_bytes == p5.accelerator_memory_bytes
    assert row("aws", "p4d.24xlarge", "us-east-1").accelerator == "a100-sxm4-40gb"
    assert row("aws", "p5e.48xlarge", "us-east-2").accelerator == "h200-sxm-141gb"
    assert row("aws", "trn2.48xlarge", "us-east-2").accelerator == "trainium2"


def test_unmapped_devices_keep_their_provider_name() -> None:
    b300 = row("aws", "p6-b300.48xlarge", "us-west-2")
    assert b300.accelerator is None
    assert b300.provider_accelerator_name == "B300"
    t4 = row("aws", "g4dn.xlarge", "us-east-1")
    assert (t4.accelerator, t4.provider_accelerator_name) == (None, "T4")
    assert row("aws", "dl1.24xlarge", "us-east-1").accelerator is None  # Gaudi 1, not gaudi3


def test_empty_source_prices_stay_empty() -> None:
    p5e = [r for r in load_instances() if r.name == "p5e.48xlarge"]
    assert p5e
    assert all(r.on_demand_usd_per_hour is None for r in p5e)
    assert all("no on-demand price" in r.notes for r in p5e)
    promo = row("azure", "Standard_NC6_Promo", "westus2")
    assert promo.spot_min_usd_per_hour is None
    assert promo.on_demand_usd_per_hour == Decimal("0.18")


def test_fractional_gpu_types() -> None:
    g6f = row("aws", "g6f.large", "ap-northeast-1")
    assert g6f.accelerators_count == 0.125
    assert g6f.accelerator == "l4"
    assert g6f.accelerator_memory_bytes == 2861 * MIB
    assert "fractional" in g6f.notes


def test_trainium2_source_memory_is_not_used() -> None:
    trn2 = row("aws", "trn2.48xlarge", "us-east-2")
    assert trn2.accelerator_memory_bytes is None
    assert "524288 MiB" in trn2.notes


def test_spot_folds_zones_into_min_and_max() -> None:
    p5 = row("aws", "p5.48xlarge", "us-east-1")
    assert p5.zones_count is not None
    assert p5.zones_count > 1
    assert p5.spot_min_usd_per_hour is not None
    assert p5.spot_max_usd_per_hour is not None
    assert p5.spot_min_usd_per_hour <= p5.spot_max_usd_per_hour


def test_gcp_placeholders_and_duplicates_are_gone() -> None:
    for inst in instances_for(provider="gcp"):
        for value in (
            inst.on_demand_usd_per_hour,
            inst.spot_min_usd_per_hour,
            inst.spot_max_usd_per_hour,
        ):
            assert value != Decimal("700")
            assert value != Decimal(0)
    v6e = row("gcp", "tpu-v6e-8", "asia-east1")
    assert v6e.on_demand_usd_per_hour is None
    assert "700.0 placeholder dropped" in v6e.notes
    assert row("gcp", "tpu-v4-8", "us-central2").zones_count == 1  # listed twice in the source


def test_gcp_composed_rows_are_host_plus_gpus(build_script: ModuleType) -> None:
    gpus = build_script.read_raw(build_script.RAW_DIR, "gcp_gpu_vms.csv.gz")
    hosts = build_script.read_raw(build_script.RAW_DIR, "gcp_gpu_host_vms.csv.gz")
    zone = "us-central1-a"
    host = next(
        r for r in hosts if r["InstanceType"] == "a3-highgpu-8g" and r["AvailabilityZone"] == zone
    )
    gpu = next(
        r
        for r in gpus
        if (r["AcceleratorName"], r["AcceleratorCount"], r["AvailabilityZone"])
        == ("H100", "8", zone)
    )
    a3 = row("gcp", "a3-highgpu-8g", "us-central1")
    assert a3.on_demand_usd_per_hour == Decimal(host["Price"]) + Decimal(gpu["Price"])
    assert a3.price_scope == "instance"
    assert (a3.accelerator, a3.accelerators_count) == ("h100-sxm5-80gb", 8)
    assert a3.host_vcpus == 208
    assert a3.host_memory_bytes == 1872 * GIB
    assert "Price +" in a3.derivation
    assert "README" in a3.notes
    ultra = instances_for(provider="gcp", accelerator="h200-sxm-141gb")
    assert ultra
    assert all(r.name == "a3-ultragpu-8g" and r.derivation for r in ultra)


def test_only_composed_rows_have_a_derivation() -> None:
    for inst in load_instances():
        composed = inst.provider == "gcp" and inst.price_scope == "instance"
        assert bool(inst.derivation) == composed, inst.name


def test_uncomposed_gcp_parts_say_what_their_price_covers() -> None:
    mega = row("gcp", "gcp-gpu:H100-MEGAx8", "us-central1")
    assert mega.price_scope == "accelerators-only"
    assert not mega.is_whole_price
    assert mega.accelerator == "h100-sxm5-80gb"
    assert mega.host_vcpus is None
    host = row("gcp", "gcp-host:a2-highgpu-1g", "us-central1")
    assert host.price_scope == "host-only"
    assert host.accelerator is None
    assert host.host_vcpus == 12
    a4 = [r for r in load_instances() if r.name == "gcp-host:a4-highgpu-8g"]
    assert a4
    assert all(r.on_demand_usd_per_hour is None for r in a4)  # source 0.0 is not a price


def test_tpu_slices_keep_their_name_and_no_chip_count() -> None:
    v5p = row("gcp", "tpu-v5p-8", "us-east5")
    assert v5p.accelerator == "tpu-v5p"
    assert v5p.price_scope == "slice"
    assert v5p.accelerators_count is None
    assert row("gcp", "tpu-v5litepod-8", "us-west4").accelerator == "tpu-v5e"
    assert row("gcp", "tpu-v3-8", "us-central1").accelerator is None


def test_azure_nd_h100_uses_the_vendor_gpu_count() -> None:
    nd = row("azure", "Standard_ND96isr_H100_v5", "eastus")
    assert (nd.accelerator, nd.accelerators_count) == ("h100-sxm5-80gb", 8)
    assert "12" in nd.notes
    assert nd.zones_count is None
    regions = {r.region for r in instances_for(provider="azure")}
    assert len(regions) == 8


def test_instances_for_filters_combine() -> None:
    h100_aws = instances_for("h100-sxm5-80gb", provider="aws", region="us-east-1")
    assert {r.name for r in h100_aws} == {"p5.48xlarge", "p5.4xlarge"}
    by_alias = instances_for("H100", provider="AWS", region="US-EAST-1")
    assert {r.name for r in by_alias} == {"p5.48xlarge", "p5.4xlarge"}
    raw = instances_for("T4", provider="azure")
    assert raw
    assert all(r.provider_accelerator_name == "T4" for r in raw)
    assert instances_for("l4", provider="azure") == ()


@pytest.mark.parametrize(
    ("call", "suggestion"),
    [
        (lambda: get_instance("aws", "p5.48xlarg"), "p5.48xlarge"),
        (lambda: get_instance("awz", "p5.48xlarge"), "aws"),
        (lambda: get_instance("aws", "p5.48xlarge", "us-east1"), "us-east-1"),
        (lambda: instances_for(region="us-east1", provider="aws"), "us-east-1"),
        (lambda: instances_for("h1000"), "H100"),
    ],
    ids=["typo-in-type", "typo-in-provider", "gcp-style-region", "filter-region", "accel"],
)
def test_unknown_names_suggest_close_ones(call: object, suggestion: str) -> None:
    assert callable(call)
    with pytest.raises(UnknownNameError) as info:
        call()
    assert suggestion in info.value.suggestions


def test_get_instance_is_case_insensitive_and_defaults_to_cheapest_region() -> None:
    nd = get_instance("Azure", "standard_nd96isr_h100_v5")
    prices = [
        r.on_demand_usd_per_hour
        for r in load_instances()
        if r.name == "Standard_ND96isr_H100_v5" and r.on_demand_usd_per_hour is not None
    ]
    assert nd.on_demand_usd_per_hour == min(prices)


def test_json_dump_writes_prices_as_numbers() -> None:
    dumped = row("aws", "p5.48xlarge", "us-east-1").model_dump(mode="json")
    assert dumped["on_demand_usd_per_hour"] == 55.04
    assert dumped["retrieved"] == "2026-11-29"
