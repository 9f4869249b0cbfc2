"""`gpufleet validate training|inference --rows modern`: the baseline on current accelerators.

Both commands print the same shape: one row per published measurement, then the summary
(median |error| overall, per accelerator, per source, the worst rows, and every skipped row
counted under its reason; inference adds the H100/H200 ratios). The sections are built once
as plain strings and rendered as terminal tables, markdown (for docs/validation.md) or
JSON, so the three formats cannot disagree.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import typer
from rich.table import Table

from gpufleet.cli.output import wide_console
from gpufleet.estimate.training_memory import NEAR_LIMIT_FRACTION
from gpufleet.validation.inference_modern import (
    ModernInferenceResult,
    ModernInferenceSummary,
    PairRatio,
    VsH100,
)
from gpufleet.validation.modern import Group, Skipped
from gpufleet.validation.training_modern import ModernTrainingResult, ModernTrainingSummary


@dataclass(frozen=True)
class Section:
    title: str
    headers: tuple[str, ...]
    rows: list[tuple[str, ...]]


# Columns of the memory table after id, accelerator and layout (GB per GPU, then the share).
_MEMORY_COLUMNS = ("weights", "grads", "optimizer", "activations", "other", "total", "capacity")
_NUMERIC = {
    "published",
    "predicted",
    "error",
    "rows",
    "median abs error",
    "median error",
    "ratio",
    *_MEMORY_COLUMNS,
    "share",
}


def _pct(value: float) -> str:
    return f"{value:+.1%}"


def _groups(title: str, key: str, items: Sequence[Group]) -> Section:
    return Section(
        title,
        (key, "rows", "median abs error", "median error"),
        [(g.key, str(g.rows), f"{g.median_abs:.1%}", _pct(g.median_signed)) for g in items],
    )


def _skipped(items: Sequence[Skipped], counts: dict[str, int]) -> list[Section]:
    """Every reason with its count (zeros say what was checked); the rows themselves only
    when there are some (an empty table reads as something missing)."""
    by_reason = Section(
        "Skipped rows by reason",
        ("reason", "rows"),
        [(reason, str(n)) for reason, n in counts.items()],
    )
    if not items:
        return [by_reason]
    rows = Section(
        "Skipped rows",
        ("id", "source", "gpu", "reason", "detail"),
        [(s.id, s.source, s.gpu, s.reason.value, s.detail) for s in items],
    )
    return [by_reason, rows]


def training_sections(
    results: Sequence[ModernTrainingResult],
    skipped: Sequence[Skipped],
    summary: ModernTrainingSummary,
) -> list[Section]:
    def tflops(r: ModernTrainingResult) -> str:
        if r.published_tflops is None or r.predicted_tflops is None:
            return "-"
        return f"{r.published_tflops:,.0f} / {r.predicted_tflops:,.0f} ({r.convention})"

    rows = Section(
        "Training estimator vs modern published runs (per-family fit)",
        (
            "id",
            "accelerator",
            "source",
            "precision",
            "metric",
            "published",
            "predicted",
            "error",
            "TFLOP/s pub / pred",
            "layout",
            "not modelled",
        ),
        [
            (
                r.id,
                r.accelerator,
                r.source,
                r.precision,
                r.metric,
                f"{r.published:,.1f}",
                f"{r.predicted:,.1f}",
                _pct(r.error),
                tflops(r),
                r.layout,
                ", ".join(r.unmodelled) or "-",
            )
            for r in results
        ],
    )
    worst = Section(
        "Worst rows",
        ("id", "accelerator", "published", "predicted", "error"),
        [
            (r.id, r.accelerator, f"{r.published:,.1f}", f"{r.predicted:,.1f}", _pct(r.error))
            for r in summary.worst
        ],
    )
    return [
        rows,
        _memory(results),
        _groups("By accelerator", "accelerator", summary.by_accelerator),
        _groups("By source", "source", summary.by_source),
        _groups("By precision", "precision", summary.by_precision),
        worst,
        *_skipped(skipped, summary.skipped_by_reason),
    ]


def _memory(results: Sequence[ModernTrainingResult]) -> Section:
    """The memory model on the layouts compared, tightest first: every run fit its device,
    so a share above 100 % is the model's error (no source publishes its peak memory)."""
    tight = sorted(
        (r for r in results if r.memory.share > NEAR_LIMIT_FRACTION),
        key=lambda r: -r.memory.share,
    )

    def gb(value: float) -> str:
        return f"{value / 1e9:,.1f}"

    return Section(
        f"Memory model on the published layouts: rows above {NEAR_LIMIT_FRACTION:.0%} of "
        "capacity (GB per GPU; every one of these runs fit)",
        ("id", "accelerator", "layout", *_MEMORY_COLUMNS, "share"),
        [
            (
                r.id,
                r.accelerator,
                r.layout.split(" (model:")[0],
                gb(r.memory.weights),
                gb(r.memory.gradients),
                gb(r.memory.optimizer),
                gb(r.memory.activations),
                gb(r.memory.other),
                gb(r.memory.total),
                gb(r.memory.capacity),
                f"{r.memory.share:.0%}",
            )
            for r in tight
        ],
    )


def training_line(s: ModernTrainingSummary) -> str:
    return (
        f"modern training rows: {s.validated} compared, {s.skipped} skipped; median |error| "
        f"{s.median_abs:.1%} (median error {_pct(s.median_signed)}; > 0 = model faster than "
        f"published); within 10%: {s.within_10}, within 25%: {s.within_25}; published layout "
        f"over the memory model's capacity: {s.not_fitting}, above "
        f"{NEAR_LIMIT_FRACTION:.0%}: {s.near_limit} (median model memory "
        f"{s.memory_share_median:.0%} of capacity)"
    )


def inference_sections(
    results: Sequence[ModernInferenceResult],
    skipped: Sequence[Skipped],
    pair_list: Sequence[PairRatio],
    summary: ModernInferenceSummary,
    vs_h100: Sequence[VsH100] = (),
) -> list[Section]:
    rows = Section(
        "Inference estimator vs modern published measurements "
        "(engine profiles fitted per generation, engine_generations.yaml)",
        (
            "id",
            "accelerator",
            "source",
            "engine",
            "precision",
            "metric",
            "published",
            "predicted",
            "error",
            "throughput error",
            "how",
        ),
        [
            (
                r.id,
                r.accelerator,
                r.source,
                r.engine,
                r.precision,
                r.metric,
                f"{r.published:,.2f}",
                f"{r.predicted:,.2f}",
                _pct(r.error),
                _pct(r.throughput_error),
                r.detail,
            )
            for r in results
        ],
    )
    pairs = Section(
        "H200 / H100 throughput ratio at the same settings",
        ("model", "tp", "input", "output", "published ratio", "predicted ratio", "error"),
        [
            (
                p.model,
                str(p.tp),
                str(p.input_tokens),
                str(p.output_tokens),
                f"{p.published:.3f}",
                f"{p.predicted:.3f}",
                _pct(p.error),
            )
            for p in pair_list
        ],
    )
    versus = Section(
        "Per-GPU throughput over H100's, same model and request lengths (offline rows)",
        (
            "accelerator",
            "model",
            "input",
            "output",
            "published ratio",
            "predicted ratio",
            "error",
            "settings",
        ),
        [
            (
                v.accelerator,
                v.model,
                str(v.input_tokens),
                str(v.output_tokens),
                f"{v.published:.3f}",
                f"{v.predicted:.3f}",
                _pct(v.error),
                v.settings,
            )
            for v in vs_h100
        ],
    )
    worst = Section(
        "Worst rows (throughput error)",
        ("id", "accelerator", "metric", "published", "predicted", "throughput error"),
        [
            (
                r.id,
                r.accelerator,
                r.metric,
                f"{r.published:,.2f}",
                f"{r.predicted:,.2f}",
                _pct(r.throughput_error),
            )
            for r in summary.worst
        ],
    )
    return [
        rows,
        pairs,
        versus,
        _groups("By accelerator (throughput error)", "accelerator", summary.by_accelerator),
        _groups("By source (throughput error)", "source", summary.by_source),
        _groups("By metric (error in the row's metric)", "metric", summary.by_metric),
        worst,
        *_skipped(skipped, summary.skipped_by_reason),
    ]


def inference_line(s: ModernInferenceSummary) -> str:
    return (
        f"modern inference rows: {s.validated} compared, {s.skipped} skipped; median |throughput "
        f"error| {s.median_abs:.1%} (median {_pct(s.median_signed)}; > 0 = model faster than "
        f"published); within 15%: {s.within_15}; H200/H100 ratio: published median "
        f"{s.pairs_published_median:.2f}, predicted median {s.pairs_predicted_median:.2f}, "
        f"median |ratio error| {s.pairs_median_abs:.1%}"
    )


def markdown(sections: Sequence[Section], line: str) -> str:
    def line_of(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out: list[str] = []
    for section in sections:
        out += [f"**{section.title}**", ""]
        out.append(line_of(section.headers))
        out.append("|" + "---|" * len(section.headers))
        out += [line_of(cells) for cells in section.rows]
        out.append("")
    out.append(line)
    return "\n".join(out)


def print_tables(sections: Sequence[Section], line: str) -> None:
    console = wide_console()
    for section in sections:
        table = Table(title=section.title)
        for header in section.headers:
            right = header in _NUMERIC or header.endswith(("ratio", "error"))
            table.add_column(header, justify="right" if right else "left")
        for cells in section.rows:
            table.add_row(*cells)
        console.print(table)
    console.print(line)


def to_json(value: Any) -> Any:
    """Dataclasses (with their `error` properties) as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in ("error", "throughput_error"):
            if hasattr(value, name):
                out[name] = getattr(value, name)
        return out
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def training_payload() -> tuple[dict[str, Any], list[Section], str]:
    from gpufleet.validation.training_modern import summarise_modern, validate_modern

    results, skipped = validate_modern()
    summary = summarise_modern(results, skipped)
    payload = {
        "rows": to_json(results),
        "skipped": to_json(skipped),
        "summary": to_json(summary),
    }
    return payload, training_sections(results, skipped, summary), training_line(summary)


def inference_payload() -> tuple[dict[str, Any], list[Section], str]:
    from gpufleet.validation.inference_modern import (
        models_of,
        ratios_vs_h100,
        summarise_modern,
        validate_modern,
    )

    results, skipped, pair_list = validate_modern()
    summary = summarise_modern(results, skipped, pair_list)
    versus = ratios_vs_h100(results, models_of())
    payload = {
        "rows": to_json(results),
        "skipped": to_json(skipped),
        "pairs": to_json(pair_list),
        "vs_h100": to_json(versus),
        "summary": to_json(summary),
    }
    sections = inference_sections(results, skipped, pair_list, summary, versus)
    return payload, sections, inference_line(summary)


def show_rows(
    which: str,
    fmt: str,
    *,
    calibration_json: Callable[[], dict[str, object]],
    print_calibration: Callable[[str], None],
    payload: Callable[[], tuple[dict[str, Any], list[Section], str]],
) -> None:
    """`validate training|inference --rows calibration|modern|all` in `fmt`: the row sets
    the user asked for, one JSON object when both (keyed by set)."""
    show_calibration, show_modern = which in ("calibration", "all"), which in ("modern", "all")
    if fmt == "json":
        calibration = calibration_json() if show_calibration else {}
        modern = payload()[0] if show_modern else {}
        both = {"calibration": calibration, "modern": modern}
        typer.echo(json.dumps(both if which == "all" else calibration or modern, indent=2))
        return
    if show_calibration:
        print_calibration(fmt)
    if show_modern:
        _, sections, line = payload()
        if fmt == "markdown":
            typer.echo(("\n" if show_calibration else "") + markdown(sections, line))
        else:
            print_tables(sections, line)
