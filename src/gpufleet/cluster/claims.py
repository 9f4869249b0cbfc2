"""Claims: what a job asks to hold or give back (whole GPUs, a MIG slice, a GPU fraction), and
what it holds, in exact integer units (a fraction in thousandths of a GPU).

The vocabulary the scheduler, the simulator, the store and the executors share about
holdings; apart from `state` (which indexes and undoes them) so that those can name a claim
without the state's machinery.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

MILLI = 1000  # one whole GPU in fraction units


def to_milli(fraction: Fraction | Decimal | int | float | str) -> int:
    """A GPU fraction (0.25, "1/8", Fraction(1, 3)) in thousandths, rounded up.

    Rounding up gives a job at least the share it asked for; floats are read
    through their shortest decimal form so 0.1 is 1/10, not its binary neighbour.
    """
    if isinstance(fraction, bool):
        raise ValueError("a GPU fraction must be a number, not a bool")
    value = Fraction(repr(fraction)) if isinstance(fraction, float) else Fraction(fraction)
    if not 0 < value <= 1:
        raise ValueError(f"a GPU fraction must be in (0, 1], got {fraction}")
    return math.ceil(value * MILLI)


# -- claims: what a job asks to hold (or give back) ---------------------------------------


@dataclass(frozen=True, slots=True)
class Whole:
    """Whole GPUs of one node, by index."""

    node: str
    gpus: tuple[int, ...]

    def __post_init__(self) -> None:
        if type(self.gpus) is not tuple:
            object.__setattr__(self, "gpus", tuple(self.gpus))


@dataclass(frozen=True, slots=True)
class MigSlice:
    """One MIG instance, by its id "<node>/gpu<g>/mig:<profile>#<k>"."""

    id: str


@dataclass(frozen=True, slots=True)
class Share:
    """A fraction of one GPU, in thousandths (`to_milli` converts 0.25 -> 250)."""

    node: str
    gpu: int
    milli: int


Claim = Whole | MigSlice | Share


@dataclass(frozen=True, slots=True)
class Holdings:
    """Everything one job holds, in cluster order, so equal states dump equally."""

    job: str
    gpus: tuple[tuple[str, int], ...] = ()
    slices: tuple[str, ...] = ()
    shares: tuple[tuple[str, int, int], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.gpus or self.slices or self.shares)

    def claims(self) -> tuple[Claim, ...]:
        """The holdings as claims, ready for `release` (or to re-`allocate` elsewhere)."""
        out: list[Claim] = []
        for node, group in itertools.groupby(self.gpus, key=lambda ng: ng[0]):
            out.append(Whole(node, tuple(g for _, g in group)))
        out.extend(MigSlice(s) for s in self.slices)
        out.extend(Share(node, gpu, milli) for node, gpu, milli in self.shares)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Usage:
    """What a job (or a team, via `usage_by`) holds, counted per accelerator.

    `slice_milli` weighs the slices exactly, each by where it lies on its GPU
    (`SliceInfo.milli`): a GPU's slices add up to 1000, which counts per profile cannot.
    """

    gpus: Mapping[str, int]  # accelerator -> whole GPUs
    slices: Mapping[tuple[str, str], int]  # (accelerator, profile) -> MIG slices
    milli: Mapping[str, int]  # accelerator -> thousandths of a GPU held as fractions
    # accelerator -> thousandths of a GPU held as MIG slices
    slice_milli: Mapping[str, int]


__all__ = ["MILLI", "Claim", "Holdings", "MigSlice", "Share", "Usage", "Whole", "to_milli"]
