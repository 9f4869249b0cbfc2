"""Guarantees the cluster cannot honour, in every exporter (a review: a team guaranteed 200
H100s on the 128 of examples/sched-cluster.yaml exported `nominalQuota: 200`, a ResourceQuota,
Volcano capability and KAI limit of 200 and `GrpTRES=…=200`, exit 0 and no warning).

- one guarantee above the cluster's GPUs of its flavor: refused by every exporter (exit 2,
  what to change), since no engine can honour it and a ceiling capped at the cluster would
  fall below it;
- guarantees of a flavor adding up past the cluster: exported with a warning (NOTES.md and
  stderr) where the engine takes overcommitted quotas (Kueue, KAI; Slurm has no guarantees
  at all), refused by Volcano where the guarantees never lent (its queues' `guarantee`,
  reserved out of capacity) add up past it;
- every ceiling (ResourceQuota, Volcano capability, KAI limit, Slurm GrpTRES) at most the
  cluster's GPUs, while guarantees are written as they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufleet.cli.main import main
from gpufleet.errors import UserError
from gpufleet.export.bundle import Bundle

from .scenarios import ROOT, documents, export, fleet_of

H100 = "h100-sxm5-80gb"
CLUSTER = {"name": "lab", "nodes": [{"name": "h", "count": 16, "accelerator": H100}]}  # 128
# two teams at 100 each: overcommitted, each alone within the cluster
APART = {"teams": [{"name": "a", "quota": {H100: 100}}, {"name": "b", "quota": {H100: 100}}]}
COHORT = {
    "teams": [
        {"name": "a", "cohort": "ml", "quota": {H100: 100}},
        {"name": "b", "cohort": "ml", "quota": {H100: 100}},
    ]
}
TEAM_TARGETS = ("kueue", "volcano", "kai", "slurm")


def bundle(teams: dict[str, Any], target: str) -> Bundle:
    return export(fleet_of(CLUSTER, teams), target)


def of_kind(b: Bundle, kind: str) -> list[dict[str, Any]]:
    return [o for _, o in documents(b) if o["kind"] == kind]


def test_a_guarantee_beyond_the_cluster_is_refused_with_what_to_change() -> None:
    with pytest.raises(UserError) as info:
        fleet_of(CLUSTER, {"teams": [{"name": "a", "quota": {H100: 200}}]})
    assert (
        f"teams[0].quotas[0].guaranteed_gpus: team a is guaranteed 200 {H100} GPUs, but "
        "cluster 'lab' (cluster.yaml) has 128; a guarantee cannot be more than the cluster "
        "has: lower it to at most 128"
    ) in str(info.value)


def test_a_guarantee_of_all_the_cluster_exports_without_warning() -> None:
    teams = {"teams": [{"name": "a", "quota": {H100: 128}}]}
    for target in TEAM_TARGETS:
        assert bundle(teams, target).warnings == (), target


@pytest.mark.parametrize("target", ["kueue", "kai", "slurm"])
@pytest.mark.parametrize("teams", [APART, COHORT], ids=["apart", "cohort"])
def test_overcommitted_guarantees_export_with_a_warning(target: str, teams: dict[str, Any]) -> None:
    b = bundle(teams, target)
    assert len(b.warnings) == 1
    (warning,) = b.warnings
    assert warning.startswith(
        f"The guarantees of {H100} add up to 200 GPUs (a 100, b 100), 72 more than the 128 "
        "of cluster 'lab': they cannot all be honoured at once."
    )
    assert warning.endswith("Lower them to add up to at most 128.")
    notes = b.with_notes_file()["NOTES.md"]
    assert f"## Warnings\n\n- {warning}\n" in notes
    assert notes.index("## Warnings") < notes.index("## What this export could not express")


def test_volcano_refuses_guarantees_kept_past_the_cluster() -> None:
    """Teams without a cohort lend nothing: all of their guarantee is Volcano's `guarantee`."""
    with pytest.raises(UserError, match="never lent add up to 200 GPUs, but cluster 'lab' has 128"):
        bundle(APART, "volcano")


def test_volcano_warns_when_only_the_deserved_shares_overcommit() -> None:
    b = bundle(COHORT, "volcano")  # both lend all they are guaranteed: no `guarantee`
    assert len(b.warnings) == 1
    assert "Volcano's deserved shares add up past the cluster too" in b.warnings[0]
    for q in of_kind(b, "Queue"):
        assert q["spec"]["deserved"] == {"nvidia.com/gpu": 100}
        assert "guarantee" not in q["spec"]


def test_guarantees_are_written_as_they_are_and_ceilings_capped_at_the_cluster() -> None:
    """a and b each guaranteed 100 and lent the other's 100: 200 to reach, 128 to have."""
    kueue = bundle(COHORT, "kueue")
    for cq in of_kind(kueue, "ClusterQueue"):
        (entry,) = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        assert entry["nominalQuota"] == 100
    for target in ("kueue", "volcano", "kai"):
        for rq in of_kind(bundle(COHORT, target), "ResourceQuota"):
            if rq["metadata"]["name"] != "gpufleet-gpus":
                continue  # (Volcano's and KAI's priority caps)
            assert rq["spec"]["hard"]["requests.nvidia.com/gpu"] == 128, target
    for q in of_kind(bundle(COHORT, "volcano"), "Queue"):
        assert q["spec"]["capability"] == {"nvidia.com/gpu": 128}
    for q in of_kind(bundle(COHORT, "kai"), "Queue"):
        assert q["spec"]["resources"]["gpu"]["quota"] == 100
        assert q["spec"]["resources"]["gpu"]["limit"] == 128
    script = bundle(COHORT, "slurm").files["sacctmgr.sh"]
    assert script.count("GrpTRES=gres/gpu=128,gres/gpu:h100_sxm5_80gb=128 ") == 2


def test_the_cli_prints_the_warning_on_stderr_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    teams = tmp_path / "teams.yaml"
    teams.write_text(
        f"kind: teams\nteams:\n  - {{name: a, quota: {{{H100}: 100}}}}\n"
        f"  - {{name: b, quota: {{{H100}: 100}}}}\n"
    )
    cluster = str(ROOT / "examples/sched-cluster.yaml")  # 128 H100
    out = tmp_path / "out"
    code = main(["export", "kueue", cluster, "--teams", str(teams), "--out", str(out)])
    stdout, err = capsys.readouterr()
    assert code == 0
    assert err.startswith(f"warning: The guarantees of {H100} add up to 200 GPUs (a 100, b 100)")
    assert "export kueue: wrote" in stdout
    assert "## Warnings" in (out / "NOTES.md").read_text()
