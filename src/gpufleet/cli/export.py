"""`gpufleet export TARGET CLUSTER.yaml --teams TEAMS.yaml --out DIR` and `gpufleet import kueue`.

The exporters are pure (specs in, files as text out); this module reads the
specs, writes the bundle atomically and reports what was written.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpufleet.cli.schedule import PROFILE_HELP
from gpufleet.errors import UserError
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.load import load
from gpufleet.specs.teams import TeamsSpec

if TYPE_CHECKING:
    from gpufleet.export.bundle import Bundle
    from gpufleet.export.model import Fleet

export_app = typer.Typer(
    help="Write the cluster and its teams as Kueue, Volcano, KAI-Scheduler, mig-parted or "
    "Slurm configuration (docs/guide/export.md).",
    no_args_is_help=True,
)
import_app = typer.Typer(
    help="Read an engine's configuration back into gpufleet specs.", no_args_is_help=True
)

ClusterArg = Annotated[Path, typer.Argument(help="Cluster spec (kind: cluster).")]
TeamsOpt = Annotated[Path, typer.Option("--teams", help="Teams and quotas (kind: teams).")]
OutOpt = Annotated[
    Path,
    typer.Option(
        "--out",
        help="Directory to write (created; an earlier export there is replaced, anything "
        "else refused).",
    ),
]
ProfileOpt = Annotated[str, typer.Option("--profile", help=PROFILE_HELP)]
PerProjectOpt = Annotated[
    bool,
    typer.Option(
        "--namespaces-per-project",
        help="Also a namespace <team>-<project> for each of a team's projects.",
    ),
]


def _export(
    target: str,
    *,
    cluster_path: Path,
    teams_path: Path | None,
    out: Path,
    profile: str,
    build: Callable[[Fleet], Bundle],
) -> None:
    from gpufleet.export.bundle import write_bundle
    from gpufleet.export.model import build_fleet

    cluster = load(ClusterSpec, cluster_path)
    teams = load(TeamsSpec, teams_path) if teams_path is not None else None
    fleet = build_fleet(
        cluster,
        teams,
        profile=profile,
        cluster_source=str(cluster_path),
        teams_source=str(teams_path) if teams_path is not None else None,
    )
    bundle = build(fleet)
    paths = write_bundle(bundle, out)
    for warning in bundle.warnings:
        typer.echo(f"warning: {warning}", err=True)
    shown = [p.name for p in paths if not p.name.startswith(".")]
    typer.echo(f"export {target}: wrote {len(shown)} files to {out}: {', '.join(shown)}")
    if bundle.notes:
        typer.echo(
            f"{len(bundle.notes)} things {target} cannot express exactly: see {out / 'NOTES.md'}"
        )


def _kubernetes_command(target: str, doc: str) -> None:
    """Register `export <target>` for a Kubernetes target (`gpufleet.export.<target>`)."""

    def command(
        cluster_path: ClusterArg,
        *,
        teams_path: TeamsOpt,
        out: OutOpt,
        profile: ProfileOpt = "default",
        per_project: PerProjectOpt = False,
    ) -> None:
        module = importlib.import_module(f"gpufleet.export.{target}")
        build = getattr(module, f"export_{target}")
        _export(
            target,
            cluster_path=cluster_path,
            teams_path=teams_path,
            out=out,
            profile=profile,
            build=lambda f: build(f, per_project=per_project),
        )

    command.__doc__ = doc
    command.__name__ = f"export_{target}"
    export_app.command(target)(command)


_kubernetes_command(
    "kueue",
    """ResourceFlavors, Cohorts, ClusterQueues, LocalQueues, WorkloadPriorityClasses, a
    Topology, and per-team namespaces with quotas, RBAC and network isolation.""",
)
_kubernetes_command(
    "volcano",
    """Queues, PriorityClasses, HyperNodes, the volcano-scheduler ConfigMap for the profile,
    and per-team namespaces with quotas, RBAC and network isolation.""",
)
_kubernetes_command(
    "kai",
    """KAI-Scheduler Queues (a parent per team, a leaf per accelerator), PriorityClasses,
    and per-team namespaces with quotas, RBAC and network isolation.""",
)


@export_app.command("mig-parted")
def export_mig_parted(
    cluster_path: ClusterArg,
    *,
    out: OutOpt,
    teams_path: Annotated[
        Path | None, typer.Option("--teams", help="Accepted and checked; not needed.")
    ] = None,
) -> None:
    """The cluster's MIG layouts as a mig-parted config (and a ConfigMap for the GPU
    Operator), with the nvidia.com/mig.config node labels that select them."""
    from gpufleet.export.migparted import export_mig_parted as build

    _export(
        "mig-parted",
        cluster_path=cluster_path,
        teams_path=teams_path,
        out=out,
        profile="default",
        build=build,
    )


@export_app.command("slurm")
def export_slurm(
    cluster_path: ClusterArg,
    *,
    teams_path: TeamsOpt,
    out: OutOpt,
    profile: ProfileOpt = "default",
) -> None:
    """slurm.conf fragments, gres.conf, topology.conf and an sacctmgr script for accounts,
    QOS and fair-share."""
    from gpufleet.export.slurm import export_slurm as build

    _export(
        "slurm",
        cluster_path=cluster_path,
        teams_path=teams_path,
        out=out,
        profile=profile,
        build=build,
    )


@import_app.command("kueue")
def import_kueue(
    source: Annotated[
        Path, typer.Argument(help="Directory (or file) of Kueue YAML, multi-document allowed.")
    ],
    *,
    out: Annotated[
        Path | None, typer.Option("--out", help="Teams file to write; default: print it.")
    ] = None,
) -> None:
    """Read ClusterQueues, Cohorts, ResourceFlavors and WorkloadPriorityClasses into a teams
    spec, to simulate an existing Kueue setup."""
    from gpufleet.control.executors.runner import write_atomic
    from gpufleet.export.kueue_import import import_kueue as read
    from gpufleet.export.kueue_import import read_documents, render_teams

    imported = read(read_documents(source), str(source))
    text = render_teams(imported)
    if out is None:
        typer.echo(text, nl=False)
        return
    if out.is_dir():
        raise UserError(f"{out}: is a directory; --out names the teams file to write")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, text)
    except OSError as exc:
        raise UserError(f"{out}: cannot write ({exc.strerror})") from None
    teams = imported.teams.teams
    typer.echo(
        f"import kueue: wrote {out}: {len(teams)} teams ({', '.join(t.name for t in teams)}); "
        f"{len(imported.notes)} notes in its header"
    )
