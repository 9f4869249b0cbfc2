"""The export scenarios: inputs in files (examples/ and tests/export/inputs/), one profile each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpufleet.export.bundle import Bundle
from gpufleet.export.kai import export_kai
from gpufleet.export.kueue import export_kueue
from gpufleet.export.migparted import export_mig_parted
from gpufleet.export.model import Fleet, build_fleet
from gpufleet.export.slurm import export_slurm
from gpufleet.export.volcano import export_volcano
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.load import load
from gpufleet.specs.teams import TeamsSpec

ROOT = Path(__file__).parents[2]
INPUTS = "tests/export/inputs"


@dataclass(frozen=True)
class Scenario:
    cluster: str  # repo-relative, as it appears in the files' headers
    teams: str
    profile: str = "default"
    per_project: bool = False
    targets: tuple[str, ...] = ("kueue", "volcano", "kai", "mig-parted", "slurm")

    def fleet(self) -> Fleet:
        return build_fleet(
            load(ClusterSpec, ROOT / self.cluster),
            load(TeamsSpec, ROOT / self.teams),
            profile=self.profile,
            cluster_source=self.cluster,
            teams_source=self.teams,
        )

    def bundle(self, target: str) -> Bundle:
        return export(self.fleet(), target, per_project=self.per_project)


SCENARIOS = {
    # the scheduler's example: H100 in two leaves, A100 cut into MIG slices, spot L4s
    "sched-mig": Scenario("examples/sched-cluster.yaml", "examples/sched-teams.yaml"),
    # no MIG: one H100 pod, a cohort of two teams and a team on its own, projects as namespaces
    "h100-no-mig": Scenario(
        f"{INPUTS}/h100-cluster.yaml",
        f"{INPUTS}/h100-teams.yaml",
        profile="slurm-like",
        per_project=True,
    ),
    # one team on two L4 boxes, strict FIFO (L4 has no MIG: no mig-parted export)
    "one-team": Scenario(
        f"{INPUTS}/one-team-cluster.yaml",
        f"{INPUTS}/one-team-teams.yaml",
        profile="strict-fifo",
        targets=("kueue", "volcano", "kai", "slurm"),
    ),
}
K8S_TARGETS = ("kueue", "volcano", "kai", "mig-parted")


def export(fleet: Fleet, target: str, *, per_project: bool = False) -> Bundle:
    builders: dict[str, Callable[[], Bundle]] = {
        "kueue": lambda: export_kueue(fleet, per_project=per_project),
        "volcano": lambda: export_volcano(fleet, per_project=per_project),
        "kai": lambda: export_kai(fleet, per_project=per_project),
        "mig-parted": lambda: export_mig_parted(fleet),
        "slurm": lambda: export_slurm(fleet),
    }
    return builders[target]()


def documents(bundle: Bundle) -> list[tuple[str, dict[str, Any]]]:
    """(file, object) for every Kubernetes object of the bundle's YAML files."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name, text in bundle.files.items():
        if name.endswith(".yaml") and name != "mig-parted-config.yaml":
            out += [(name, d) for d in yaml.safe_load_all(text) if d is not None]
    return out


def fleet_of(
    cluster: dict[str, Any], teams: dict[str, Any] | None, profile: str = "default"
) -> Fleet:
    """A fleet from inline specs (table tests)."""
    from gpufleet.specs.load import validate

    return build_fleet(
        validate(ClusterSpec, {"kind": "cluster", **cluster}, "cluster"),
        validate(TeamsSpec, {"kind": "teams", **teams}, "teams") if teams else None,
        profile=profile,
    )
