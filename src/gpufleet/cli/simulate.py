"""`gpufleet simulate CLUSTER WORKLOAD` and `gpufleet simulate compare`: the simulator's CLI.

`simulate` is a command group whose default command is `run`: `gpufleet simulate
CLUSTER WORKLOAD ...` is `gpufleet simulate run CLUSTER WORKLOAD ...` (so a cluster file
literally named `run` or `compare` needs a path such as `./compare`).

Everything the user gave is read and checked before anything runs or is written: a
missing file, a spec of the wrong kind, an unknown trace format or profile is one
message and exit 2, and no output folder appears. Files are written whole or not at all
(each goes to NAME.partial, is synced, then renamed). Heavy imports (numpy, scipy, the
engine) happen inside the commands, so `gpufleet --help` stays fast.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from gpufleet.cli.output import check_format, wide_console
from gpufleet.cli.schedule import PROFILE_HELP
from gpufleet.cli.simulate_files import check_out, compare_context, undone_on_failure
from gpufleet.cli.simulate_options import (
    CheckpointOpt,
    ClusterArg,
    FormatOpt,
    HorizonOpt,
    JobsOutOpt,
    MtbfOpt,
    ReferenceOpt,
    RepairOpt,
    RestartOpt,
    SpeedsOpt,
    TeamsOpt,
    TraceFormatOpt,
    TraceNodesOpt,
    WorkloadArg,
    check_jobs_out,
)
from gpufleet.cli.simulate_tables import jobs_out_line, print_compare, print_experiment, print_run
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.outputs import write_folder

if TYPE_CHECKING:
    from gpufleet.cluster import Cluster
    from gpufleet.sim.engine import SimConfig
    from gpufleet.sim.setup import WorkloadSource
    from gpufleet.sim.workload import Workload
    from gpufleet.specs.teams import TeamsSpec

TRACE = "trace"
RESULT_FILE = "result.json"


class _RunByDefault(TyperGroup):
    """A group whose first argument, when it names no subcommand, starts `run`'s arguments."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_RunByDefault,
    help="Replay a workload on a cluster through the scheduler: `gpufleet simulate CLUSTER "
    "WORKLOAD` (the same as `simulate run`), compare profiles with `simulate compare`, or "
    "run a documented experiment with `simulate experiment NAME`.",
    no_args_is_help=True,
    subcommand_metavar="[run] CLUSTER WORKLOAD ... | compare CLUSTER WORKLOAD --profiles A,B ... "
    "| experiment NAME",
)


@dataclass(frozen=True)
class _Inputs:
    """What a command read and checked, before anything runs."""

    cluster: Cluster
    source: WorkloadSource
    first: Workload  # the first seed's workload (read once; warnings and report from it)
    teams_file: TeamsSpec | None
    teams_path: Path | None
    config: SimConfig  # its horizon_s unset: `horizon` is set per workload (`config_for`)
    # --horizon as given and in seconds after the first arrival (None: run until done)
    horizon: str | None = None
    horizon_s: float | None = None
    # --checkpoint-every as given, in seconds, and how many jobs of the first draw it gave
    # an interval (None: not given)
    checkpoint_every: tuple[str, float, int] | None = None

    def config_for(self, workload: Workload) -> SimConfig:
        """The config to run `workload` with: --horizon counts from its first arrival, the
        clock of --window and of every time reported, so the engine's horizon (on the
        workload's own clock, where a native trace may start late) is set from it."""
        from dataclasses import replace

        from gpufleet.sim.compare import horizon_end_s

        if self.horizon_s is None:
            return self.config
        return replace(self.config, horizon_s=horizon_end_s(workload, self.horizon_s))

    def teams_for(self, workload: Workload) -> TeamsSpec:
        from gpufleet.sim.setup import open_teams

        if self.teams_file is not None:
            return self.teams_file
        return open_teams(self.cluster, workload)

    def warnings(self, workload: Workload) -> tuple[str, ...]:
        from gpufleet.sim.setup import placement_warnings

        speeds = self.config.speeds
        extra = speeds.warnings() if speeds is not None else []
        recut = self.config.relayout_s is not None
        warned = placement_warnings(self.cluster, workload, self.teams_file, recut=recut)
        late = self.horizon_warning(workload)
        return (*warned, *extra, *([late] if late else []))

    def horizon_warning(self, workload: Workload) -> str | None:
        """What to tell a user whose --horizon ends the run before most jobs arrive (they
        never run, and the metrics describe a sliver of the workload); None otherwise."""
        if self.horizon_s is None or not workload.jobs:
            return None
        first = workload.jobs[0].submit_s
        end = first + self.horizon_s
        after = sum(1 for j in workload.jobs if j.submit_s > end)
        if 2 * after <= len(workload.jobs):
            return None
        from gpufleet.formatting import fmt_duration

        return (
            f"--horizon {self.horizon} ends the run {fmt_duration(self.horizon_s)} after the "
            f"first arrival (at {first:,.0f} s on the workload's clock): {after:,} of "
            f"{len(workload.jobs):,} jobs arrive after it and never run, and count as "
            "unfinished"
        )

    def notes(self, workload: Workload) -> list[str]:
        """What the output should say about how the jobs are held: a fraction is placed in
        eighths of a GPU, rounded up, and the rounding is held, not work."""
        from gpufleet.sched.requests import FRACTION_STEPS

        rounded = [
            j.gpu_fraction
            for j in workload.jobs
            if j.gpu_fraction is not None
            and abs(j.gpu_fraction * FRACTION_STEPS - round(j.gpu_fraction * FRACTION_STEPS)) > 1e-9
        ]
        assumed = []
        if self.checkpoint_every is not None:
            text, _, count = self.checkpoint_every
            assumed.append(
                f"--checkpoint-every {text}: {count:,} training and batch jobs without a "
                f"checkpoint interval of their own save their work every {text}"
            )
        if not rounded:
            return assumed
        return [
            *assumed,
            f"{len(rounded):,} jobs ask for a GPU fraction that is not a whole number of "
            f"eighths (e.g. {rounded[0]:g}): each holds its fraction rounded up to the next "
            "eighth of a GPU; the rounding counts as held (allocation, idle_held_gpu_hours), "
            "not as work (gpu_hours_completed, goodput)",
        ]


def _read_inputs(
    cluster_arg: str,
    workload_arg: str,
    *,
    trace_format: str | None,
    trace_nodes: Path | None,
    teams_path: Path | None,
    horizon: str | None,
    gpu_mtbf_h: float | None,
    repair_h: float,
    first_seed: int,
    restart_overhead: str = "5min",
    window: str | None = None,
    speeds: str | None = None,
    reference: str | None = None,
    checkpoint_every: str | None = None,
) -> _Inputs:
    """Everything the user gave, read and checked. `--horizon` is kept apart from the
    config (`_Inputs.config_for`): it counts from each workload's first arrival."""
    from gpufleet.cluster import Cluster
    from gpufleet.quantities import parse_duration
    from gpufleet.sim.engine import FailureModel, SimConfig
    from gpufleet.sim.setup import (
        assume_checkpoints,
        check_priority_classes,
        cluster_from_nodes,
        workload_source,
    )
    from gpufleet.sim.speed import table_from_options
    from gpufleet.specs.cluster import ClusterSpec
    from gpufleet.specs.load import load
    from gpufleet.specs.teams import TeamsSpec

    horizon_s = None if horizon is None else _positive_duration("--horizon", horizon)
    try:
        restart_s = parse_duration(restart_overhead)
    except ValueError as exc:
        raise UserError(f"--restart-overhead: {exc}") from None
    if restart_s < 0:
        raise UserError(f"--restart-overhead: must not be negative, got {restart_overhead!r}")
    window_s = _window(window)
    spec = None if cluster_arg == TRACE else load(ClusterSpec, Path(cluster_arg))
    teams = load(TeamsSpec, teams_path) if teams_path is not None else None
    source = workload_source(workload_arg, trace_format, nodes=trace_nodes)
    first = source.draw(first_seed)
    assumed = None
    if checkpoint_every is not None:
        every_s = _positive_duration("--checkpoint-every", checkpoint_every)
        source = assume_checkpoints(source, every_s)
        before = first
        first = source.draw(first_seed)
        count = sum(a is not b for a, b in zip(before.jobs, first.jobs, strict=True))
        assumed = (checkpoint_every, every_s, count)
    if not first.jobs:
        raise UserError(
            f"WORKLOAD {workload_arg}: no jobs to simulate (read {first.report.rows:,} "
            f"rows, kept 0); give a workload with at least one job"
        )
    if spec is None:
        if not first.nodes:
            raise UserError(
                f"CLUSTER 'trace': {source.name} lists no nodes of its own (openb traces do); "
                "give a cluster spec"
            )
        cluster = cluster_from_nodes(first.nodes)
    else:
        cluster = Cluster.from_spec(spec)
    if teams is not None:
        check_priority_classes(teams, first, str(teams_path))
    config = SimConfig(
        failures=FailureModel(gpu_mtbf_h=gpu_mtbf_h or None, repair_mean_h=repair_h),
        restart_overhead_s=restart_s,
        metrics_window_s=window_s,
        speeds=table_from_options(
            {n.accelerator for n in cluster.nodes}, first.reference_accelerator, speeds, reference
        ),
    )
    return _Inputs(cluster, source, first, teams, teams_path, config, horizon, horizon_s, assumed)


def _positive_duration(option: str, text: str) -> float:
    from gpufleet.quantities import parse_duration

    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise UserError(f"{option}: {exc}") from None
    if value <= 0:
        raise UserError(f"{option}: must be positive, got {text!r}")
    return value


def _window(text: str | None) -> tuple[float, float] | None:
    """`--window FROM-TO`: two durations from the first arrival, e.g. 2h-10h or 0-1d."""
    if text is None:
        return None
    from gpufleet.quantities import parse_duration

    start, sep, end = text.partition("-")
    try:
        if not sep:
            raise ValueError("give FROM-TO, e.g. 2h-10h (both from the first arrival)")
        from_s, to_s = parse_duration(start.strip()), parse_duration(end.strip())
    except ValueError as exc:
        raise UserError(f"--window {text!r}: {exc}") from None
    if not 0 <= from_s < to_s:
        raise UserError(f"--window {text!r}: FROM must be at least 0 and before TO")
    return from_s, to_s


def _check_profiles(names: Sequence[str]) -> None:
    from gpufleet.specs.profiles import PROFILES

    for name in names:
        if name not in PROFILES:
            raise UnknownNameError("scheduling profile", name, PROFILES)


def _dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _print_preamble(console: Console, inputs: _Inputs, warnings: Sequence[str]) -> None:
    for line in inputs.first.report.lines():
        console.print(line, highlight=False, markup=False)
    speeds = inputs.config.speeds
    for line in speeds.lines() if speeds is not None else ():
        console.print(line, highlight=False, markup=False)
    for line in inputs.notes(inputs.first):
        console.print(line, style="dim", highlight=False, markup=False)
    if inputs.horizon_s is not None and inputs.first.jobs:
        at = (
            " of each seed's workload"
            if inputs.source.varies_with_seed
            else f" (at {inputs.first.jobs[0].submit_s:,.0f} s on the workload's clock)"
        )
        console.print(
            f"--horizon {inputs.horizon}: the run stops that long after the first arrival"
            f"{at}, the clock of --window and of every time reported",
            style="dim",
            highlight=False,
            markup=False,
        )
    for line in warnings:
        console.print(f"[yellow]warning:[/yellow] {line}", highlight=False)
    if inputs.teams_file is None:
        console.print("no --teams file: every team may use the whole cluster", style="dim")


@contextlib.contextmanager
def _progress(console: Console, total: int | None, label: str) -> Iterator[Callable[[str], None]]:
    """A transient Rich progress bar (a spinner when the total is unknown); yields `tick`."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    if not console.is_terminal:
        # a log file or a CI job: plain lines, one when it starts and one per finished step
        console.print(f"{label} ...")
        done = [0]

        def line(description: str) -> None:
            done[0] += 1
            of = f" ({done[0]}/{total})" if total is not None else ""
            console.print(f"  done: {description}{of}")

        yield line
        return
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)

        def tick(description: str) -> None:
            bar.update(task, advance=1, description=description)

        yield tick


# -- gpufleet simulate run -----------------------------------------------------------------


@app.command("run")
def run(
    cluster: ClusterArg,
    workload: WorkloadArg,
    *,
    trace_format: TraceFormatOpt = None,
    trace_nodes: TraceNodesOpt = None,
    teams: TeamsOpt = None,
    profile: Annotated[str, typer.Option("--profile", help=PROFILE_HELP)] = "default",
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="Seed of the generator and of failures.")
    ] = 0,
    horizon: HorizonOpt = None,
    gpu_mtbf_h: MtbfOpt = None,
    repair_h: RepairOpt = 4.0,
    restart_overhead: RestartOpt = "5min",
    checkpoint_every: CheckpointOpt = None,
    speeds: SpeedsOpt = None,
    reference: ReferenceOpt = None,
    window: Annotated[
        str | None,
        typer.Option(
            "--window",
            help="Also report GPU allocation over FROM-TO (durations from the first arrival, "
            "e.g. 2h-10h): a busy week without the ramp-up and drain.",
        ),
    ] = None,
    format: FormatOpt = "table",
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help=f"Folder for {RESULT_FILE} (metrics with series)."),
    ] = None,
    jobs_out: JobsOutOpt = None,
) -> None:
    """Simulate WORKLOAD on CLUSTER with one profile and seed; print the metrics.

    The same inputs and seed give byte-identical JSON. Exit 2 for bad input (nothing is
    run or written).
    """
    from dataclasses import replace

    from gpufleet.sim.engine import simulate

    fmt = check_format(format)
    _check_profiles([profile])
    check_out(out)
    check_jobs_out(jobs_out)
    inputs = _read_inputs(
        cluster,
        workload,
        trace_format=trace_format,
        trace_nodes=trace_nodes,
        teams_path=teams,
        horizon=horizon,
        gpu_mtbf_h=gpu_mtbf_h,
        repair_h=repair_h,
        restart_overhead=restart_overhead,
        checkpoint_every=checkpoint_every,
        speeds=speeds,
        reference=reference,
        first_seed=seed,
        window=window,
    )
    console = wide_console() if fmt == "table" else Console(stderr=True)
    warnings = inputs.warnings(inputs.first)
    _print_preamble(console, inputs, warnings)
    config = replace(inputs.config_for(inputs.first), profile=profile, seed=seed)
    with _progress(Console(stderr=True), None, f"simulating {len(inputs.first.jobs):,} jobs"):
        result = simulate(inputs.cluster, inputs.teams_for(inputs.first), inputs.first, config)
    late = result.metrics.window_warning()
    if late is not None:
        warnings = (*warnings, late)
        console.print(f"[yellow]warning:[/yellow] {late}", highlight=False)
    head = {"profile": profile, "seed": seed}
    if jobs_out is not None:  # first: the other output is undone if it fails
        from gpufleet.sim.jobs_out import write_jobs

        write_jobs(jobs_out, result.metrics.jobs)
    if out is not None:
        data = {
            **head,
            "cluster": inputs.cluster.name,
            "workload": inputs.source.name,
            "cycles": result.cycles,
            "events": result.events,
            "warnings": list(warnings),
            "metrics": result.metrics.to_json(series=True),
        }
        with undone_on_failure(jobs_out):
            write_folder(out, {RESULT_FILE: _dumps(data).encode("utf-8")})
    if fmt == "json":
        payload = {**head, "metrics": result.metrics.to_json(), "warnings": list(warnings)}
        typer.echo(_dumps(payload), nl=False)
    else:
        print_run(
            console,
            inputs.cluster.name,
            inputs.source.name,
            profile,
            seed,
            result.metrics.to_json(),
        )
    if out is not None:
        console.print(f"wrote {out / RESULT_FILE}", style="dim")
    if jobs_out is not None:
        m = result.metrics
        console.print(jobs_out_line(jobs_out, len(m.jobs), m.jobs_unfinished), style="dim")


# -- gpufleet simulate compare -------------------------------------------------------------


def _profile_list(text: str) -> list[str]:
    names = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not names:
        raise UserError("--profiles: give one or more profile names, e.g. default,fifo")
    return names


@app.command("compare")
def compare(
    cluster: ClusterArg,
    workload: WorkloadArg,
    *,
    profiles: Annotated[
        str,
        typer.Option(
            "--profiles",
            help="Comma-separated scheduling profiles, e.g. default,fifo,binpack.",
            show_default=False,
        ),
    ],
    seeds: Annotated[
        int, typer.Option("--seeds", min=1, help="Seeds 0..N-1 for every profile.")
    ] = 3,
    trace_format: TraceFormatOpt = None,
    trace_nodes: TraceNodesOpt = None,
    teams: TeamsOpt = None,
    horizon: HorizonOpt = None,
    gpu_mtbf_h: MtbfOpt = None,
    repair_h: RepairOpt = 4.0,
    restart_overhead: RestartOpt = "5min",
    checkpoint_every: CheckpointOpt = None,
    speeds: SpeedsOpt = None,
    reference: ReferenceOpt = None,
    format: FormatOpt = "table",
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Folder for compare.json, compare.html, compare.md."),
    ] = Path("gpufleet-compare"),
    jobs_out: JobsOutOpt = None,
) -> None:
    """Run every profile on seeds 0..N-1; write means with 95 % confidence intervals and plots.

    A generator spec draws a new workload per seed; a trace replays the same jobs, and the
    seed drives failures (--gpu-mtbf-h). Every profile sees the same workloads and seeds.
    """
    from gpufleet.report.comparison import compare_files
    from gpufleet.sim.compare import run_matrix, summarize
    from gpufleet.sim.setup import check_priority_classes

    fmt = check_format(format)
    names = _profile_list(profiles)
    _check_profiles(names)
    check_out(out)
    check_jobs_out(jobs_out)
    inputs = _read_inputs(
        cluster,
        workload,
        trace_format=trace_format,
        trace_nodes=trace_nodes,
        teams_path=teams,
        horizon=horizon,
        gpu_mtbf_h=gpu_mtbf_h,
        repair_h=repair_h,
        restart_overhead=restart_overhead,
        checkpoint_every=checkpoint_every,
        speeds=speeds,
        reference=reference,
        first_seed=0,
    )
    # A trace with nothing random simulated gives the same run for every seed: run it once
    # and say so, rather than print "± 0" over identical copies (issue 29)
    deterministic = not inputs.source.varies_with_seed and inputs.config.failures.gpu_mtbf_h is None
    asked, seeds = seeds, 1 if deterministic else seeds
    # Every seed's workload is drawn before anything runs (a generator is fast), so a
    # priority class or an unplaceable job that only one seed has is reported up front.
    seed_list = list(range(seeds))
    drawn = [inputs.first, *(inputs.source.draw(s) for s in seed_list[1:])]
    if inputs.teams_file is not None:
        for w in drawn[1:]:
            check_priority_classes(inputs.teams_file, w, str(inputs.teams_path))
    warnings = list(dict.fromkeys(line for w in drawn for line in inputs.warnings(w)))
    console = wide_console() if fmt == "table" else Console(stderr=True)
    _print_preamble(console, inputs, warnings)
    if inputs.source.varies_with_seed and seeds > 1:
        console.print(f"each of {seeds} seeds draws a new workload", style="dim")
    if deterministic:
        console.print(
            "the trace replays the same jobs and nothing random is simulated (no "
            "--gpu-mtbf-h): one run per profile, exact, so no interval",
            style="dim",
        )
    with _progress(Console(stderr=True), len(names) * seeds, "simulating") as tick:
        runs = run_matrix(
            inputs.cluster,
            inputs.teams_for,
            drawn.__getitem__,
            profiles=names,
            seeds=seed_list,
            config=inputs.config,
            on_run=lambda p, s: tick(f"{p}, seed {s}"),
            horizon_after_first_s=inputs.horizon_s,
        )
    summary = summarize(runs, context=compare_context(inputs, drawn, warnings, asked))
    files = compare_files(summary)
    jobs_written = None
    if jobs_out is not None:  # first: the other output is undone if it fails
        from gpufleet.sim.jobs_out import write_runs_jobs

        jobs_written = write_runs_jobs(
            jobs_out, [(r.profile, r.seed, r.metrics.jobs) for r in runs]
        )
    with undone_on_failure(jobs_out):
        write_folder(out, files)
    if fmt == "json":
        typer.echo(files["compare.json"].decode("utf-8"), nl=False)
        return
    print_compare(console, summary)
    console.print(f"wrote {', '.join(files)} to {out}/", style="dim")
    if jobs_out is not None and jobs_written is not None:
        unfinished = sum(r.metrics.jobs_unfinished for r in runs)
        console.print(jobs_out_line(jobs_out, jobs_written, unfinished, len(runs)), style="dim")


# -- gpufleet simulate experiment ----------------------------------------------------------


@app.command("experiment")
def experiment(
    name: Annotated[
        str, typer.Argument(help="fragmentation | utilization-claims", show_default=False)
    ],
    *,
    profiles: Annotated[
        str | None,
        typer.Option(
            "--profiles",
            help="Comma-separated policies (default: the experiment's own list).",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="fragmentation: pod draw seed.")] = 0,
    points: Annotated[
        int, typer.Option("--points", min=2, help="fragmentation: curve points.")
    ] = 20,
    seeds: Annotated[
        int, typer.Option("--seeds", min=1, help="utilization-claims: seeds 0..N-1.")
    ] = 3,
    days: Annotated[
        float, typer.Option("--days", min=0.1, help="utilization-claims: simulated days.")
    ] = 14.0,
    format: FormatOpt = "table",
) -> None:
    """Run one of the documented experiments (docs/experiments/): JSON `results` by profile."""
    from gpufleet.errors import UnknownNameError
    from gpufleet.sim import experiments as ex

    fmt = check_format(format)
    if name not in ex.EXPERIMENTS:
        raise UnknownNameError("experiment", name, ex.EXPERIMENTS)
    names = _profile_list(profiles) if profiles else None
    console = wide_console() if fmt == "table" else Console(stderr=True)
    if name == "fragmentation":
        chosen = names or list(ex.FRAGMENTATION_POLICIES)
        with _progress(Console(stderr=True), len(chosen), "filling openb") as tick:
            result = ex.fragmentation(
                chosen, seed=seed, points=points, on_policy=lambda p, s: tick(f"{p} ({s:.1f} s)")
            )
    else:
        if names:
            _check_profiles(names)
        chosen = names or list(ex.UTILIZATION_PROFILES)
        with _progress(Console(stderr=True), len(chosen) * seeds, "simulating") as tick:
            result = ex.utilization_claims(
                chosen,
                seeds=seeds,
                days=days,
                on_run=lambda p, s, t: tick(f"{p}, seed {s} ({t:.1f} s)"),
            )
    if fmt == "json":
        typer.echo(_dumps({k: v for k, v in result.items() if k != "timings_s"}))
        return
    print_experiment(console, name, result)
