"""Spec fields that name catalog rows: validated on load, stored canonical.

A spec that says `accelerator: H100` is resolved once, at the edge, to
`h100-sxm5-80gb`; everything downstream sees canonical names only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Protocol

from pydantic import AfterValidator

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.fabrics import get_fabric
from gpufleet.catalog.systems import get_system
from gpufleet.errors import UnknownNameError


class _HasName(Protocol):
    @property
    def name(self) -> str: ...


def _canonical(lookup: Callable[[str], _HasName]) -> Callable[[str], str]:
    def check(value: str) -> str:
        try:
            return lookup(value).name
        except UnknownNameError as exc:
            raise ValueError(str(exc)) from None

    return check


def _accelerator(name: str) -> _HasName:

    return get_accelerator(name)


def _system(name: str) -> _HasName:

    return get_system(name)


def _fabric(name: str) -> _HasName:

    return get_fabric(name)


AcceleratorName = Annotated[str, AfterValidator(_canonical(_accelerator))]
SystemName = Annotated[str, AfterValidator(_canonical(_system))]
FabricName = Annotated[str, AfterValidator(_canonical(_fabric))]
