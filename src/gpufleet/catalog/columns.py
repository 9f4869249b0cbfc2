"""Column naming rules for catalog tables.

A number without its unit is how a GB/s figure ends up used as Gb/s. Every
numeric catalog column therefore ends in a unit token from `UNIT_SUFFIXES`,
optionally followed by what it is counted per (`_per_gpu`, `_per_node`, ...).
Booleans start with a predicate prefix; text columns need neither.
"""

from __future__ import annotations

import re

UNIT_SUFFIXES: tuple[str, ...] = (
    # compute
    "_tflops",
    "_tops",
    # memory and data sizes
    "_bytes",
    "_tib",
    "_tb",
    # rates: bytes and bits are different units and never share a name
    "_gbytes_per_s",
    "_mbytes_per_s",
    "_mbytes_per_s_per_tib",
    "_gbit_per_s",
    "_tbit_per_s",
    # power and energy
    "_w",
    "_kw",
    # counts of things
    "_gpus",
    "_chips",
    "_nodes",
    "_ports",
    "_links",
    "_nics",
    "_vcpus",
    "_instances",
    "_slices",
    "_switches",
    "_count",
    "_rack_units",
    # time
    "_year",
    "_years",
    "_months",
    "_s",
    "_ns",
    "_us",
    # money
    "_usd",
    "_usd_per_hour",
    "_usd_per_gb_month",
    "_usd_per_kwh",
    # ratios
    "_fraction",
)

PER_SUFFIX = re.compile(r"_per_(gpu|node|port|chip|instance|rack|slice|switch)$")
BOOL_PREFIXES: tuple[str, ...] = ("is_", "has_", "supports_")
TEXT_COLUMNS: frozenset[str] = frozenset({"source", "retrieved", "notes", "derivation"})


def unit_of(column: str) -> str | None:
    """The unit suffix a numeric column carries, or None when it has none."""
    stem = column
    while True:
        stripped = PER_SUFFIX.sub("", stem)
        if stripped == stem:
            break
        stem = stripped
    for suffix in sorted(UNIT_SUFFIXES, key=len, reverse=True):
        if stem.endswith(suffix) or column.endswith(suffix):
            return suffix.lstrip("_")
    return None


def is_bool_column(column: str) -> bool:
    return column.startswith(BOOL_PREFIXES)
