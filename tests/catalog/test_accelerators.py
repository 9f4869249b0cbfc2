from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpufleet.catalog.accelerators import Accelerator, get_accelerator, load_accelerators
from gpufleet.catalog.mig import mig_accelerators, mig_profiles_for
from gpufleet.errors import UnknownNameError

REQUIRED = [
    "a100-sxm4-40gb",
    "a100-sxm4-80gb",
    "a100-pcie-80gb",
    "h100-sxm5-80gb",
    "h100-pcie-80gb",
    "h100-nvl-94gb",
    "h200-sxm-141gb",
    "b200-sxm-192gb",
    "gb200",
    "mi250x",
    "mi300x",
    "mi325x",
    "gaudi3",
    "tpu-v4",
    "tpu-v5e",
    "tpu-v5p",
    "trainium1",
    "trainium2",
    "l40s",
    "l4",
    "a10g",
]


def test_catalog_holds_every_required_accelerator() -> None:
    names = {a.name for a in load_accelerators()}
    assert set(REQUIRED) <= names


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        pytest.param("A100-SXM4-80GB", "a100-sxm4-80gb", id="ground-truth-spelling"),
        pytest.param("H100-SXM5-80GB", "h100-sxm5-80gb", id="ground-truth-h100"),
        pytest.param("h100_sxm5_80gb", "h100-sxm5-80gb", id="underscores"),
        pytest.param("  H200  ", "h200-sxm-141gb", id="padded-short-name"),
        pytest.param("MI300X", "mi300x", id="amd-upper"),
        pytest.param("Trillium", "tpu-v6e", id="tpu-marketing-name"),
        pytest.param("trn1", "trainium1", id="instance-family-name"),
    ],
)
def test_lookup_by_alias_is_case_insensitive(alias: str, canonical: str) -> None:
    assert get_accelerator(alias).name == canonical


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_accelerator("h100-sxm5-80g")
    assert str(info.value) == (
        "unknown accelerator 'h100-sxm5-80g'; did you mean 'h100-sxm5-80gb'?"
    )


@pytest.mark.parametrize(
    ("name", "field", "value"),
    [
        ("h100-sxm5-80gb", "bf16_dense_tflops", 989.4),
        ("h100-sxm5-80gb", "bf16_sparse_tflops", 1978.9),
        ("h100-sxm5-80gb", "memory_bytes", 80 * 10**9),
        ("h100-sxm5-80gb", "memory_bandwidth_gbytes_per_s", 3350),
        ("a100-sxm4-80gb", "fp8_dense_tflops", None),
        ("tpu-v4", "memory_bytes", 32 * 2**30),
        ("mi300x", "bf16_dense_tflops", 1307.4),
        ("b200-sxm-192gb", "fp4_dense_tflops", 9000),
        ("a10g", "bf16_dense_tflops", None),
        ("gb200", "scaleup_domain_gpus", 72),
    ],
)
def test_values_match_the_sources(name: str, field: str, value: float | None) -> None:
    assert getattr(get_accelerator(name), field) == value


def test_dense_never_exceeds_sparse() -> None:
    for acc in load_accelerators():
        for precision in ("bf16", "fp8"):
            dense = getattr(acc, f"{precision}_dense_tflops")
            sparse = getattr(acc, f"{precision}_sparse_tflops")
            if dense is not None and sparse is not None:
                assert sparse >= dense, (acc.name, precision)


def test_dense_flops_in_flop_per_second() -> None:
    h100 = get_accelerator("h100-sxm5-80gb")
    assert h100.dense_flops("bf16") == pytest.approx(989.4e12)
    assert h100.dense_flops("int8") == pytest.approx(1979e12)
    assert get_accelerator("a10g").dense_flops("bf16") is None


# --- MIG: an empty cell, not 0, for a device without it -----------------------------------


def test_l40s_has_no_mig_instance_count() -> None:
    """The L40S has no MIG (its row's notes say so); its cell is empty, not 0."""
    device = get_accelerator("l40s")
    assert device.mig_max_instances is None
    assert device.supports_mig is False


def test_mig_instance_counts_are_given_exactly_for_the_mig_devices() -> None:
    """A count where the MIG catalog has profiles, None everywhere else: never 0."""
    mig = set(mig_accelerators())
    for device in load_accelerators():
        assert device.supports_mig == (device.name in mig), device.name
        if device.name in mig:
            assert device.mig_max_instances == max(
                p.max_instances for p in mig_profiles_for(device.name)
            )
        else:
            assert device.mig_max_instances is None, device.name


def test_a_zero_mig_instance_count_is_refused() -> None:
    """0 would read as a MIG device with no instances to `is not None`; empty says no MIG."""
    row = get_accelerator("l4").model_dump()
    with pytest.raises(ValidationError, match="leave it empty without MIG"):
        Accelerator.model_validate({**row, "mig_max_instances": 0})
    assert Accelerator.model_validate({**row, "mig_max_instances": None}).supports_mig is False
