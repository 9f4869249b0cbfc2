"""The systems table: required shapes present, numbers as the sources give them, joins resolve."""

from __future__ import annotations

import datetime as dt
import re
import types
import typing

import pytest

from gpufleet.catalog.accelerators import accelerator_index
from gpufleet.catalog.columns import is_bool_column, unit_of
from gpufleet.catalog.fabrics import fabric_index
from gpufleet.catalog.systems import System, get_system, load_systems
from gpufleet.catalog.table import data_file
from gpufleet.errors import UnknownNameError

GIB = 2**30
TB = 10**12

REQUIRED = [
    "dgx-a100",
    "dgx-h100",
    "dgx-h200",
    "dgx-b200",
    "hgx-h100-xe9680",
    "hgx-b200",
    "gb200-nvl72",
    "mi300x-8gpu-platform",
    "azure-nd-h100-v5",
    "aws-p4d-24xlarge",
    "aws-p5-48xlarge",
    "aws-p5e-48xlarge",
    "aws-trn1-32xlarge",
    "aws-trn1n-32xlarge",
    "dgx-superpod-su-h100",
]


def test_catalog_holds_every_required_system() -> None:
    names = [s.name for s in load_systems()]
    assert len(names) == len(set(names))
    assert set(REQUIRED) <= set(names)


@pytest.mark.parametrize(
    ("name", "column", "expected"),
    [
        ("dgx-h100", "node_max_power_kw", 10.2),
        ("dgx-h100", "node_typical_power_min_kw", 6.5),
        ("dgx-h100", "node_typical_power_max_kw", 8.5),
        ("dgx-h100", "node_rack_units", 8),
        ("dgx-h100", "local_nvme_bytes", 30_720_000_000_000),
        ("dgx-h100", "system_memory_bytes", 2048 * GIB),
        ("dgx-a100", "accelerator", "a100-sxm4-80gb"),
        ("dgx-a100", "node_max_power_kw", 6.5),
        ("dgx-a100", "nic_gbit_per_s", 200),
        ("dgx-a100", "local_nvme_bytes", 15 * TB),
        ("dgx-b200", "node_max_power_kw", 14.3),
        ("dgx-b200", "node_rack_units", 10),
        ("gb200-nvl72", "node_gpus", 72),
        ("gb200-nvl72", "scaleup_domain_gpus", 72),
        ("gb200-nvl72", "node_max_power_kw", 120),
        ("mi300x-8gpu-platform", "has_nvswitch", False),
        ("mi300x-8gpu-platform", "system_memory_bytes", 1536 * GIB),
        ("azure-nd-h100-v5", "node_network_gbit_per_s", 3200),
        ("aws-p5-48xlarge", "node_nics", 32),
        # The source's 3200 is an instance total, so no per-NIC speed is claimed.
        ("aws-p5-48xlarge", "nic_gbit_per_s", None),
        ("aws-p5-48xlarge", "node_network_gbit_per_s", 3200),
        ("aws-trn1-32xlarge", "accelerator", "trainium1"),
        ("aws-trn1-32xlarge", "node_gpus", 16),
        ("aws-trn1-32xlarge", "local_nvme_bytes", 7_600_000_000_000),
        ("aws-trn1n-32xlarge", "node_network_gbit_per_s", 1600),
        ("dgx-superpod-su-h100", "node_gpus", 256),
        ("dgx-superpod-su-h100", "compute_nodes", 32),
        # Not in any source: stays empty.
        ("hgx-b200", "node_max_power_kw", None),
    ],
)
def test_values_match_the_sources(name: str, column: str, expected: object) -> None:
    assert getattr(get_system(name), column) == expected


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("DGX H100", "dgx-h100"),
        ("nvidia dgx b200", "dgx-b200"),
        ("p5.48xlarge", "aws-p5-48xlarge"),
        ("P4D.24XLARGE", "aws-p4d-24xlarge"),
        ("Standard_ND96isr_v5", "azure-nd-h100-v5"),
        ("NVL72", "gb200-nvl72"),
        ("Dell PowerEdge XE9680", "hgx-h100-xe9680"),
    ],
)
def test_lookup_by_alias_is_case_insensitive(alias: str, canonical: str) -> None:
    assert get_system(alias).name == canonical


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_system("dgx-h1000")
    assert "dgx-h100" in info.value.suggestions


def test_accelerators_and_fabrics_resolve() -> None:
    """A system's joins must hit real rows, or a plan silently loses its GPU or network."""
    accelerators = accelerator_index()
    fabrics = fabric_index()
    for s in load_systems():
        assert accelerators.get(s.accelerator).name == s.accelerator
        for fabric in (s.scaleup_fabric, s.scaleout_fabric):
            if fabric is not None:
                assert fabrics.get(fabric).name == fabric


def test_rows_are_well_formed() -> None:
    assert "\r" not in data_file("systems.csv")
    for s in load_systems():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", s.name), s.name
        assert s.retrieved == dt.date(2026, 11, 29)
        assert s.source


def _numeric(annotation: object) -> bool:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_numeric(a) for a in typing.get_args(annotation))
    return annotation in (int, float)


def test_numeric_columns_carry_units() -> None:
    fields = System.model_fields
    assert all(unit_of(n) for n, f in fields.items() if _numeric(f.annotation))
    assert all(is_bool_column(n) for n, f in fields.items() if f.annotation in (bool, bool | None))
