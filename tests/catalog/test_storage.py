"""The storage table: one row per tier, capacities exact in bytes, missing figures empty."""

from __future__ import annotations

import datetime as dt
import re
import types
import typing

import pytest

from gpufleet.catalog.columns import is_bool_column, unit_of
from gpufleet.catalog.storage import Storage, get_storage, load_storage
from gpufleet.catalog.table import data_file
from gpufleet.errors import UnknownNameError

GIB = 2**30
TIB = 2**40

REQUIRED = [
    "fsx-lustre-persistent2-125",
    "fsx-lustre-persistent2-1000",
    "fsx-lustre-persistent1-50",
    "fsx-lustre-persistent1-200",
    "fsx-lustre-persistent1-hdd-12",
    "fsx-lustre-persistent1-hdd-40",
    "fsx-lustre-intelligent-tiering",
    "gcp-managed-lustre-1000",
    "gcp-managed-lustre-dynamic",
    "azure-managed-lustre-40",
    "azure-managed-lustre-500",
    "ddn-ai400x2-turbo",
    "ibm-storage-scale",
    "weka",
    "vast",
    "dgx-superpod-storage",
    "meta-tectonic",
]


def test_catalog_holds_every_required_storage_row() -> None:
    names = [s.name for s in load_storage()]
    assert len(names) == len(set(names))
    assert set(REQUIRED) <= set(names)


@pytest.mark.parametrize(
    ("name", "column", "expected"),
    [
        ("fsx-lustre-persistent2-125", "throughput_mbytes_per_s_per_tib", 125),
        ("fsx-lustre-persistent2-125", "price_usd_per_gb_month", 0.145),
        ("fsx-lustre-persistent2-250", "price_usd_per_gb_month", None),
        ("fsx-lustre-persistent1-100", "throughput_mbytes_per_s_per_tib", 100),
        ("fsx-lustre-persistent1-hdd-12", "throughput_mbytes_per_s_per_tib", 12),
        ("fsx-lustre-intelligent-tiering", "throughput_step_mbytes_per_s", 4000),
        ("gcp-managed-lustre-1000", "min_capacity_bytes", 9_000 * GIB),
        ("gcp-managed-lustre-1000", "max_capacity_bytes", 10_008_000 * GIB),
        ("gcp-managed-lustre-1000", "capacity_step_bytes", 9_000 * GIB),
        ("gcp-managed-lustre-1000", "coarse_step_from_bytes", 1_530_000 * GIB),
        ("gcp-managed-lustre-1000", "coarse_step_bytes", 72_000 * GIB),
        ("gcp-managed-lustre-125", "coarse_step_bytes", None),
        ("gcp-managed-lustre-dynamic", "throughput_mbytes_per_s_per_tib", 25),
        ("azure-managed-lustre-40", "min_capacity_bytes", 48 * TIB),
        ("azure-managed-lustre-40", "max_capacity_bytes", 768 * TIB),
        ("azure-managed-lustre-500", "capacity_step_bytes", 4 * TIB),
        ("ddn-ai400x2-turbo", "throughput_gbytes_per_s_per_node", 100),
        ("dgx-superpod-storage", "throughput_gbytes_per_s_per_node", 40),
        ("meta-tectonic", "cluster_throughput_gbytes_per_s", 2000),
        ("meta-tectonic", "cluster_peak_throughput_gbytes_per_s", 7000),
        ("weka", "throughput_gbytes_per_s_per_node", None),
    ],
)
def test_values_match_the_sources(name: str, column: str, expected: object) -> None:
    assert getattr(get_storage(name), column) == expected


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("AMLFS-Durable-Premium-250", "azure-managed-lustre-250"),
        ("amlfs_durable_premium_250", "azure-managed-lustre-250"),
        ("FSx-P2-500", "fsx-lustre-persistent2-500"),
        ("GPFS", "ibm-storage-scale"),
        ("WekaFS", "weka"),
        ("Exascaler", "ddn-ai400x2-turbo"),
    ],
)
def test_lookup_by_alias_is_case_insensitive(alias: str, canonical: str) -> None:
    assert get_storage(alias).name == canonical


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_storage("wekaa")
    assert "weka" in info.value.suggestions


def test_rows_are_well_formed() -> None:
    assert "\r" not in data_file("storage.csv")
    for s in load_storage():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", s.name), s.name
        assert s.retrieved == dt.date(2026, 11, 29)
        assert s.source


def _numeric(annotation: object) -> bool:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_numeric(a) for a in typing.get_args(annotation))
    return annotation in (int, float)


def test_numeric_columns_carry_units() -> None:
    fields = Storage.model_fields
    assert all(unit_of(n) for n, f in fields.items() if _numeric(f.annotation))
    assert all(is_bool_column(n) for n, f in fields.items() if f.annotation in (bool, bool | None))
