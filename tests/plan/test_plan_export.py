"""The plan's quotas in each engine's units (issue 25): `gpufleet plan` writes cluster.yaml and
teams.yaml next to its reports, and `gpufleet export` turns them into each engine's
configuration with the same numbers the report's "In each engine's units" table shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.cli.main import main

from .fleet_cases import tiny, write_spec


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("plan-export")
    data = tiny(horizon="30h", warmup="4h", arrival_sensitivity=0, compare_profiles=[])
    path = write_spec(base, data)
    out = base / "out"
    code = main(["plan", str(path), "--out", str(out), "--seeds", "2", "--workers", "1"])
    assert code == 0
    return out


def _objects(folder: Path, kind: str) -> list[dict[str, Any]]:
    return [
        doc
        for f in sorted(folder.glob("*.yaml"))
        for doc in yaml.safe_load_all(f.read_text(encoding="utf-8"))
        if doc and doc.get("kind") == kind
    ]


def test_kueue_and_slurm_exports_of_the_plan_carry_its_quotas(planned: Path) -> None:
    plan = json.loads((planned / "plan.json").read_text(encoding="utf-8"))
    quotas = {q["team"]: q for q in plan["quotas"]["teams"]}
    md = (planned / "plan.md").read_text(encoding="utf-8")
    for name in ("cluster.yaml", "teams.yaml"):
        assert (planned / name).exists()
    assert plan["quotas"]["verdict"] in (planned / "teams.yaml").read_text(encoding="utf-8")
    args = [str(planned / "cluster.yaml"), "--teams", str(planned / "teams.yaml")]

    kueue = planned / "kueue"
    assert main(["export", "kueue", *args, "--out", str(kueue)]) == 0
    for cq in _objects(kueue, "ClusterQueue"):
        team = cq["metadata"]["name"]
        q = quotas[team]
        resources = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
        assert resources["nominalQuota"] == q["guaranteed_gpus"]
        borrowing = q["burst_limit_gpus"] - q["guaranteed_gpus"]
        assert resources.get("borrowingLimit", borrowing) == borrowing
        assert f"nominalQuota {q['guaranteed_gpus']:,}, borrowingLimit {borrowing:,}" in md

    slurm = planned / "slurm"
    assert main(["export", "slurm", *args, "--out", str(slurm)]) == 0
    script = (slurm / "sacctmgr.sh").read_text(encoding="utf-8")
    for team, q in quotas.items():
        limit = q["burst_limit_gpus"]
        cap = f"GrpTRES=gres/gpu={limit},gres/gpu:h100_sxm5_80gb={limit}"
        assert f"where name={team} " in script
        assert cap in next(line for line in script.splitlines() if f"where name={team} " in line)
        assert cap in md
