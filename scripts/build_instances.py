"""Build src/gpufleet/catalog/data/instances.csv from the in-repo raw SkyPilot catalog copies.

Why a script and not a hand-edited CSV: the cloud price table has thousands of rows drawn
from upstream files that change every few hours. Keeping the upstream rows verbatim (gzip,
under data/raw/) and deriving the catalog table with one documented, deterministic program
means a refresh is "replace the raw copy, re-run, read the diff", and a reviewer can check
every cleaning step here instead of trusting a spreadsheet session.

Usage::

    python scripts/build_instances.py          # rewrite instances.csv, print what was dropped
    python scripts/build_instances.py --check  # exit 1 if instances.csv is not up to date

The script reads ONLY `src/gpufleet/catalog/data/raw/*.csv.gz` (never ../shared). Output rows
are one per (provider, name, region), sorted by that key, with LF line endings.

Cleaning steps, in order (each is counted in the printed summary):

1. Integrity: every raw file must decompress to the SHA-256 recorded in `RAW_FILES` (the
   same digests are in data/raw/README.md), so an edited copy cannot slip through.
2. GCP exact duplicate rows (the source repeats every tpu-v4 row, tpu-v5p in europe-west4-b
   and tpu-v6e in us-central2-b) are removed; duplicates that differ in any field would be an
   error, not silently resolved.
3. GCP `700.0` in Price or SpotPrice is a placeholder SkyPilot writes where no real price
   exists (cloud README); the value is dropped (becomes empty) and the row's notes say so.
   The row itself is kept: it still records that the slice is listed in that region.
4. GCP host rows with Price/SpotPrice `0.0` (all a4-highgpu-8g rows) are not list prices
   for a 224-vCPU machine; the values are dropped (empty) and noted.
5. Empty prices in the source stay empty (they load as None): nothing is guessed.
6. Zones are folded into regions: the on-demand price must be the same in every zone of a
   region (the script fails otherwise); spot becomes `spot_min`/`spot_max` over the zones
   that have a spot price; `zones_count` counts the zones listed. Azure rows have no zones.
7. GCP whole-VM rows are composed only for machine types whose GPU count a read source
   states (`GCP_COMPOSED`): host price + accelerator price in the same zone, with the formula
   in `derivation`. Zone rows used in a composition are not emitted again; the leftovers
   stay as `gcp-gpu:<NAME>x<N>` (GPU price only) and `gcp-host:<machine type>` (host price
   only) rows whose `price_scope` says what the price covers.
8. Units: MemoryGiB x 2^30 and GpuInfo MiB x 2^20 to exact integer bytes; numbers are
   written without trailing zeros (value unchanged).
9. Conflicts with a better source are resolved in the column and kept in notes: EC2's
   Trainium2 per-device memory (524,288 MiB, against 96 GiB per chip) is not used, and Azure
   Standard_ND96isr_H100_v5 gets Microsoft's 8 GPUs instead of SkyPilot's 12.
"""

from __future__ import annotations

import argparse
import ast
import csv
import gzip
import hashlib
import io
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA_DIR = REPO / "src" / "gpufleet" / "catalog" / "data"
RAW_DIR = DATA_DIR / "raw"
OUTPUT = DATA_DIR / "instances.csv"
RETRIEVED = "2026-11-29"

SKYPILOT = "skypilot-org/skypilot-catalog"
AWS_COMMIT = "00148f2af3672e2229b4f7bf8157d5a3f36e3c35"
GCP_COMMIT = "006059e0f18acb1341e22a27751e9f80df6ba92f"
AZURE_COMMIT = "098741e70562f65d7af1cceb81e33b284f742604"
# Rows cite `owner/name:path@commit7` (the project's citation style); full ids are in
# data/raw/README.md and docs/catalog/provenance-cloud.md.
AWS_SOURCE = f"{SKYPILOT}:catalogs/v8/aws/vms.csv@{AWS_COMMIT[:7]}"
GCP_SOURCE = f"{SKYPILOT}:catalogs/v8/gcp/vms.csv@{GCP_COMMIT[:7]}"
AZURE_SOURCE = f"{SKYPILOT}:catalogs/v6/azure/vms.csv@{AZURE_COMMIT[:7]}"

# Raw copy -> SHA-256 of its decompressed bytes (the research snapshot's files, CRLF).
RAW_FILES: dict[str, str] = {
    "aws_gpu_vms.csv.gz": "2b73b26f4d97858fcaa65f34a566665148375216fbfd3a65431eceeb3cd30ada",
    "gcp_gpu_vms.csv.gz": "4c9cb667d91710a50d472d79a63a5cc0ddc03f5076156b95324b3a422d52c7db",
    "gcp_gpu_host_vms.csv.gz": "44691653f027c584da5f8eaec6e782beabe8a216a987990c9bbc35e941a6a57c",
    "azure_gpu_vms.csv.gz": "ac191dfdb3f68976b5ec1e748ff1a4c3ca1a23fa0b6fb96bf5e00e6ea87a5894",
}

COLUMNS: tuple[str, ...] = (
    "provider",
    "name",
    "region",
    "price_scope",
    "accelerator",
    "provider_accelerator_name",
    "accelerators_count",
    "host_vcpus",
    "host_memory_bytes",
    "accelerator_memory_bytes",
    "on_demand_usd_per_hour",
    "spot_min_usd_per_hour",
    "spot_max_usd_per_hour",
    "zones_count",
    "arch",
    "derivation",
    "source",
    "retrieved",
    "notes",
)

GIB = 2**30
MIB = 2**20
GCP_PLACEHOLDER = Decimal("700.0")

# SkyPilot accelerator name -> canonical gpufleet accelerator. Names not listed keep an empty
# `accelerator` and only their raw `provider_accelerator_name` (T4, V100, Inferentia, B300...).
AWS_ACCELERATORS: dict[str, str] = {
    "A100": "a100-sxm4-40gb",
    "A100-80GB": "a100-sxm4-80gb",
    "H100": "h100-sxm5-80gb",
    "H200": "h200-sxm-141gb",
    "B200": "b200-sxm-192gb",
    "Trainium": "trainium1",
    "Trainium2": "trainium2",
    "L4": "l4",
    "L40S": "l40s",
    "A10G": "a10g",
}
GCP_ACCELERATORS: dict[str, str] = {
    "A100": "a100-sxm4-40gb",
    "A100-80GB": "a100-sxm4-80gb",
    "H100": "h100-sxm5-80gb",
    "H100-MEGA": "h100-sxm5-80gb",
    "H200": "h200-sxm-141gb",
    "B200": "b200-sxm-192gb",
    "L4": "l4",
}
# TPU slice name prefix -> canonical chip; tpu-v2/v3 are not in the gpufleet catalog.
GCP_TPU_GENERATIONS: dict[str, str] = {
    "tpu-v4": "tpu-v4",
    "tpu-v5litepod": "tpu-v5e",
    "tpu-v5p": "tpu-v5p",
    "tpu-v6e": "tpu-v6e",
}
# Azure VM size -> (canonical accelerator, GPUs per VM, why). Only sizes whose GPU model and
# form factor a read source states; other sizes keep an empty `accelerator`.
AZURE_OVERRIDES: dict[str, tuple[str, int, str]] = {
    "Standard_ND96isr_H100_v5": (
        "h100-sxm5-80gb",
        8,
        "accelerators_count 8 and H100-SXM5-80GB from MicrosoftDocs/azure-docs "
        "articles/virtual-machines/nd-h100-v5-series.md@142681b (8 H100 per VM); "
        "SkyPilot lists AcceleratorCount 12 for this size, a source quirk",
    ),
}
AZURE_OVERRIDE_SOURCE = (
    "MicrosoftDocs/azure-docs:articles/virtual-machines/nd-h100-v5-series.md@142681b"
)


@dataclass(frozen=True)
class Composition:
    """A GCP machine type whose GPU count a read source states, so host + GPUs is one VM."""

    machine_type: str
    accelerator: str  # SkyPilot AcceleratorName
    count: int
    evidence: str  # where the GPU count per machine type is stated


GCP_COMPOSED: tuple[Composition, ...] = (
    Composition(
        "a3-highgpu-8g",
        "H100",
        8,
        "gpufleet research snapshot sources/cloud/README.md (gcp_gpu_host_vms.csv section): "
        "'a3-highgpu-8g in a zone costs its host row plus the H100, count 8 row of the same "
        "zone'",
    ),
    Composition(
        "a3-ultragpu-8g",
        "H200",
        8,
        "gpufleet research snapshot sources/fabrics.csv row 'GCP A3 Ultra (a3-ultragpu-8g) / "
        "A4' (GoogleCloudPlatform/cluster-toolkit discussion #3478): '8 H200 GPUs'",
    ),
)

NOTE_GPU_ONLY = (
    "GPU price only: SkyPilot prices GCP GPUs apart from the host machine type "
    "(see gcp-host rows); no read source states the GPU count of the machine type, "
    "so no whole-VM price is composed"
)
NOTE_GPU_LEFTOVER = (
    "GPU price only, in zones where the source lists no {machine} host row to compose with"
)
NOTE_HOST_ONLY = (
    "host machine-type price only, without its GPUs (priced in gcp-gpu rows); no read source "
    "states this machine type's GPU count, so no whole-VM price is composed"
)
NOTE_HOST_LEFTOVER = "host price only, in zones where the source lists no {gpu} row to compose with"
NOTE_TPU = (
    "whole-slice price (SkyPilot AcceleratorCount 1 = one slice); chips per slice not stated "
    "in a read source, so accelerators_count is empty"
)


def fmt(value: Decimal | None) -> str:
    """Plain decimal text without exponent or trailing zeros: 55.040 -> 55.04, 8.0 -> 8."""
    if value is None:
        return ""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def dec(text: str) -> Decimal | None:
    return Decimal(text) if text.strip() else None


def exact_int(value: Decimal, what: str) -> int:
    if value != value.to_integral_value():
        raise ValueError(f"{what}: {value} is not a whole number")
    return int(value)


def gib_to_bytes(text: str) -> str:
    value = dec(text)
    return "" if value is None else str(exact_int(value * GIB, f"MemoryGiB {text}"))


def whole(text: str) -> str:
    value = dec(text)
    return "" if value is None else str(exact_int(value, f"count {text}"))


def gpu_memory_bytes(gpu_info: str) -> int | None:
    """Per-device memory from SkyPilot's GpuInfo dict string (MiB), or None if absent."""
    if not gpu_info.startswith("{"):
        return None
    info: Any = ast.literal_eval(gpu_info)
    devices = info.get("Gpus") or []
    sizes = {d["MemoryInfo"]["SizeInMiB"] for d in devices if "MemoryInfo" in d}
    if len(sizes) != 1:
        return None
    return int(sizes.pop()) * MIB


def read_raw(raw_dir: Path, name: str) -> list[dict[str, str]]:
    """Rows of one raw copy, after checking its digest against `RAW_FILES`."""
    data = gzip.decompress((raw_dir / name).read_bytes())
    digest = hashlib.sha256(data).hexdigest()
    if digest != RAW_FILES[name]:
        raise ValueError(f"{name}: SHA-256 {digest} does not match the recorded copy")
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))


@dataclass
class Summary:
    """What the build kept, dropped and why; printed by main() and checked by tests."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] += n

    def lines(self) -> list[str]:
        return [f"{key}: {self.counts[key]}" for key in sorted(self.counts)]


@dataclass
class ZoneRow:
    """One source row reduced to what region folding needs."""

    zone: str
    price: Decimal | None
    spot: Decimal | None


def fold_region(
    zones: Sequence[ZoneRow], what: str
) -> tuple[Decimal | None, Decimal | None, Decimal | None]:
    """(on-demand, spot min, spot max) for one region; on-demand must agree across zones."""
    prices = {z.price for z in zones}
    if len(prices) != 1:
        raise ValueError(
            f"{what}: on-demand price differs between zones: {sorted(map(str, prices))}"
        )
    spots = [z.spot for z in zones if z.spot is not None]
    return prices.pop(), (min(spots) if spots else None), (max(spots) if spots else None)


def join_notes(notes: Iterable[str]) -> str:
    return "; ".join(n for n in notes if n)


def build_aws(rows: list[dict[str, str]], summary: Summary) -> list[dict[str, str]]:
    groups: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        groups[(row["InstanceType"], row["Region"])].append(row)
    out: list[dict[str, str]] = []
    for (name, region), group in groups.items():
        first = group[0]
        for other in group[1:]:
            for col in ("AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "GpuInfo"):
                if other[col] != first[col]:
                    raise ValueError(f"aws {name} {region}: {col} differs between zones")
        zones = [
            ZoneRow(r["AvailabilityZone"], dec(r["Price"]), dec(r["SpotPrice"])) for r in group
        ]
        on_demand, spot_min, spot_max = fold_region(zones, f"aws {name} {region}")
        raw_name = first["AcceleratorName"]
        notes: list[str] = []
        memory = gpu_memory_bytes(first["GpuInfo"])
        count = dec(first["AcceleratorCount"])
        if count is not None and count < 1:
            notes.append(
                f"fractional GPU: {fmt(count)} of one {raw_name} per instance; "
                "accelerator_memory_bytes is the partition's memory"
            )
        if raw_name == "Trainium2" and memory is not None:
            notes.append(
                f"GpuInfo gives {memory // MIB} MiB per device, which conflicts with 96 GiB per "
                "Trainium2 chip (accelerators.csv); accelerator_memory_bytes left empty"
            )
            memory = None
            summary.add("aws: Trainium2 GpuInfo memory not used (conflicts with chip spec)")
        if name == "p5.4xlarge":
            notes.append(
                "mapped to h100-sxm5-80gb like p5.48xlarge (SkyPilot AcceleratorName H100, "
                "GpuInfo 81920 MiB); the form factor is not stated in the source"
            )
        if raw_name == "B200":
            notes.append("EC2 GpuInfo reports 183359 MiB usable memory per GPU")
        if on_demand is None:
            summary.add("aws: region rows with empty on-demand price (kept empty)")
            notes.append("no on-demand price in the source (Capacity Blocks; see commitments.csv)")
        if spot_min is None:
            summary.add("aws: region rows with no spot price in any zone (kept empty)")
            notes.append("no spot price in the source")
        summary.add("aws: source zone rows", len(group))
        out.append(
            {
                "provider": "aws",
                "name": name,
                "region": region,
                "price_scope": "instance",
                "accelerator": AWS_ACCELERATORS.get(raw_name, ""),
                "provider_accelerator_name": raw_name,
                "accelerators_count": fmt(count),
                "host_vcpus": whole(first["vCPUs"]),
                "host_memory_bytes": gib_to_bytes(first["MemoryGiB"]),
                "accelerator_memory_bytes": "" if memory is None else str(memory),
                "on_demand_usd_per_hour": fmt(on_demand),
                "spot_min_usd_per_hour": fmt(spot_min),
                "spot_max_usd_per_hour": fmt(spot_max),
                "zones_count": str(len({z.zone for z in zones})),
                "arch": first["Arch"],
                "derivation": "",
                "source": AWS_SOURCE,
                "retrieved": RETRIEVED,
                "notes": join_notes(notes),
            }
        )
    return out


def dedupe(rows: list[dict[str, str]], key_cols: Sequence[str], what: str) -> list[dict[str, str]]:
    """Drop exact duplicate rows; rows sharing a key but differing elsewhere are an error."""
    seen: dict[tuple[str, ...], dict[str, str]] = {}
    kept: list[dict[str, str]] = []
    for row in rows:
        key = tuple(row[c] for c in key_cols)
        if key in seen:
            if seen[key] != row:
                raise ValueError(f"{what}: conflicting rows for {key}")
            continue
        seen[key] = row
        kept.append(row)
    return kept


@dataclass
class GcpZone:
    """A GCP zone row after placeholder cleaning, with what was cleaned for the notes."""

    zone: str
    price: Decimal | None
    spot: Decimal | None
    dropped: list[str]


def clean_gcp(row: dict[str, str], summary: Summary, kind: str) -> GcpZone:
    """Drop the placeholder prices described in the module docstring (steps 3 and 4)."""
    price, spot = dec(row["Price"]), dec(row["SpotPrice"])
    dropped: list[str] = []
    if price == GCP_PLACEHOLDER:
        price = None
        dropped.append("Price 700.0 placeholder dropped")
        summary.add("gcp: 700.0 placeholder Price values dropped")
    if spot == GCP_PLACEHOLDER:
        spot = None
        dropped.append("SpotPrice 700.0 placeholder dropped")
        summary.add("gcp: 700.0 placeholder SpotPrice values dropped")
    if kind == "host" and price == 0:
        price = None
        dropped.append("host Price 0.0 dropped (not a list price)")
        summary.add("gcp: host Price 0.0 values dropped")
    if kind == "host" and spot == 0:
        spot = None
        dropped.append("host SpotPrice 0.0 dropped (not a list price)")
        summary.add("gcp: host SpotPrice 0.0 values dropped")
    if spot is None and row["SpotPrice"].strip() == "":
        summary.add("gcp: zone rows with empty SpotPrice in the source (kept empty)")
    return GcpZone(row["AvailabilityZone"], price, spot, dropped)


def gcp_region_row(
    *,
    name: str,
    region: str,
    zones: Sequence[GcpZone],
    price_scope: str,
    accelerator: str,
    raw_name: str,
    count: str,
    vcpus: str,
    memory_gib: str,
    accel_memory: int | None,
    notes: list[str],
    source: str = GCP_SOURCE,
    derivation: str = "",
) -> dict[str, str]:
    folded = [ZoneRow(z.zone, z.price, z.spot) for z in zones]
    on_demand, spot_min, spot_max = fold_region(folded, f"gcp {name} {region}")
    dropped_in: dict[str, list[str]] = defaultdict(list)
    for z in zones:
        for what in z.dropped:
            dropped_in[what].append(z.zone)
    cleaned = [f"{what} ({', '.join(sorted(zs))})" for what, zs in sorted(dropped_in.items())]
    all_notes = [*notes, *cleaned]
    if on_demand is None:
        all_notes.append("no on-demand price")
    if spot_min is None:
        all_notes.append("no spot price")
    return {
        "provider": "gcp",
        "name": name,
        "region": region,
        "price_scope": price_scope,
        "accelerator": accelerator,
        "provider_accelerator_name": raw_name,
        "accelerators_count": count,
        "host_vcpus": whole(vcpus),
        "host_memory_bytes": gib_to_bytes(memory_gib),
        "accelerator_memory_bytes": "" if accel_memory is None else str(accel_memory),
        "on_demand_usd_per_hour": fmt(on_demand),
        "spot_min_usd_per_hour": fmt(spot_min),
        "spot_max_usd_per_hour": fmt(spot_max),
        "zones_count": str(len({z.zone for z in zones})),
        "arch": "",
        "derivation": derivation,
        "source": source,
        "retrieved": RETRIEVED,
        "notes": join_notes(all_notes),
    }


def add_cost(a: Decimal | None, b: Decimal | None) -> Decimal | None:
    return None if a is None or b is None else a + b


# region -> zone -> (source row, cleaned zone); zone entries are popped once composed.
ZoneMap = dict[str, dict[str, tuple[dict[str, str], GcpZone]]]


def index_gcp(
    rows: list[dict[str, str]], key_cols: Sequence[str], kind: str, summary: Summary
) -> dict[tuple[str, ...], ZoneMap]:
    """De-duplicate GCP rows, clean their prices and index them by key, region and zone."""
    kept = dedupe(rows, (*key_cols, "AvailabilityZone"), f"gcp {kind}")
    summary.add(f"gcp: exact duplicate {kind} rows removed", len(rows) - len(kept))
    index: dict[tuple[str, ...], ZoneMap] = defaultdict(lambda: defaultdict(dict))
    for row in kept:
        zone = clean_gcp(row, summary, kind)
        index[tuple(row[c] for c in key_cols)][row["Region"]][zone.zone] = (row, zone)
    return index


def compose_gcp(
    comp: Composition, host_map: ZoneMap, gpu_map: ZoneMap, summary: Summary
) -> list[dict[str, str]]:
    """Whole-VM rows for one composition; consumes the zone rows it uses from both maps."""
    out: list[dict[str, str]] = []
    derivation = (
        f"on_demand = host {comp.machine_type} Price + {comp.accelerator} x{comp.count} "
        "Price (same region); spot_min/max = min/max over zones of host SpotPrice + "
        f"{comp.accelerator} x{comp.count} SpotPrice (same zone)"
    )
    for region in sorted(set(host_map) & set(gpu_map)):
        common = sorted(set(host_map[region]) & set(gpu_map[region]))
        zones: list[GcpZone] = []
        for z in common:
            (h_row, hz), (g_row, gz) = host_map[region].pop(z), gpu_map[region].pop(z)
            dropped = [f"host {d}" for d in hz.dropped] + [f"GPU {d}" for d in gz.dropped]
            cost = GcpZone(z, add_cost(hz.price, gz.price), add_cost(hz.spot, gz.spot), dropped)
            zones.append(cost)
            summary.add(f"gcp: zone pairs composed into {comp.machine_type} rows")
        if not zones:
            continue
        out.append(
            gcp_region_row(
                name=comp.machine_type,
                region=region,
                zones=zones,
                price_scope="instance",
                accelerator=GCP_ACCELERATORS.get(comp.accelerator, ""),
                raw_name=comp.accelerator,
                count=str(comp.count),
                vcpus=h_row["vCPUs"],
                memory_gib=h_row["MemoryGiB"],
                accel_memory=gpu_memory_bytes(g_row["GpuInfo"]),
                notes=[f"GPU count per machine type: {comp.evidence}"],
                source=f"{GCP_SOURCE} (host and accelerator rows)",
                derivation=derivation,
            )
        )
    return out


def gcp_accelerator_rows(
    raw_name: str, count: str, regions: ZoneMap, leftover_note: str | None
) -> list[dict[str, str]]:
    """TPU slice rows, or GPU-only rows for the zones no composition used."""
    out: list[dict[str, str]] = []
    for region, zmap in regions.items():
        if not zmap:
            continue
        first = zmap[min(zmap)][0]
        zones = [zmap[z][1] for z in sorted(zmap)]
        if raw_name.startswith("tpu-"):
            generation = raw_name.rsplit("-", 1)[0]
            accelerator, price_scope, name, notes = (
                GCP_TPU_GENERATIONS.get(generation, ""),
                "slice",
                raw_name,
                [NOTE_TPU],
            )
            count_text, memory = "", None
        else:
            accelerator, price_scope, name = (
                GCP_ACCELERATORS.get(raw_name, ""),
                "accelerators-only",
                f"gcp-gpu:{raw_name}x{count}",
            )
            notes = [leftover_note or NOTE_GPU_ONLY]
            if raw_name == "H100-MEGA":
                notes.append("H100-MEGA is SkyPilot's name for the H100 of A3 Mega (a3-megagpu)")
            count_text, memory = whole(count), gpu_memory_bytes(first["GpuInfo"])
        out.append(
            gcp_region_row(
                name=name,
                region=region,
                zones=zones,
                price_scope=price_scope,
                accelerator=accelerator,
                raw_name=raw_name,
                count=count_text,
                vcpus="",
                memory_gib="",
                accel_memory=memory,
                notes=notes,
            )
        )
    return out


def gcp_host_rows(
    machine: str, regions: ZoneMap, leftover_note: str | None
) -> list[dict[str, str]]:
    """Host-only rows for GPU machine types (or zones) that no composition used."""
    out: list[dict[str, str]] = []
    for region, zmap in regions.items():
        if not zmap:
            continue
        first = zmap[min(zmap)][0]
        notes = [leftover_note or NOTE_HOST_ONLY]
        if machine == "a4-highgpu-8g":
            notes.append(
                "the cloud README infers (not stated by SkyPilot) that the B200 x8 "
                "accelerator row holds the whole A4 price"
            )
        out.append(
            gcp_region_row(
                name=f"gcp-host:{machine}",
                region=region,
                zones=[zmap[z][1] for z in sorted(zmap)],
                price_scope="host-only",
                accelerator="",
                raw_name="",
                count="",
                vcpus=first["vCPUs"],
                memory_gib=first["MemoryGiB"],
                accel_memory=None,
                notes=notes,
            )
        )
    return out


def build_gcp(
    accel_rows: list[dict[str, str]], host_rows: list[dict[str, str]], summary: Summary
) -> list[dict[str, str]]:
    summary.add("gcp: source accelerator rows", len(accel_rows))
    summary.add("gcp: source host rows", len(host_rows))
    gpus = index_gcp(accel_rows, ("AcceleratorName", "AcceleratorCount"), "accelerator", summary)
    hosts = index_gcp(host_rows, ("InstanceType",), "host", summary)
    out: list[dict[str, str]] = []
    gpu_notes: dict[tuple[str, ...], str] = {}
    host_notes: dict[tuple[str, ...], str] = {}
    for comp in GCP_COMPOSED:
        gpu_key: tuple[str, ...] = (comp.accelerator, str(comp.count))
        host_key: tuple[str, ...] = (comp.machine_type,)
        out += compose_gcp(comp, hosts[host_key], gpus[gpu_key], summary)
        gpu_notes[gpu_key] = NOTE_GPU_LEFTOVER.format(machine=comp.machine_type)
        host_notes[host_key] = NOTE_HOST_LEFTOVER.format(gpu=f"{comp.accelerator} x{comp.count}")
    for key, regions in gpus.items():
        out += gcp_accelerator_rows(key[0], key[1], regions, gpu_notes.get(key))
    for key, regions in hosts.items():
        out += gcp_host_rows(key[0], regions, host_notes.get(key))
    return out


def build_azure(rows: list[dict[str, str]], summary: Summary) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for row in dedupe(rows, ("InstanceType", "Region"), "azure"):
        name, raw_name = row["InstanceType"], row["AcceleratorName"]
        price, spot = dec(row["Price"]), dec(row["SpotPrice"])
        notes: list[str] = []
        accelerator, count, source = "", fmt(dec(row["AcceleratorCount"])), AZURE_SOURCE
        if name in AZURE_OVERRIDES:
            accelerator, fixed, why = AZURE_OVERRIDES[name]
            count = str(fixed)
            notes.append(why)
            source = f"{AZURE_SOURCE}; {AZURE_OVERRIDE_SOURCE}"
            summary.add("azure: AcceleratorCount replaced by the vendor doc value")
        if price is None:
            notes.append("no on-demand price in the source")
            summary.add("azure: rows with empty on-demand price (kept empty)")
        if spot is None:
            notes.append("no spot price in the source")
            summary.add("azure: rows with empty spot price (kept empty)")
        elif spot == price:
            notes.append("spot price equals on-demand in the source")
        out.append(
            {
                "provider": "azure",
                "name": name,
                "region": row["Region"],
                "price_scope": "instance",
                "accelerator": accelerator,
                "provider_accelerator_name": raw_name,
                "accelerators_count": count,
                "host_vcpus": whole(row["vCPUs"]),
                "host_memory_bytes": gib_to_bytes(row["MemoryGiB"]),
                "accelerator_memory_bytes": "",
                "on_demand_usd_per_hour": fmt(price),
                "spot_min_usd_per_hour": fmt(spot),
                "spot_max_usd_per_hour": fmt(spot),
                "zones_count": "",
                "arch": "",
                "derivation": "",
                "source": source,
                "retrieved": RETRIEVED,
                "notes": join_notes(notes),
            }
        )
    summary.add("azure: source rows", len(rows))
    return out


def build(raw_dir: Path = RAW_DIR) -> tuple[str, Summary]:
    """instances.csv text built from the raw copies in `raw_dir`, and the build summary."""
    summary = Summary()
    rows = [
        *build_aws(read_raw(raw_dir, "aws_gpu_vms.csv.gz"), summary),
        *build_gcp(
            read_raw(raw_dir, "gcp_gpu_vms.csv.gz"),
            read_raw(raw_dir, "gcp_gpu_host_vms.csv.gz"),
            summary,
        ),
        *build_azure(read_raw(raw_dir, "azure_gpu_vms.csv.gz"), summary),
    ]
    keys = Counter((r["provider"], r["name"], r["region"]) for r in rows)
    clashes = [k for k, n in keys.items() if n > 1]
    if clashes:
        raise ValueError(f"more than one row for {clashes[:3]}")
    rows.sort(key=lambda r: (r["provider"], r["name"], r["region"]))
    for r in rows:
        summary.add(f"output rows: {r['provider']} {r['price_scope']}")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue(), summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if instances.csv is stale")
    args = parser.parse_args(argv)
    text, summary = build()
    for line in summary.lines():
        print(line)
    if args.check:
        current = OUTPUT.read_text("utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is out of date; run scripts/build_instances.py", file=sys.stderr)
            return 1
        return 0
    with OUTPUT.open("w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    print(f"wrote {OUTPUT.relative_to(REPO)}: {text.count(chr(10)) - 1} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
