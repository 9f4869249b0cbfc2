"""`gpufleet estimate|search|validate inference`: serving capacity on the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from gpufleet.cli.output import check_format, wide_console
from gpufleet.errors import UserError
from gpufleet.formatting import format_bytes, format_decimal_bytes
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.load import load

if TYPE_CHECKING:
    from gpufleet.estimate.inference_estimate import InferenceEstimate

EXIT_INFEASIBLE = 1
SpecArg = Annotated[Path, typer.Argument(help="An inference spec YAML file (kind: inference).")]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table or json.")]


def estimate_inference(spec_path: SpecArg, format: FormatOpt = "table") -> None:
    """Estimate serving: TTFT, TPOT, throughput, memory, replicas, cost and MIG fit.

    Exit code 1 when the load does not fit or misses its SLO; 2 for bad input.
    """
    from gpufleet.estimate.inference_estimate import estimate_inference as run
    from gpufleet.estimate.inference_load import gb_pair

    fmt = check_format(format)
    spec = load(InferenceSpec, spec_path)
    r = run(spec)
    if fmt == "json":
        typer.echo(r.model_dump_json(indent=2))
    else:
        console = wide_console()
        console.print(
            f"[bold]{r.accelerator}[/bold] · {r.precision} weights · {r.kv_precision} KV · "
            f"{r.engine} · tp {r.tp}"
            + (f" · pp {r.pp}" if r.pp > 1 else "")
            + f" · {_load_label(r, spec.serving.request_rate)}"
        )
        table = Table(show_header=False, box=None)
        table.add_column(style="dim")
        table.add_column(justify="right")
        m = r.memory_per_gpu_bytes
        cost = r.cost_per_million_output_tokens_usd
        for label, value in (
            *_load_rows(r, spec),
            ("output tokens/s (system)", f"{r.output_tokens_per_s:,.0f}"),
            ("output tokens/s per GPU", f"{r.output_tokens_per_s_per_gpu:,.0f}"),
            (
                "output tokens/s capacity per replica",
                f"{r.replica_capacity_output_tokens_per_s:,.0f}",
            ),
            ("replicas × GPUs each = GPUs", f"{r.replicas} × {r.tp * r.pp} = {r.gpus}"),
            ("largest batch that fits", f"{r.max_batch:,}"),
            ("KV cache per token", format_bytes(r.kv_cache_bytes_per_token)),
            (
                "memory per GPU" + (" (full slots)" if r.mode == "request_rate" else ""),
                "{} of {}".format(*gb_pair(m.total, r.memory_capacity_bytes)),
            ),
            (
                "  weights / KV / activations / other",
                f"{format_decimal_bytes(m.weights)} / {format_decimal_bytes(m.kv_cache)} / "
                f"{format_decimal_bytes(m.activations)} / {format_decimal_bytes(m.other)}",
            ),
            ("load fits", "yes" if r.fits else "[red]no[/red]"),
            ("SLO met", "yes" if r.slo_met else "[red]no[/red]"),
            ("$ per million output tokens", "-" if cost is None else f"{cost:,.2f}"),
        ):
            table.add_row(label, value)
        console.print(table)
        fitting = [f for f in r.mig_fit if f.fits]
        if r.mig_fit:
            best = (
                ", ".join(f"{f.profile} ({f.output_tokens_per_s:,.0f} tok/s)" for f in fitting)
                or "none"
            )
            console.print(f"MIG profiles that hold it: {best}")
        for reason in r.reasons:
            console.print(f"[red]{reason}[/red]")
    if not (r.fits and r.slo_met):
        raise typer.Exit(EXIT_INFEASIBLE)


def _ttft_label(spec: InferenceSpec, *, full_slots: bool = False) -> str:
    """TTFT is that of the longest (p99) prompt where prompts vary: the SLO it is held to is
    a p99. For a request rate it is also at full slots with the p99 queue wait, as checked."""
    sv = spec.serving
    longest, mean = sv.max_tokens("input"), sv.mean_tokens("input")
    parts = []
    if sv.batch is None and longest != mean:
        parts.append(f"p99 prompt, {longest:,} tokens")
    if full_slots:
        parts.append("full slots, p99 wait")
    return "time to first token" + (f" ({'; '.join(parts)})" if parts else "")


def _load_rows(r: InferenceEstimate, spec: InferenceSpec) -> list[tuple[str, str]]:
    """The latency rows, each saying at which load it is. A request rate is checked at full
    slots (the batch each replica is sized for: conservative, a burst fills them), while the
    rate itself keeps fewer requests in flight (Little's law) at a faster TPOT: both are
    shown, so neither is read as the other (509 slots were printed as "509 in flight" where
    50 req/s keep about 150)."""
    if r.mode != "request_rate":
        return [
            (_ttft_label(spec), f"{r.ttft_ms:,.1f} ms"),
            ("time per output token", f"{r.tpot_ms:,.1f} ms"),
        ]
    rows = [
        ("slots per replica (largest batch within the SLOs)", f"{r.slots_per_replica:,}"),
        (_ttft_label(spec, full_slots=True), f"{r.ttft_ms:,.1f} ms"),
        ("time per output token at full slots (SLO check)", f"{r.tpot_ms:,.1f} ms"),
    ]
    if (
        r.in_flight_per_replica is not None
        and r.tpot_at_load_ms is not None
        and r.arrival_rate_per_replica_per_s is not None
        and r.request_time_at_load_s is not None
    ):
        rows += [
            (
                f"in flight per replica at the load ({r.arrival_rate_per_replica_per_s:,.3g} "
                f"req/s × {r.request_time_at_load_s:,.3g} s)",
                f"{r.in_flight_per_replica:,.0f}",
            ),
            (
                f"time per output token at the load ({r.in_flight_per_replica:,.0f} in flight)",
                f"{r.tpot_at_load_ms:,.1f} ms",
            ),
        ]
    return rows


def _load_label(r: InferenceEstimate, request_rate_per_s: float | None) -> str:
    """The header's load: for a request rate, the rate itself, then the slots each replica
    is sized for and the requests the rate keeps in flight in them (Little's law), which
    are neither a rate nor each other."""
    if r.mode != "request_rate" or request_rate_per_s is None:
        return f"{r.mode} {r.batch}"
    rate = request_rate_per_s
    shown = f"{rate:,.0f}" if rate == int(rate) else f"{rate:g}"
    slots = f"{r.slots_per_replica:,} slot{'s' * (r.slots_per_replica != 1)} per replica"
    if r.in_flight_per_replica is None:
        return f"request_rate {shown} req/s · {slots}"
    return (
        f"request_rate {shown} req/s · {slots}, "
        f"{r.in_flight_per_replica:,.0f} in flight at this rate"
    )


def search_inference(
    spec_path: SpecArg,
    top: Annotated[int, typer.Option("--top", min=1)] = 10,
    accelerators: Annotated[
        list[str] | None, typer.Option("--accelerator", "-a", help="Repeatable; default: 10 types.")
    ] = None,
    format: FormatOpt = "table",
) -> None:
    """Cheapest accelerator × tp × precision configurations that meet the SLO."""
    from gpufleet.catalog.accelerators import get_accelerator
    from gpufleet.plan.inference_search import DEFAULT_ACCELERATORS
    from gpufleet.plan.inference_search import search_inference as run

    fmt = check_format(format)
    spec = load(InferenceSpec, spec_path)
    names = (
        [get_accelerator(a).name for a in accelerators] if accelerators else DEFAULT_ACCELERATORS
    )
    result = run(spec, names, top_k=top)
    if fmt == "json":
        typer.echo(
            json.dumps(
                {
                    "candidates_evaluated": result.candidates_evaluated,
                    "rejected": dict(result.rejected.most_common()),
                    "why_none": result.why_none() or None,
                    "top": [c.__dict__ for c in result.top],
                    "assumptions": [a.__dict__ for a in result.assumptions.frozen()],
                },
                indent=2,
            )
        )
    else:
        table = Table(title=f"Cheapest of {result.candidates_evaluated} configurations")
        # TTFT and TPOT at full slots are what the SLO is checked against; the rate keeps
        # fewer requests in flight ("in flight") at a faster TPOT ("TPOT at load")
        for col in (
            "accelerator",
            "precision",
            "tp",
            "slots",
            "in flight",
            "TTFT ms",
            "TPOT ms (full)",
            "TPOT ms (load)",
            "tok/s/replica",
            "replicas",
            "GPUs",
            "$/M tokens",
        ):
            table.add_column(
                col, justify="left" if col in {"accelerator", "precision"} else "right"
            )
        for c in result.top:
            cost = c.cost_per_million_output_tokens_usd
            table.add_row(
                c.accelerator,
                c.precision,
                str(c.tp),
                str(c.slots),
                "-" if c.in_flight is None else f"{c.in_flight:,.0f}",
                f"{c.ttft_ms:,.0f}",
                f"{c.tpot_ms:,.1f}",
                "-" if c.tpot_at_load_ms is None else f"{c.tpot_at_load_ms:,.1f}",
                f"{c.output_tokens_per_s_per_replica:,.0f}",
                str(c.replicas),
                str(c.gpus),
                "-" if cost is None else f"{cost:,.2f}",
            )
        console = wide_console()
        console.print(table)
        console.print(
            "Rejected: " + ", ".join(f"{n} {why}" for why, n in result.rejected.most_common()),
            style="dim",
        )
        if not result.top:
            console.print(f"[red]Nothing serves it: {result.why_none()}[/red]")
    if not result.top:
        raise typer.Exit(EXIT_INFEASIBLE)


def validate_inference(
    fit: Annotated[
        bool,
        typer.Option(
            "--fit",
            help="Refit: the TensorRT-LLM A100 profile (calibration rows) or, with --rows "
            "modern, the per-generation profiles.",
        ),
    ] = False,
    write: Annotated[bool, typer.Option("--write", help="With --fit: save it.")] = False,
    format: Annotated[
        str, typer.Option("--format", "-f", help="table, json or markdown.")
    ] = "table",
    rows: Annotated[
        str,
        typer.Option(
            "--rows",
            help="calibration (A100 ground truth), modern (current accelerators, measured "
            "before any refit) or all.",
        ),
    ] = "calibration",
) -> None:
    """Compare the inference estimator with published measurements: the A100 ground truth
    (--rows calibration, the default), current accelerators (--rows modern) or both."""
    from gpufleet.cli.validate_modern import inference_payload, show_rows
    from gpufleet.validation.inference import fit_engine
    from gpufleet.validation.modern import check_rows

    fmt = check_format(format, ("table", "json", "markdown"))
    which = check_rows(rows)
    if write and not fit:
        raise UserError("--write needs --fit")
    if fit and which == "all":
        raise UserError("--fit fits one set: --rows calibration or --rows modern")
    if fit and which == "modern":
        _fit_modern(write)
        return
    if fit:
        fitted, before, after = fit_engine()
        if write:
            from importlib import resources

            from gpufleet.validation.training import write_fitted

            path = resources.files("gpufleet.estimate").joinpath("data", "engines.yaml")
            write_fitted(fitted, str(path))
        typer.echo(
            json.dumps(
                {"fitted": fitted, "before": before.__dict__, "after": after.__dict__}, indent=2
            )
        )
        return
    show_rows(
        which,
        fmt,
        calibration_json=_calibration_json,
        print_calibration=_print_calibration,
        payload=inference_payload,
    )


def _fit_modern(write: bool) -> None:
    """Fit engine_generations.yaml per (engine, generation) and report leave-one-source-out."""
    from gpufleet.validation.inference_fit import (
        fit_all,
        fitted_yaml,
        leave_one_model_out,
        leave_one_source_out,
        prepare,
        write_fitted,
    )

    prepared = prepare()
    fits = fit_all(prepared)
    holdouts = leave_one_source_out(prepared)
    by_model = leave_one_model_out(prepared)
    if write:
        write_fitted(fits)
    typer.echo(fitted_yaml(fits))
    typer.echo(
        json.dumps(
            {
                "groups": [
                    {
                        "engine": f.group[0],
                        "generation": f.group[1],
                        "rows": f.rows,
                        "median_abs_before": f.median_abs_before,
                        "median_abs_after": f.median_abs_after,
                    }
                    for f in fits
                ],
                "leave_one_source_out": [h.__dict__ for h in holdouts],
                "leave_one_model_out": [h.__dict__ for h in by_model],
            },
            indent=2,
        )
    )


def _calibration_json() -> dict[str, object]:
    from gpufleet.validation.inference import summarise
    from gpufleet.validation.inference import validate_inference as run

    rows = run()
    return {
        "rows": [r.__dict__ | {"error": r.error} for r in rows],
        "summary": summarise(rows).__dict__,
    }


def _print_calibration(fmt: str) -> None:
    """The A100 calibration rows, as markdown or a terminal table."""
    from gpufleet.validation.inference import summarise
    from gpufleet.validation.inference import validate_inference as run

    rows = run()
    s = summarise(rows)
    line = (
        f"throughput rows: median |error| {s.throughput_median_abs:.1%} (target ≤ 15%); "
        f"TTFT rows: median {s.ttft_median_abs:.1%} (target ≤ 20%); KV-cache row: "
        f"{s.kv_abs:.1%} (target ≤ 3%)"
    )
    if fmt == "markdown":
        out = ["| id | metric | published | predicted | error | how |", "|---|---|---|---|---|---|"]
        out += [
            f"| {r.id} | {r.metric} | {r.published:,.2f} | {r.predicted:,.2f} | "
            f"{r.error:+.1%} | {r.detail} |"
            for r in rows
        ]
        typer.echo("\n".join([*out, "", line]))
        return
    table = Table(title="Inference estimator vs published measurements")
    for col in ("id", "metric", "published", "predicted", "error", "how"):
        table.add_column(
            col, justify="right" if col in {"published", "predicted", "error"} else "left"
        )
    for r in rows:
        table.add_row(
            r.id,
            r.metric,
            f"{r.published:,.2f}",
            f"{r.predicted:,.2f}",
            f"{r.error:+.1%}",
            r.detail,
        )
    console = wide_console()
    console.print(table)
    console.print(line)
