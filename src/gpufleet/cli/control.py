"""`gpufleet serve`, `gpufleet db ...` and `gpufleet admin ...`: the control plane's commands."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from gpufleet.cli.output import check_format, wide_console
from gpufleet.cli.slurm import app as slurm_app
from gpufleet.errors import UserError

if TYPE_CHECKING:
    from gpufleet.control.server import ServeOptions
    from gpufleet.control.telemetry_sources import TelemetryOptions

DB_HELP = "Store URL (default: $GPUFLEET_DB, else sqlite:///gpufleet.db in this directory)."
DbOpt = Annotated[str | None, typer.Option("--db", help=DB_HELP)]

db_app = typer.Typer(
    help="The control plane's store: schema migrations and checks.", no_args_is_help=True
)
admin_app = typer.Typer(
    help="Administer the control plane: admins, teams, quotas, tokens.", no_args_is_help=True
)
team_app = typer.Typer(help="Teams and their quotas.", no_args_is_help=True)
token_app = typer.Typer(help="API tokens (shown once, stored hashed).", no_args_is_help=True)
admin_app.add_typer(team_app, name="team")
admin_app.add_typer(token_app, name="token")
admin_app.add_typer(slurm_app, name="slurm")


def _sessions(db: str | None, *, migrate: bool = False):  # type: ignore[no-untyped-def]
    from gpufleet.control.db import make_engine, require_current, sessions, upgrade

    engine = make_engine(db)
    if migrate:
        upgrade(engine)
    else:
        require_current(engine)
    return sessions(engine)


@db_app.command("upgrade")
def db_upgrade(db: DbOpt = None) -> None:
    """Create or migrate the schema to this version's (safe to run again)."""
    from gpufleet.control.db import current_revision, make_engine, upgrade

    engine = make_engine(db)
    upgrade(engine)
    typer.echo(f"schema at {current_revision(engine)}: {engine.url.render_as_string(True)}")


@db_app.command("check")
def db_check(db: DbOpt = None) -> None:
    """Check the store's invariants: no GPU held twice, the ledger balances allocations."""
    from gpufleet.control.ledger import balance_problems, double_allocations

    with _sessions(db)() as s:
        problems = [f"device held twice: {d}" for d in double_allocations(s)]
        problems += balance_problems(s)
    if problems:
        for p in problems:
            typer.echo(p, err=True)
        raise typer.Exit(1)
    typer.echo("ok: no device held twice; the ledger balances the allocations")


@admin_app.command("init")
def admin_init(
    db: DbOpt = None,
    user: Annotated[str, typer.Option(help="Name of the first admin.")] = "admin",
) -> None:
    """Create the schema (if needed), the default priority classes and the first admin;
    prints its token once."""
    from gpufleet.control import admin

    sessions = _sessions(db, migrate=True)
    with sessions.begin() as s:
        issued = admin.init(s, time.time(), user=user)
    typer.echo(f"admin token for {issued.user} (shown once; store it now):")
    typer.echo(issued.token)


def _check_budget(budget_gpu_h: float | None) -> None:
    """Refuse a budget that is not a number of GPU-hours before it is stored: the API
    refuses them, but `--budget-gpu-h inf` (or 1e400, or nan) was stored, and every later
    `GET /teams`, the portal's overview and team pages then failed with 422 for everyone
    (`budget_status` cannot compare GPU-hours with it). The rule is the store's
    (`admin.check_budget`); this names the option."""
    from gpufleet.control import admin

    if budget_gpu_h is not None:
        try:
            admin.check_budget(budget_gpu_h)
        except admin.AdminError as exc:
            raise UserError(f"--budget-gpu-h: {exc}") from None


@team_app.command("create")
def team_create(
    name: Annotated[str, typer.Argument(help="Team name (a DNS label).")],
    *,
    db: DbOpt = None,
    cohort: Annotated[str | None, typer.Option(help="Teams in a cohort lend quota.")] = None,
    weight: Annotated[float, typer.Option(help="Fair-share weight.")] = 1.0,
    default_priority: Annotated[str, typer.Option(help="Default priority class.")] = "standard",
    project: Annotated[list[str] | None, typer.Option(help="A project (repeatable).")] = None,
    budget_gpu_h: Annotated[
        float | None, typer.Option(help="Monthly GPU-hour budget (alerts at 80%, 100%).")
    ] = None,
    budget_gate: Annotated[bool, typer.Option(help="Refuse submissions over budget.")] = False,
    max_priority_class: Annotated[
        str | None,
        typer.Option(help="Highest class its leads and members may use (default: the default)."),
    ] = None,
    idle_policy: Annotated[
        str, typer.Option(help="Jobs flagged idle: off, notify or reclaim (also stop them).")
    ] = "notify",
) -> None:
    """Create a team."""
    from gpufleet.control import admin

    _check_budget(budget_gpu_h)
    with _sessions(db).begin() as s:
        admin.create_team(
            s,
            admin.cli_principal(),
            name,
            time.time(),
            cohort=cohort,
            weight=weight,
            default_priority=default_priority,
            projects=project or [],
            monthly_budget_gpu_h=budget_gpu_h,
            budget_gate=budget_gate,
            max_priority_class=max_priority_class,
            idle_policy=idle_policy,
        )
    typer.echo(f"team {name} created")


@team_app.command("update")
def team_update(
    name: Annotated[str, typer.Argument(help="Team name.")],
    *,
    db: DbOpt = None,
    cohort: Annotated[str | None, typer.Option(help="Cohort ('' to leave it).")] = None,
    weight: Annotated[float | None, typer.Option(help="Fair-share weight.")] = None,
    default_priority: Annotated[str | None, typer.Option(help="Default priority class.")] = None,
    budget_gpu_h: Annotated[float | None, typer.Option(help="Monthly GPU-hour budget.")] = None,
    no_budget: Annotated[bool, typer.Option("--no-budget", help="Remove the budget.")] = False,
    budget_gate: Annotated[
        bool | None, typer.Option("--budget-gate/--no-budget-gate", help="Refuse over budget.")
    ] = None,
    max_priority_class: Annotated[
        str | None,
        typer.Option(help="Highest class its leads and members may use ('' for its default)."),
    ] = None,
    idle_policy: Annotated[
        str | None, typer.Option(help="Jobs flagged idle: off, notify or reclaim.")
    ] = None,
) -> None:
    """Change a team's settings (only the options given)."""
    from gpufleet.control import admin

    _check_budget(budget_gpu_h)
    with _sessions(db).begin() as s:
        admin.update_team(
            s,
            admin.cli_principal(),
            name,
            time.time(),
            cohort=cohort,
            weight=weight,
            default_priority=default_priority,
            monthly_budget_gpu_h=budget_gpu_h,
            budget_gate=budget_gate,
            clear_budget=no_budget,
            max_priority_class=max_priority_class,
            idle_policy=idle_policy,
        )
    typer.echo(f"team {name} updated")


@team_app.command("import")
def team_import(
    teams_path: Annotated[Path, typer.Argument(help="Teams file (kind: teams).")],
    db: DbOpt = None,
) -> None:
    """Create the teams, quotas and priority classes of a teams file (existing teams kept)."""
    from gpufleet.control import admin
    from gpufleet.specs.load import load
    from gpufleet.specs.teams import TeamsSpec

    spec = load(TeamsSpec, teams_path)
    with _sessions(db).begin() as s:
        created = admin.import_teams(s, admin.cli_principal(), spec, time.time())
    typer.echo(f"created {len(created)} team(s): {', '.join(created) or 'none (all existed)'}")


@team_app.command("list")
def team_list(
    db: DbOpt = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Teams with their quotas."""
    from sqlalchemy import select

    from gpufleet.control.models import Team

    fmt = check_format(format)
    with _sessions(db)() as s:
        rows = [
            {
                "name": t.name,
                "cohort": t.cohort,
                "weight": t.weight,
                "default_priority": t.default_priority,
                "projects": [p.name for p in t.projects],
                "quotas": {
                    q.flavor: {
                        "guaranteed_gpus": q.guaranteed_gpus,
                        "limit_gpus": q.limit_gpus,
                        "borrowing_limit_gpus": q.borrowing_limit_gpus,
                        "lending_limit_gpus": q.lending_limit_gpus,
                    }
                    for q in t.quotas
                },
            }
            for t in s.scalars(select(Team).order_by(Team.name))
        ]
    if fmt == "json":
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="Teams")
    for col in ("team", "cohort", "weight", "priority", "quotas (guaranteed GPUs)"):
        table.add_column(col)
    for r in rows:
        quotas = ", ".join(f"{f}: {q['guaranteed_gpus']}" for f, q in r["quotas"].items())
        table.add_row(
            r["name"],
            r["cohort"] or "",
            f"{r['weight']:g}",
            r["default_priority"],
            quotas or "none",
        )
    wide_console().print(table)


@team_app.command("set-quota")
def team_set_quota(
    team: Annotated[str, typer.Argument(help="Team name.")],
    flavor: Annotated[str, typer.Argument(help="Accelerator, e.g. h100-sxm5-80gb.")],
    *,
    guaranteed: Annotated[int, typer.Option("--guaranteed", help="Guaranteed GPUs.")],
    db: DbOpt = None,
    limit: Annotated[int | None, typer.Option(help="Most GPUs, borrowing included.")] = None,
    borrowing_limit: Annotated[int | None, typer.Option(help="Most borrowed GPUs.")] = None,
    lending_limit: Annotated[int | None, typer.Option(help="Most lent GPUs.")] = None,
) -> None:
    """Set one team's quota for one flavor."""
    from gpufleet.control import admin

    if guaranteed < 0:
        raise UserError("--guaranteed cannot be negative")
    with _sessions(db).begin() as s:
        q = admin.set_quota(
            s,
            admin.cli_principal(),
            team,
            flavor,
            time.time(),
            guaranteed_gpus=guaranteed,
            limit_gpus=limit,
            borrowing_limit_gpus=borrowing_limit,
            lending_limit_gpus=lending_limit,
        )
        flavor = q.flavor
    typer.echo(f"team {team}: {guaranteed} guaranteed {flavor} GPUs")


@token_app.command("create")
def token_create(
    role: Annotated[str, typer.Option(help="admin, lead, member or viewer.")],
    user: Annotated[str, typer.Option(help="Who the token is for.")],
    db: DbOpt = None,
    team: Annotated[str | None, typer.Option(help="Team (all roles but admin).")] = None,
    expires: Annotated[str | None, typer.Option(help="Lifetime, e.g. 90d, 12h.")] = None,
) -> None:
    """Create a token; it is printed once and stored only as a hash."""
    from gpufleet.control import admin
    from gpufleet.quantities import parse_duration

    now = time.time()
    try:
        expires_s = now + parse_duration(expires) if expires else None
    except ValueError as exc:
        raise UserError(f"--expires: {exc}") from None
    with _sessions(db).begin() as s:
        issued = admin.create_token(
            s, admin.cli_principal(), now, role=role, team=team, user=user, expires_s=expires_s
        )
    typer.echo(f"token {issued.token_id} for {user} ({role}; shown once, store it now):")
    typer.echo(issued.token)


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[int, typer.Argument(help="Token id (see `token list`).")],
    db: DbOpt = None,
) -> None:
    """Revoke a token at once."""
    from gpufleet.control import admin

    with _sessions(db).begin() as s:
        admin.revoke_token(s, admin.cli_principal(), token_id, time.time())
    typer.echo(f"token {token_id} revoked")


@token_app.command("list")
def token_list(db: DbOpt = None) -> None:
    """Tokens (never the secret: id, prefix, user, role, team, dates)."""
    from sqlalchemy import select

    from gpufleet.control.models import Token

    table = Table(title="Tokens")
    for col in ("id", "prefix", "user", "role", "team", "expires", "last used", "revoked"):
        table.add_column(col)
    with _sessions(db)() as s:
        for t in s.scalars(select(Token).order_by(Token.id)):
            table.add_row(
                str(t.id),
                t.prefix,
                t.user.name,
                t.role,
                t.team.name if t.team else "",
                _when(t.expires_s),
                _when(t.last_used_s),
                _when(t.revoked_s),
            )
    wide_console().print(table)


def _telemetry_options(
    source: str,
    urls: list[str] | None,
    /,
    interval_s: float,
    threshold_pct: float,
    idle_after_s: float,
    *,
    webhook: str | None = None,
) -> TelemetryOptions:
    from gpufleet.control.telemetry_sources import TelemetryOptions
    from gpufleet.control.telemetry_store import TelemetryConfig

    try:
        config = TelemetryConfig(
            interval_s=interval_s,
            idle_threshold_pct=threshold_pct,
            idle_after_s=idle_after_s,
            max_gap_s=max(60.0, 4 * interval_s),
        )
    except ValueError as exc:  # the message names the config's field; say the option's
        text = str(exc)
        for field_name, option in (
            ("interval_s", "--telemetry-interval"),
            ("idle_threshold_pct", "--idle-threshold"),
            ("idle_after_s", "--idle-after"),
        ):
            text = text.replace(field_name, option)
        raise UserError(text) from None
    return TelemetryOptions(
        source=source, dcgm_urls=tuple(urls or ()), config=config, idle_webhook=webhook
    )


def _supervise(
    url: str, cluster_path: Path, options: ServeOptions, *, host: str, port: int, workers: int
) -> None:
    """`serve` after its checks: listen, start the children, wait for SIGTERM or Ctrl-C."""
    import signal
    import threading

    from gpufleet.control.service import (
        ChildConfig,
        Supervisor,
        default_workers,
        listen,
        server_targets,
    )
    from gpufleet.control.shared import SharedState

    count = workers or default_workers()
    listeners = listen(host, port, count)
    shared = SharedState.create()
    children = Supervisor(
        ChildConfig(url, cluster_path, options, os.getpid(), shared_fd=shared.fd),
        targets=server_targets(count),
        shared=shared,
        listen_fds=tuple(sock.fileno() for sock in listeners),
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    children.start()
    plural = "" if count == 1 else "s"
    log = logging.getLogger("gpufleet.serve")
    log.info("serving on http://%s:%d with %d API worker%s", host, port, count, plural)
    try:
        stop.wait()
    finally:
        children.stop()
        for sock in listeners:
            sock.close()


def _when(t: float | None) -> str:
    return "" if t is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(t))


def serve(
    *,
    cluster_path: Annotated[Path, typer.Option("--cluster", help="Cluster spec (kind: cluster).")],
    db: DbOpt = None,
    executor: Annotated[str, typer.Option(help="local, emulated or slurm.")] = "local",
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    profile: Annotated[str, typer.Option(help="Scheduling profile.")] = "default",
    cycle: Annotated[float, typer.Option(help="Seconds between reconciler cycles.")] = 2.0,
    grace: Annotated[
        float, typer.Option(help="Seconds a preempted or cancelled job gets before the kill.")
    ] = 120.0,
    speed: Annotated[float, typer.Option(help="Emulated executor: time acceleration.")] = 1.0,
    runs: Annotated[
        Path,
        typer.Option(help="Run directories (slurm: on a file system the nodes share)."),
    ] = Path("gpufleet-runs"),
    teams_path: Annotated[
        Path | None, typer.Option("--teams", help="Import this teams file at start.")
    ] = None,
    slurm_partition: Annotated[
        str | None, typer.Option(help="Slurm: the partition jobs are submitted to.")
    ] = None,
    slurm_account: Annotated[str | None, typer.Option(help="Slurm: --account of jobs.")] = None,
    slurm_qos: Annotated[str | None, typer.Option(help="Slurm: --qos of jobs.")] = None,
    slurm_signal: Annotated[
        str, typer.Option(help="Slurm: the checkpoint signal (sent before every stop).")
    ] = "USR1",
    slurm_signal_scope: Annotated[
        str,
        typer.Option(help="Slurm: who gets signals: steps (the workers), batch or full."),
    ] = "steps",
    slurm_accounting: Annotated[
        str,
        typer.Option(help="Slurm: where ended jobs are read: auto, sacct, jobcomp or none."),
    ] = "auto",
    slurm_tag: Annotated[
        str, typer.Option(help="Slurm: job names are TAG-job-ID-ATTEMPT (one tag per store).")
    ] = "gpufleet",
    slurm_sbatch_arg: Annotated[
        list[str] | None,
        typer.Option(help="Slurm: an extra sbatch option, e.g. --mem=64G (repeatable)."),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            help="API worker processes (0: one per core, at most 4). They share the port."
        ),
    ] = 0,
    access_log: Annotated[
        bool, typer.Option(help="Log a line per request (costs CPU at high rates).")
    ] = False,
    telemetry: Annotated[
        str,
        typer.Option(
            help="GPU utilisation source: auto (by executor: emulated, nvml, slurm), emulated, "
            "nvml, dcgm, slurm or off."
        ),
    ] = "auto",
    dcgm_url: Annotated[
        list[str] | None,
        typer.Option(help="A DCGM exporter's /metrics URL (repeatable; implies dcgm for auto)."),
    ] = None,
    telemetry_interval: Annotated[
        float, typer.Option(help="Seconds between GPU utilisation readings.")
    ] = 15.0,
    idle_threshold: Annotated[
        float, typer.Option(help="A job whose GPUs are under this busy % counts as idle.")
    ] = 5.0,
    idle_after: Annotated[
        float, typer.Option(help="Seconds idle before a job is flagged (teams' idle policy).")
    ] = 1800.0,
    idle_webhook: Annotated[
        str | None,
        typer.Option(help="POST a JSON notice here for each job flagged idle (Slack-style text)."),
    ] = None,
) -> None:
    """Run the control plane: the REST API under /api/v1 and the reconciler (on the leader)."""
    from gpufleet.cluster import Cluster
    from gpufleet.control import admin
    from gpufleet.control.db import database_url, make_engine, sessions, upgrade
    from gpufleet.control.server import ServeOptions, default_holder, make_executor, sync_nodes
    from gpufleet.sched.registry import resolve
    from gpufleet.specs.cluster import ClusterSpec
    from gpufleet.specs.load import load
    from gpufleet.specs.teams import TeamsSpec

    if cycle <= 0 or grace < 0 or speed <= 0:
        raise UserError("--cycle and --speed must be > 0 and --grace >= 0")
    if not 0 <= workers <= 64:
        raise UserError("--workers: 0 (one per core) to 64")
    resolve(profile)
    cluster = Cluster.from_spec(load(ClusterSpec, cluster_path))
    teams = load(TeamsSpec, teams_path) if teams_path else None
    options = ServeOptions(
        executor=executor,
        profile=profile,
        cycle_interval_s=cycle,
        grace_s=grace,
        speed=speed,
        run_root=runs.resolve(),
        holder=default_holder(),
        access_log=access_log,
        telemetry=_telemetry_options(
            telemetry,
            dcgm_url,
            telemetry_interval,
            idle_threshold,
            idle_after,
            webhook=idle_webhook,
        ),
    )
    if executor == "slurm":  # checked against Slurm's nodes here, once, before any process
        from dataclasses import replace

        from gpufleet.control.executors.slurm import prepare
        from gpufleet.control.executors.slurm_commands import SlurmOptions

        slurm = SlurmOptions(
            partition=slurm_partition,
            account=slurm_account,
            qos=slurm_qos,
            tag=slurm_tag,
            checkpoint_signal=slurm_signal,
            signal_scope=slurm_signal_scope,  # type: ignore[arg-type]  # checked by prepare
            accounting=slurm_accounting,  # type: ignore[arg-type]
            sbatch_args=tuple(slurm_sbatch_arg or ()),
        )
        options = replace(options, slurm=prepare(cluster, slurm, options.run_root))
    url = database_url(db)
    engine = make_engine(url)
    upgrade(engine)
    maker = sessions(engine)
    if teams is not None:
        with maker.begin() as s:
            admin.import_teams(s, admin.cli_principal(), teams, time.time())
    _, inventory = make_executor(options, time.time)  # checks it (Slurm), reads GPU UUIDs
    sync_nodes(maker, cluster, time.time(), inventory)
    engine.dispose()  # the supervisor holds no connection: its children open their own
    _supervise(url, cluster_path.resolve(), options, host=host, port=port, workers=workers)
