"""Where the catalog rents none of the plan's accelerator: which providers, which regions.

A plan prices renting from instances.csv, over the providers and regions its spec allows.
When a provider has no instance of the accelerator there, it simply drops out of every price
and table, and when none has one renting is not priced at all. Both were silent:
`deployment: both` on an MI300X (no row in instances.csv) read "No cloud options: this plan
does not consider renting" and "No break-even was computed", and `regions: [us-east-1]`
with aws, gcp and azure dropped GCP and Azure, whose regions are named us-east1 and eastus.
Here the gaps are found and said in sentences built from the catalog's own rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from gpufleet.catalog.instances import load_instances

REGIONS_NAMED = 4  # regions named per provider before "and N more"


def and_list(items: Sequence[str], word: str = "and") -> str:
    """'a', 'a and b', 'a, b and c'."""
    if len(items) < 3:
        return f" {word} ".join(items)
    return ", ".join(items[:-1]) + f" {word} " + items[-1]


@dataclass(frozen=True)
class CloudGaps:
    """Where the allowed providers rent none of `accelerator`: `unnamed`, providers with no
    row at all in the plan's regions (provider → its region names most like the plan's: a
    region name is each provider's own, so `us-east-1` is AWS's alone); `missing`, others
    with no instance of the accelerator in the catalog; `elsewhere`, others that list it only
    outside the plan's regions (provider → those regions, most like the plan's first). A
    provider in none of them rents it where the plan allows."""

    accelerator: str
    providers: tuple[str, ...]
    regions: tuple[str, ...]
    missing: tuple[str, ...] = ()
    elsewhere: dict[str, tuple[str, ...]] = field(default_factory=dict)
    unnamed: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def renting_from(self) -> list[str]:
        """The allowed providers that rent the accelerator in the plan's regions."""
        gaps = set(self.missing) | set(self.elsewhere) | set(self.unnamed)
        return [p for p in self.providers if p not in gaps]

    @property
    def rentable(self) -> bool:
        return bool(self.renting_from)

    def unpriced_reason(self) -> str:
        """Why renting has no price, for a plan where no allowed provider rents it."""
        if not self.elsewhere and not self.unnamed:
            return (
                f"gpufleet's catalog (instances.csv) has no cloud instance of "
                f"{self.accelerator} from {and_list(self.providers, 'or')}, so renting could "
                "not be priced for it"
            )
        return f"renting could not be priced for {self.accelerator}: " + "; ".join(self._clauses())

    def sentences(self) -> list[str]:
        """What the plan's cloud prices leave out and why: none when every allowed provider
        rents the accelerator in the plan's regions."""
        if not self.missing and not self.elsewhere and not self.unnamed:
            return []
        if not self.rentable:
            return [self.unpriced_reason()]
        return [
            "; ".join(self._clauses())
            + f", so the plan prices renting {self.accelerator} from "
            + f"{and_list(self.renting_from)} alone"
        ]

    def _clauses(self) -> list[str]:
        out: list[str] = []
        regions = and_list(list(self.regions), "or")
        if self.unnamed:
            names = list(self.unnamed)
            like = "; ".join(f"{p}'s are named like {_regions(r)}" for p, r in self.unnamed.items())
            out.append(
                f"{and_list(names)} {_have(names)} no region named {regions} in gpufleet's "
                f"catalog, for any accelerator ({like})"
            )
        if self.missing:
            names = list(self.missing)
            out.append(
                f"{and_list(names)} {_have(names)} no {self.accelerator} instance in "
                "gpufleet's catalog (instances.csv)"
            )
        if self.elsewhere:
            names = list(self.elsewhere)
            where = "; ".join(f"{p} lists it in {_regions(r)}" for p, r in self.elsewhere.items())
            out.append(
                f"{and_list(names)} {_have(names)} no {self.accelerator} instance in {regions} "
                f"({where})"
            )
        return out


def _have(names: Sequence[str]) -> str:
    return "has" if len(names) == 1 else "have"


def _regions(regions: Sequence[str]) -> str:
    shown = list(regions[:REGIONS_NAMED])
    rest = len(regions) - len(shown)
    return ", ".join(shown) + (f" and {rest} more" if rest else "")


def cloud_gaps(accelerator: str, providers: Sequence[str], regions: Sequence[str]) -> CloudGaps:
    """The gaps for `accelerator` over the plan's providers and regions: rows that rent
    whole GPUs at an on-demand price, as the plan's prices and Cloud options table read."""
    listed: dict[str, set[str]] = {}
    named: dict[str, set[str]] = {}
    for r in load_instances():
        named.setdefault(r.provider, set()).add(r.region)
        if (
            r.accelerator == accelerator
            and r.is_whole_price
            and (r.accelerators_count or 0) >= 1
            and r.on_demand_usd_per_hour is not None
        ):
            listed.setdefault(r.provider, set()).add(r.region)

    def closest_first(names: set[str]) -> tuple[str, ...]:
        # the regions most like those asked for first: gcp's us-east1 for us-east-1
        def likeness(name: str) -> float:
            return max(SequenceMatcher(None, name, asked).ratio() for asked in regions)

        return tuple(sorted(names, key=lambda n: (-likeness(n), n)))

    asked = set(regions)
    unnamed = {
        p: closest_first(named.get(p, set()))
        for p in providers
        if regions and not named.get(p, set()) & asked
    }
    missing = tuple(p for p in providers if p not in listed and p not in unnamed)
    elsewhere = {
        p: closest_first(listed[p])
        for p in providers
        if p in listed and p not in unnamed and regions and not listed[p] & asked
    }
    return CloudGaps(accelerator, tuple(providers), tuple(regions), missing, elsewhere, unnamed)
