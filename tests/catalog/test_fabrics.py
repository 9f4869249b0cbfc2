"""The fabrics table: bits and bytes land in the right columns, labelled cells are split."""

from __future__ import annotations

import datetime as dt
import re
import types
import typing

import pytest

from gpufleet.catalog.columns import is_bool_column, unit_of
from gpufleet.catalog.fabrics import Fabric, get_fabric, load_fabrics
from gpufleet.catalog.table import data_file
from gpufleet.errors import UnknownNameError

REQUIRED = [
    "nvlink-3",
    "nvlink-4",
    "nvlink-5",
    "nvlink-bridge",
    "infinity-fabric",
    "tpu-ici-v5e",
    "tpu-ici-v6e",
    "neuronlink",
    "ib-hdr-200",
    "ib-ndr-400",
    "ib-xdr-800",
    "roce-v2",
    "efa-p4d",
    "efa-p5",
    "efa-trn1",
    "efa-trn1n",
    "gcp-tcpx",
    "gcp-tcpxo",
    "gcp-roce",
    "azure-nd-v5-ib",
]


def test_catalog_holds_every_required_fabric() -> None:
    names = [f.name for f in load_fabrics()]
    assert len(names) == len(set(names))
    assert set(REQUIRED) <= set(names)


@pytest.mark.parametrize(
    ("name", "column", "expected"),
    [
        ("ib-ndr-400", "port_gbit_per_s", 400),
        ("ib-ndr-400", "node_gbit_per_s", 3200),
        ("ib-ndr-400", "switch_radix_ports", 64),
        ("ib-ndr-400", "switch_capacity_tbit_per_s", 51.2),
        ("ib-ndr-400", "switch_latency_ns", 330),
        ("ib-hdr-200", "port_gbit_per_s", 200),
        ("ib-xdr-800", "switch_radix_ports", 144),
        ("ib-xdr-800", "switch_capacity_tbit_per_s", 115.2),
        ("nvlink-3", "scaleup_bidir_gbytes_per_s_per_gpu", 600),
        ("nvlink-4", "scaleup_bidir_gbytes_per_s_per_gpu", 900),
        ("nvlink-4", "node_switches", 4),
        ("nvlink-5", "scaleup_bidir_gbytes_per_s_per_gpu", 1800),
        ("tpu-ici-v5e", "scaleup_bidir_gbytes_per_s_per_gpu", 400),
        ("tpu-ici-v6e", "scaleup_bidir_gbytes_per_s_per_gpu", 800),
        ("efa-p5", "node_gbit_per_s", 3200),
        ("efa-p5", "node_ports", 32),
        ("efa-trn1n", "node_gbit_per_s", 1600),
        ("gcp-tcpxo", "node_ports", 8),
        # Unconfirmed in the sources: stays empty.
        ("gcp-tcpx", "port_gbit_per_s", None),
        ("neuronlink", "scaleup_bidir_gbytes_per_s_per_gpu", None),
    ],
)
def test_values_match_the_sources(name: str, column: str, expected: object) -> None:
    assert getattr(get_fabric(name), column) == expected


@pytest.mark.parametrize(
    ("name", "category", "is_cloud"),
    [
        ("nvlink-4", "scale-up", False),
        ("ib-ndr-400", "scale-out", False),
        ("efa-p4d", "scale-out", True),
    ],
)
def test_category(name: str, category: str, is_cloud: bool) -> None:
    fabric = get_fabric(name)
    assert (fabric.category, fabric.is_cloud) == (category, is_cloud)


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("IB-NDR", "ib-ndr-400"),
        ("ib_hdr_200", "ib-hdr-200"),
        ("InfiniBand XDR", "ib-xdr-800"),
        ("NVLink gen4", "nvlink-4"),
        ("xGMI", "infinity-fabric"),
        ("RoCEv2", "roce-v2"),
        ("GPUDirect-TCPXO", "gcp-tcpxo"),
    ],
)
def test_lookup_by_alias_is_case_insensitive(alias: str, canonical: str) -> None:
    assert get_fabric(alias).name == canonical


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_fabric("ib-ndr-4000")
    assert "ib-ndr-400" in info.value.suggestions


def test_rows_are_well_formed() -> None:
    assert "\r" not in data_file("fabrics.csv")
    for f in load_fabrics():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", f.name), f.name
        assert f.retrieved == dt.date(2026, 11, 29)
        assert f.source


def _numeric(annotation: object) -> bool:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_numeric(a) for a in typing.get_args(annotation))
    return annotation in (int, float)


def test_numeric_columns_carry_units() -> None:
    fields = Fabric.model_fields
    assert all(unit_of(n) for n, f in fields.items() if _numeric(f.annotation))
    assert all(is_bool_column(n) for n, f in fields.items() if f.annotation in (bool, bool | None))
