"""`gpufleet validate training --rows modern --fit [--write]`: the per-family refit.

Prints what the fit found (each family's fitted parameters), the residuals after it per
accelerator and precision, and leave-one-source-out errors (refit without one source,
predict it), as terminal tables, markdown (docs/validation.md) or JSON. `--write` saves the
fitted values into estimate/data/efficiency.yaml, keeping its comments and ranges.
"""

from __future__ import annotations

import json
from importlib import resources

import typer

from gpufleet.cli.validate_modern import Section, markdown, print_tables, to_json


def fit_sections(fit: object) -> tuple[list[Section], str]:
    from gpufleet.validation.training_fit import ModernFit

    assert isinstance(fit, ModernFit)
    params = Section(
        "Fitted efficiency per family (efficiency.yaml, source fitted-modern)",
        ("parameter", "value"),
        [(name, f"{value:.4g}") for name, value in fit.parameters.items()],
    )
    by_acc = Section(
        "Residuals after the fit, by accelerator",
        ("accelerator", "rows", "median abs error", "median error"),
        [
            (g.key, str(g.rows), f"{g.median_abs:.1%}", f"{g.median_signed:+.1%}")
            for g in fit.after_by_accelerator
        ],
    )
    by_prec = Section(
        "Residuals after the fit, by precision",
        ("precision", "rows", "median abs error", "median error"),
        [
            (g.key, str(g.rows), f"{g.median_abs:.1%}", f"{g.median_signed:+.1%}")
            for g in fit.after_by_precision
        ],
    )
    loso = Section(
        "Leave-one-source-out (refit without the source, predict its rows)",
        ("source", "rows", "median abs error", "median error", "families borrowed"),
        [
            (
                r.source,
                str(r.rows),
                f"{r.median_abs:.1%}",
                f"{r.median_signed:+.1%}",
                ", ".join(r.borrowed) or "-",
            )
            for r in fit.loso
        ],
    )
    line = (
        f"modern fit: {fit.rows} rows; median |error| {fit.before_median_abs:.1%} with the "
        f"shipped parameters, {fit.after_median_abs:.1%} after this fit (median error "
        f"{fit.after_median_signed:+.1%}); leave-one-source-out median |error| "
        f"{fit.loso_median_abs:.1%} over the held-out rows ({fit.loso_median_of_sources:.1%} as "
        f"the median of the {len(fit.loso)} sources' medians, each source one vote)"
    )
    return [params, by_acc, by_prec, loso], line


def show_modern_fit(fmt: str, write: bool) -> None:
    from gpufleet.validation.training import write_fitted
    from gpufleet.validation.training_fit import fit_modern

    fit = fit_modern()
    if write:
        path = resources.files("gpufleet.estimate").joinpath("data", "efficiency.yaml")
        write_fitted(fit.parameters, str(path))
    if fmt == "json":
        payload = to_json(fit)
        payload["loso_median_of_sources"] = fit.loso_median_of_sources
        typer.echo(json.dumps(payload, indent=2))
        return
    sections, line = fit_sections(fit)
    if fmt == "markdown":
        typer.echo(markdown(sections, line))
    else:
        print_tables(sections, line)
