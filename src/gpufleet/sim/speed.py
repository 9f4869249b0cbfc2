"""Speed per accelerator: how long a job's trace duration takes on the GPU it lands on.

A trace's durations were measured on one accelerator, its *reference* (the bundled Pollux
workloads: the T4 nodes of their trace cluster). A job placed on accelerator X runs
`duration × speed(reference) / speed(X)` wall seconds; a gang that spans several types
runs at its slowest member. The engine keeps a job's remaining work in reference seconds
and converts it at each (re)start, so work is conserved across preemptions that move it
to another accelerator.

Speeds are relative throughputs. By default they are the catalog's dense BF16 peak
(`Accelerator.dense_flops("bf16")`): right for compute-bound training, wrong for
memory-bound or communication-bound jobs (an H200 has the H100's BF16 peak, so by
default it is no faster). `--speeds` overrides any of them. An accelerator with no
speed (not in the catalog, no published BF16 peak, no override) keeps the reference's
speed, and the caller warns, naming it: no speed is invented.

Without a reference (the default for every trace but the bundled Pollux ones, and for
generated workloads) nothing is scaled and results are exactly as before.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpufleet.errors import UnknownNameError, UserError


def canonical(accelerator: str) -> str:
    """The catalog's name of an accelerator (any alias or case), or the name as given when
    the catalog lacks it (a trace's own node type, such as 'pollux-T4')."""
    from gpufleet.catalog.accelerators import get_accelerator

    try:
        return get_accelerator(accelerator).name
    except UnknownNameError:
        return accelerator


def catalog_speed(accelerator: str) -> float | None:
    """Dense BF16 peak, TFLOP/s, from the catalog; None when unknown or unpublished."""
    from gpufleet.catalog.accelerators import get_accelerator

    try:
        flops = get_accelerator(accelerator).dense_flops("bf16")
    except UnknownNameError:
        return None
    return None if flops is None else flops / 1e12


def parse_speeds(text: str) -> dict[str, float]:
    """`ACC=SPEED,ACC=SPEED` (relative throughputs, > 0) keyed by canonical name; a
    ValueError saying what is wrong otherwise."""
    speeds: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(
                f"{item.strip()!r} is not ACCELERATOR=SPEED (e.g. h200-sxm-141gb=1.25)"
            )
        try:
            speed = float(value)
        except ValueError:
            raise ValueError(f"{name}: speed {value.strip()!r} is not a number") from None
        if not (math.isfinite(speed) and speed > 0):
            raise ValueError(f"{name}: speed must be a finite number > 0, got {value.strip()}")
        key = canonical(name)
        if key in speeds:
            raise ValueError(f"{name} is given twice")
        speeds[key] = speed
    return speeds


@dataclass(frozen=True)
class SpeedTable:
    """Each cluster accelerator's speed relative to the reference's (`speeds`; the
    reference is 1 unless `--speeds` gives it), its wall seconds per reference second
    (`factors`), and the accelerators with no speed, which run as the reference does."""

    reference: str
    speeds: Mapping[str, float]  # accelerator as the cluster names it -> relative speed
    factors: Mapping[str, float]  # the same -> speed(reference) / speed(it); 1 when unknown
    unknown: tuple[str, ...]
    sources: Mapping[str, str]  # accelerator -> where its speed came from

    def time_factor(self, accelerators: Iterable[str]) -> float:
        """Wall seconds per reference second for a job holding GPUs of `accelerators`: the
        slowest of them sets the pace of a gang."""
        factors = self.factors
        return max((factors.get(a, 1.0) for a in accelerators), default=1.0)

    def lines(self) -> list[str]:
        """What the run scales by, for the report preamble."""
        out = [f"durations are {self.reference} run times; speed relative to it, time taken:"]
        for name, factor in sorted(self.factors.items()):
            speed = self.speeds.get(name)
            shown = "?" if speed is None else f"{speed:.3g}"
            source = self.sources.get(name, "no speed: runs as the reference")
            out.append(f"  {name}: speed {shown}, time × {factor:.3g} ({source})")
        return out

    def warnings(self) -> list[str]:
        """One line per accelerator without a speed (it runs as fast as the reference)."""
        ref = self.reference
        return [
            f"no speed for {name} relative to the reference {ref} (the catalog has no BF16 "
            f"peak for {ref if catalog_speed(canonical(ref)) is None else name}): it runs as "
            f"fast as {ref}; give --speeds {name}=X to change it"
            for name in self.unknown
        ]


def speed_table(
    accelerators: Iterable[str], reference: str | None, overrides: Mapping[str, float]
) -> SpeedTable | None:
    """The table for a cluster's `accelerators` (as its nodes name them) with durations
    measured on `reference`.

    `overrides` (canonical name -> speed) are relative to the reference, whose speed is 1
    unless they give it; an accelerator they leave out takes the catalog's BF16 peak
    ratio to the reference's, when the catalog has both. None when nothing scales: no
    reference, or every node is of it. A ValueError when overrides are given without a
    reference, or name an accelerator that is neither in the cluster, the reference nor
    the catalog (a typo would otherwise change nothing in silence); a catalog accelerator
    the cluster lacks is accepted, so one command serves several "what if" clusters."""
    if reference is None:
        if overrides:
            raise ValueError(
                "speeds need a reference (--reference): the accelerator the trace's "
                "durations were measured on"
            )
        return None
    on_nodes = set(accelerators)
    names = sorted({*on_nodes, reference})
    known = {canonical(n) for n in names}
    stray = sorted(k for k in overrides if k not in known and catalog_speed(k) is None)
    if stray:
        raise ValueError(
            f"{', '.join(stray)}: neither an accelerator of the "
            f"cluster, the reference nor one the catalog knows (the cluster and reference "
            f"have: {', '.join(names)})"
        )
    if on_nodes <= {reference}:
        return None  # every node is the reference: nothing to scale
    ref_key = canonical(reference)
    ref_speed = overrides.get(ref_key, 1.0)
    ref_peak = catalog_speed(ref_key)
    speeds: dict[str, float] = {}
    sources: dict[str, str] = {}
    for name in names:
        key = canonical(name)
        peak = catalog_speed(key)
        if key in overrides:
            speeds[name], sources[name] = overrides[key], "--speeds"
        elif key == ref_key:
            speeds[name], sources[name] = ref_speed, "the reference"
        elif peak is not None and ref_peak is not None:
            speeds[name] = ref_speed * peak / ref_peak
            sources[name] = f"catalog BF16 peak {peak:g} / {ref_peak:g} TFLOP/s"
    factors = {
        name: ref_speed / speeds[name] if name in speeds else 1.0 for name in sorted(on_nodes)
    }
    unknown = tuple(n for n in names if n not in speeds)
    return SpeedTable(
        reference,
        MappingProxyType(speeds),
        MappingProxyType(factors),
        unknown,
        MappingProxyType(sources),
    )


def table_from_options(
    accelerators: Collection[str],
    workload_reference: str | None,
    speeds_text: str | None,
    reference: str | None,
) -> SpeedTable | None:
    """The CLI's `--speeds ACC=X,...` and `--reference ACC` (default: the workload's own
    reference) for a cluster of `accelerators`, as the engine's table; a `UserError` naming
    the option for anything wrong (checked before anything runs)."""
    if reference is not None and not reference.strip():
        raise UserError("--reference: give an accelerator name")
    ref = reference.strip() if reference is not None else workload_reference
    try:
        overrides = parse_speeds(speeds_text) if speeds_text is not None else {}
    except ValueError as exc:
        raise UserError(f"--speeds: {exc}") from None
    if ref is not None and reference is not None and ref not in accelerators:
        key = canonical(ref)
        if key not in overrides and catalog_speed(key) is None:
            raise UserError(
                f"--reference {reference}: no speed for it (not in the cluster, the catalog "
                "or --speeds); give it with --speeds"
            )
    try:
        return speed_table(accelerators, ref, overrides)
    except ValueError as exc:
        raise UserError(f"--speeds: {exc}") from None
