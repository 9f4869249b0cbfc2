"""MIG (Multi-Instance GPU): how one NVIDIA GPU splits into isolated instances.

Planners size inference and development pools in fractions of a GPU, and an
operator only learns that a layout does not fit when `nvidia-mig-parted apply`
fails on the node. Keeping NVIDIA's profile table and its known-valid layouts
as data lets gpufleet reject an impossible layout while it is still a plan.

Both tables come from NVIDIA/mig-parted (Apache-2.0); docs/catalog/provenance-mig.md
says which file each row was read from and what the sources do not cover.
Accelerator names are the canonical catalog names; resolving aliases is the
caller's job, so this module stays independent of the accelerator table.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from functools import cache
from types import MappingProxyType
from typing import ClassVar, Self

from pydantic import Field, PositiveInt, field_serializer, field_validator, model_validator

from gpufleet.catalog.table import CatalogRow, load_rows
from gpufleet.errors import CatalogError, UnknownNameError

GB = 10**9
# `<compute slices>g.<memory GB>gb`, `+me` = with media extensions (mig-parted naming).
_PROFILE_NAME = re.compile(r"(?P<compute>[1-9]\d*)g\.(?P<memory>[1-9]\d*)gb(?P<me>\+me)?")
# One `profile=count` entry of a layout's `instances` cell.
_INSTANCE = re.compile(r"(?P<profile>[^=\s]+)=(?P<count>[1-9]\d*)")


class MigProfile(CatalogRow):
    """One MIG profile on one accelerator.

    The profile name already encodes compute slices, memory and media
    extensions; the columns repeat them so that queries need no parsing, and a
    validator keeps the two from drifting apart when someone edits the CSV.
    """

    table_columns: ClassVar[tuple[str, ...]] = (
        "accelerator",
        "profile",
        "compute_slices",
        "memory_bytes",
        "max_instances",
        "has_media_extensions",
    )

    accelerator: str
    profile: str
    compute_slices: PositiveInt
    # The sources give no per-profile memory-slice counts; empty until one does.
    memory_slices: int | None = Field(default=None, gt=0)
    memory_bytes: PositiveInt
    max_instances: PositiveInt
    has_media_extensions: bool

    @model_validator(mode="after")
    def _name_matches_columns(self) -> Self:
        match = _PROFILE_NAME.fullmatch(self.profile)
        if match is None:
            raise ValueError(f"profile '{self.profile}' is not '<n>g.<m>gb[+me]'")
        if int(match["compute"]) != self.compute_slices:
            raise ValueError(f"{self.profile}: compute_slices {self.compute_slices} != name")
        if int(match["memory"]) * GB != self.memory_bytes:
            raise ValueError(f"{self.profile}: memory_bytes {self.memory_bytes} != name GB")
        if (match["me"] is not None) != self.has_media_extensions:
            raise ValueError(f"{self.profile}: has_media_extensions disagrees with the name")
        return self


class MigLayout(CatalogRow):
    """A set of MIG instances on one GPU that a source shows working.

    `instances` holds (profile, count) pairs so callers can write
    `dict(layout.instances)`; it is parsed from, and serialised back to, the
    CSV cell's `profile=count` strings, so JSON and CSV output read like the
    data file.
    """

    list_columns: ClassVar[frozenset[str]] = frozenset({"instances"})
    table_columns: ClassVar[tuple[str, ...]] = ("accelerator", "name", "instances")

    accelerator: str
    name: str
    instances: tuple[tuple[str, PositiveInt], ...]

    @field_validator("instances", mode="before")
    @classmethod
    def _parse_cells(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.split(";")
        if not isinstance(value, Iterable):
            return value
        parsed: list[object] = []
        for entry in value:
            if isinstance(entry, str):
                match = _INSTANCE.fullmatch(entry.strip())
                if match is None:
                    raise ValueError(f"instance '{entry}' is not 'profile=count' with count >= 1")
                parsed.append((match["profile"], int(match["count"])))
            else:
                parsed.append(entry)
        return tuple(parsed)

    @field_validator("instances")
    @classmethod
    def _one_entry_per_profile(
        cls, value: tuple[tuple[str, int], ...]
    ) -> tuple[tuple[str, int], ...]:
        if not value:
            raise ValueError("a layout needs at least one instance")
        profiles = [profile for profile, _ in value]
        repeated = sorted({p for p in profiles if profiles.count(p) > 1})
        if repeated:
            raise ValueError(f"profiles listed more than once: {repeated}")
        return value

    @field_serializer("instances")
    def _as_cells(self, value: tuple[tuple[str, int], ...]) -> list[str]:
        return [f"{profile}={count}" for profile, count in value]


@cache
def load_mig_profiles() -> tuple[MigProfile, ...]:
    rows = load_rows("mig_profiles.csv", MigProfile)
    seen: set[tuple[str, str]] = set()
    for row in rows:
        key = (row.accelerator, row.profile)
        if key in seen:
            raise CatalogError(f"mig_profiles.csv: {row.accelerator} {row.profile} listed twice")
        seen.add(key)
    return rows


@cache
def _profiles_by_accelerator() -> Mapping[str, tuple[MigProfile, ...]]:
    grouped: dict[str, list[MigProfile]] = {}
    for row in load_mig_profiles():
        grouped.setdefault(row.accelerator, []).append(row)
    return MappingProxyType({acc: tuple(rows) for acc, rows in grouped.items()})


def mig_accelerators() -> tuple[str, ...]:
    """Canonical names of the accelerators that have MIG profiles, in file order."""
    return tuple(_profiles_by_accelerator())


def mig_profiles_for(accelerator_name: str) -> tuple[MigProfile, ...]:
    """Profiles of one accelerator; empty for one without MIG, so callers need not ask first."""
    return _profiles_by_accelerator().get(accelerator_name, ())


def _find_profile(accelerator: str, profile: str) -> MigProfile | None:
    # Profile names are lowercase in every source; users type them in any case.
    wanted = profile.strip().lower()
    for row in mig_profiles_for(accelerator):
        if row.profile == wanted:
            return row
    return None


def get_mig_profile(accelerator: str, profile: str) -> MigProfile:
    """One profile, or an error naming the profiles that do exist on that accelerator."""
    row = _find_profile(accelerator, profile)
    if row is None:
        known = [p.profile for p in mig_profiles_for(accelerator)]
        raise UnknownNameError(f"MIG profile for {accelerator}", profile, known)
    return row


@cache
def load_mig_layouts() -> tuple[MigLayout, ...]:
    rows = load_rows("mig_layouts.csv", MigLayout)
    seen: set[tuple[str, str]] = set()
    for row in rows:
        key = (row.accelerator, row.name)
        if key in seen:
            raise CatalogError(f"mig_layouts.csv: {row.accelerator} {row.name} listed twice")
        seen.add(key)
    return rows


def layouts_for(accelerator: str) -> tuple[MigLayout, ...]:
    """Known-valid layouts of one accelerator (canonical name); empty when it has none."""
    return tuple(row for row in load_mig_layouts() if row.accelerator == accelerator)


def get_mig_layout(accelerator: str, name: str) -> MigLayout:
    """A catalog layout by name, so specs can say `all-balanced` instead of listing profiles."""
    wanted = name.strip().lower()
    for row in layouts_for(accelerator):
        if row.name == wanted:
            return row
    known = [row.name for row in layouts_for(accelerator)]
    raise UnknownNameError(f"MIG layout for {accelerator}", name, known)


def _whole_gpu(profiles: tuple[MigProfile, ...]) -> MigProfile:
    # The largest profile (7g.*) is the whole GPU under MIG; its slices and
    # memory are the budget a layout shares. Taking it from the table rather
    # than a constant keeps 4-slice GPUs (A30) right if they are added.
    return max(profiles, key=lambda p: (p.compute_slices, p.memory_bytes))


def whole_gpu_slices(accelerator: str) -> int:
    """Compute slices of the whole GPU under MIG (7 on every catalog GPU so far): the
    denominator of every slice's share of the GPU; 1 for an accelerator without MIG."""
    profiles = mig_profiles_for(accelerator)
    return _whole_gpu(profiles).compute_slices if profiles else 1


def span_share(start: int, size: int, whole: int, scale: int) -> int:
    """What compute slices [start, start + size) of a `whole`-slice GPU weigh, in units of
    which the GPU has `scale`: floor(scale * end / whole) - floor(scale * start / whole).

    The weights telescope: slices laid end to end over a GPU add up to exactly `scale`
    (1000 thousandths for 7 slices: 142 + 143 + 286 + 429 for 1g+1g+2g+3g), where each
    slice's own rounded share (ceil: 143 + 143 + 286 + 429 = 1001) would not; and each
    weight is within 1 of scale * size / whole, at most its ceiling.
    """
    if not (start >= 0 and size > 0 and start + size <= whole):
        raise ValueError(f"slices [{start}, {start + size}) do not lie on a {whole}-slice GPU")
    return scale * (start + size) // whole - scale * start // whole


def layout_starts(accelerator: str, instances: Iterable[tuple[str, int]]) -> tuple[int, ...]:
    """Where each instance of a layout begins on the GPU (its first compute slice), instances
    laid end to end in layout order: profile by profile as listed, `count` times each.

    This is gpufleet's convention, not NVIDIA's placement table (which the sources lack,
    see `check_layout`); it only has to be fixed per layout, so that each slice of a GPU
    covers its own compute slices and `span_share` adds up over the GPU.
    """
    out: list[int] = []
    at = 0
    for name, count in instances:
        size = get_mig_profile(accelerator, name).compute_slices
        for _ in range(count):
            out.append(at)
            at += size
    return tuple(out)


def layout_shares(
    accelerator: str, instances: Iterable[tuple[str, int]], scale: int
) -> tuple[int, ...]:
    """`span_share` of each instance of a layout, in layout order (`layout_starts`): they add
    up to exactly `scale` when the layout uses every compute slice of the GPU, and to
    floor(scale * used / whole) otherwise (the idle slices weigh the rest)."""
    whole = whole_gpu_slices(accelerator)
    sizes = [
        get_mig_profile(accelerator, name).compute_slices for name, n in instances for _ in range(n)
    ]
    starts = list(itertools.accumulate(sizes, initial=0))[:-1]  # as `layout_starts` lays them
    return tuple(span_share(at, size, whole, scale) for at, size in zip(starts, sizes, strict=True))


def _gb(size_bytes: int) -> str:
    return f"{size_bytes / GB:g}"


def check_layout(accelerator: str, instances: Mapping[str, int]) -> list[str]:
    """Problems that rule a layout out; an empty list means none were found.

    The check returns every problem rather than raising on the first, so a
    planner can show a user all of them at once. It covers only the rules the
    sources state: passing is necessary, not sufficient. NVIDIA's placement
    table (which slice offsets each profile may start at, and the 8 memory
    slices behind it) is not in the sources, so a layout that passes may still
    fail to place on the hardware.
    """
    profiles = mig_profiles_for(accelerator)
    if not profiles:
        return [f"{accelerator}: no MIG profiles in the catalog for this accelerator"]

    problems: list[str] = []
    counts: dict[str, tuple[MigProfile, int]] = {}
    for name, count in instances.items():
        if count < 0:
            problems.append(f"{name}: count {count} is negative")
            continue
        row = _find_profile(accelerator, name)
        if row is None:
            known = [p.profile for p in profiles]
            problems.append(str(UnknownNameError(f"MIG profile for {accelerator}", name, known)))
            continue
        if count:
            previous = counts.get(row.profile, (row, 0))[1]
            counts[row.profile] = (row, previous + count)

    # Per-profile maximum: NVIDIA/mig-parted builder_test.go profile table (MaxCount).
    for row, count in counts.values():
        if count > row.max_instances:
            problems.append(
                f"{row.profile}: {count} instances requested, "
                f"at most {row.max_instances} fit on {accelerator}"
            )

    whole = _whole_gpu(profiles)
    chosen = list(counts.values())
    n_instances = sum(count for _, count in chosen)

    # Compute slice budget: 7 per GPU (ecosystem-anchors §4.5, MIG user guide
    # "Max Number of Instances 7"); the `<n>g` of a profile is its slice count.
    compute = sum(row.compute_slices * count for row, count in chosen)
    if compute > whole.compute_slices:
        problems.append(
            f"compute: {compute} slices requested, {accelerator} has {whole.compute_slices}"
        )

    # Memory budget: the whole-GPU profile's memory. Profile names round each
    # instance to whole GB, so their sum overstates: mig-parted's own
    # all-balanced layout for H200 names 142 GB on a GPU whose whole-GPU
    # profile is 7g.141gb. If each name is within 1 GB of the true size, a
    # layout that fits names at most whole + n GB for n instances; only a
    # larger excess proves it cannot fit. Smaller overflows go unseen until
    # the sources give memory-slice counts.
    memory = sum(row.memory_bytes * count for row, count in chosen)
    if memory > whole.memory_bytes + n_instances * GB:
        problems.append(
            f"memory: {_gb(memory)} GB requested, more than {accelerator}'s "
            f"{_gb(whole.memory_bytes)} GB even allowing 1 GB of name rounding per instance"
        )

    # Media extensions: config-default.yaml's +me layouts hold a single
    # instance and every +me profile has MaxCount 1 (mig-parted @bd7160f).
    media = sum(count for row, count in chosen if row.has_media_extensions)
    if media > 1:
        problems.append(f"media extensions: {media} +me instances requested, at most 1 per GPU")

    return problems
