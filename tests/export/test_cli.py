"""The CLI: each target end to end, bad input (exit 2, one message, nothing written), atomic
replacement of an earlier export, and `import kueue`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.cli.main import main
from gpufleet.specs.load import load
from gpufleet.specs.teams import TeamsSpec

from .scenarios import ROOT

CLUSTER = str(ROOT / "examples/sched-cluster.yaml")
TEAMS = str(ROOT / "examples/sched-teams.yaml")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("kueue", {"cluster-queues.yaml", "resource-flavors.yaml", "topology.yaml"}),
        ("volcano", {"queues.yaml", "scheduler-configmap.yaml", "hypernodes.yaml"}),
        ("kai", {"queues.yaml", "priority-classes.yaml"}),
        ("mig-parted", {"mig-parted-config.yaml", "label-nodes.sh"}),
        ("slurm", {"slurm.conf", "gres.conf", "topology.conf", "sacctmgr.sh"}),
    ],
)
def test_export_writes_the_target(
    target: str, expected: set[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, stdout, err = run(
        ["export", target, CLUSTER, "--teams", TEAMS, "--out", str(out)], capsys
    )
    assert (code, err) == (0, "")
    names = {p.name for p in out.iterdir()}
    assert expected | {"NOTES.md"} <= names
    assert f"export {target}: wrote" in stdout
    for script in out.glob("*.sh"):
        assert script.stat().st_mode & 0o111


def test_an_earlier_export_is_replaced_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert run(["export", "kueue", CLUSTER, "--teams", TEAMS, "--out", str(out)], capsys)[0] == 0
    (out / "stale.yaml").write_text("old")
    one = str(ROOT / "tests/export/inputs/one-team-cluster.yaml")
    one_teams = str(ROOT / "tests/export/inputs/one-team-teams.yaml")
    assert run(["export", "kueue", one, "--teams", one_teams, "--out", str(out)], capsys)[0] == 0
    assert not (out / "stale.yaml").exists()
    assert not (out / "topology.yaml").exists()  # the new cluster has no topology
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary directories left


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BAD = [
    pytest.param(
        ["export", "kueue", CLUSTER, "--teams", "{teams}", "--out", "{out}"],
        "kind: teams\nteams:\n  - {name: a, quota: {h200-sxm-141gb: 8}}\n",
        "has a quota for h200-sxm-141gb, which cluster 'lab'",
        id="flavor-not-in-cluster",
    ),
    pytest.param(
        ["export", "volcano", CLUSTER, "--teams", "{teams}", "--out", "{out}"],
        "kind: teams\nteams:\n  - {name: a, quota: {h1000: 8}}\n",
        "unknown accelerator 'h1000'",
        id="flavor-not-in-catalog",
    ),
    pytest.param(
        ["export", "slurm", "{missing}", "--teams", TEAMS, "--out", "{out}"],
        None,
        "no such file",
        id="missing-cluster",
    ),
    pytest.param(
        ["export", "kai", CLUSTER, "--teams", "{missing}", "--out", "{out}"],
        None,
        "no such file",
        id="missing-teams",
    ),
    pytest.param(
        ["export", "kueue", CLUSTER, "--teams", TEAMS, "--out", "{file}"],
        None,
        "exists and is not a directory",
        id="out-is-a-file",
    ),
    pytest.param(
        ["export", "kueue", CLUSTER, "--teams", TEAMS, "--out", "{full}"],
        None,
        "holds no earlier gpufleet export",
        id="out-holds-other-files",
    ),
    pytest.param(
        ["export", "kueue", CLUSTER, "--teams", TEAMS, "--out", "{out}", "--profile", "fair"],
        None,
        "unknown scheduling profile 'fair'",
        id="unknown-profile",
    ),
    pytest.param(
        [
            "export",
            "mig-parted",
            str(ROOT / "tests/export/inputs/one-team-cluster.yaml"),
            "--out",
            "{out}",
        ],
        None,
        "no GPUs that support MIG",
        id="mig-parted-without-mig",
    ),
    pytest.param(
        ["export", "kueue", CLUSTER, "--teams", "{teams}", "--out", "{out}"],
        "kind: teams\npriority_classes: [{name: top, value: 3000000000}]\n"
        "teams:\n  - {name: a, quota: {l4: 4}, default_priority: top}\n",
        "does not fit an int32",
        id="priority-beyond-int32",
    ),
    pytest.param(
        [
            "export",
            "kueue",
            "{cluster}",
            "--teams",
            str(ROOT / "tests/export/inputs/h100-teams.yaml"),
            "--out",
            "{out}",
        ],
        "kind: cluster\nnodes:\n  - {name: g, count: 8, accelerator: h100-sxm5-80gb, "
        "topology: 'b 1/l1'}\n",
        "is not a valid Kubernetes label value",
        id="topology-name-not-a-label",
    ),
    *(
        pytest.param(
            ["export", target, CLUSTER, "--teams", "{teams}", "--out", "{out}"],
            "kind: teams\nteams:\n  - {name: a, quota: {h100-sxm5-80gb: 200}}\n",
            "team a is guaranteed 200 h100-sxm5-80gb GPUs, but cluster 'lab' "
            f"({CLUSTER}) has 128; a guarantee cannot be more than the cluster has: lower it "
            "to at most 128",
            id=f"guarantee-beyond-the-cluster-{target}",
        )
        for target in ("kueue", "volcano", "kai", "slurm", "mig-parted")
    ),
    # a review: `name: system-critical` was written and the export exited 0; the API server
    # refuses the prefix for any PriorityClass but its own
    *(
        pytest.param(
            ["export", target, CLUSTER, "--teams", "{teams}", "--out", "{out}"],
            "kind: teams\npriority_classes: [{name: system-critical, value: 2000}]\n"
            "teams:\n  - {name: a, quota: {l4: 4}, default_priority: system-critical}\n",
            "priority class 'system-critical' would be the Kubernetes PriorityClass "
            "'system-critical', but Kubernetes keeps the 'system-' prefix for its own classes",
            id=f"system-priority-class-{target}",
        )
        for target in ("volcano", "kai")
    ),
    pytest.param(
        ["export", "kueue", CLUSTER, "--teams", "{teams}", "--out", "{out}"],
        f"kind: teams\npriority_classes: [{{name: {'x' * 64}, value: 2}}]\n"
        f"teams:\n  - {{name: a, quota: {{l4: 4}}, default_priority: {'x' * 64}}}\n",
        "whose value is at most 63 characters: rename it shorter",
        id="priority-class-too-long-for-a-label",
    ),
    # a review: team kube-system got a NetworkPolicy selecting every pod there (CoreDNS)
    *(
        pytest.param(
            ["export", target, CLUSTER, "--teams", "{teams}", "--out", "{out}"],
            f"kind: teams\nteams:\n  - {{name: {team}, quota: {{l4: 4}}}}\n",
            f"team {team} would be namespace '{team.lower()}', which belongs to Kubernetes or "
            "an operator",
            id=f"reserved-namespace-{team}-{target}",
        )
        for target in ("kueue", "volcano", "kai")
        for team in ("kube-system", "default", "Kube-Node-Lease", "gpu-operator", "kueue-system")
    ),
    pytest.param(
        [
            "export",
            "kai",
            CLUSTER,
            "--teams",
            "{teams}",
            "--out",
            "{out}",
            "--namespaces-per-project",
        ],
        "kind: teams\nteams:\n  - {name: volcano, projects: [system], quota: {l4: 4}}\n",
        "project system of team volcano would be namespace 'volcano-system'",
        id="reserved-namespace-of-a-project",
    ),
    pytest.param(
        ["export", "volcano", CLUSTER, "--teams", "{teams}", "--out", "{out}"],
        "kind: teams\nteams:\n  - {name: a, quota: {h100-sxm5-80gb: 100}}\n"
        "  - {name: b, quota: {h100-sxm5-80gb: 100}}\n",
        "the guarantees of h100-sxm5-80gb that are never lent add up to 200 GPUs, but "
        "cluster 'lab' has 128; a Volcano queue's guarantee is reserved out of the cluster's "
        "capacity",
        id="volcano-guarantees-kept-past-the-cluster",
    ),
]


@pytest.mark.parametrize(("argv", "spec", "message"), BAD)
def test_bad_input_exits_2_and_writes_nothing(
    argv: list[str],
    spec: str | None,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "file").write_text("keep")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep")
    names = {
        "out": str(tmp_path / "out"),
        "missing": str(tmp_path / "missing.yaml"),
        "file": str(tmp_path / "file"),
        "full": str(tmp_path / "full"),
        "teams": _write(tmp_path, "teams.yaml", spec or ""),
        "cluster": _write(tmp_path, "cluster.yaml", spec or ""),
    }
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, _, err = run([a.format(**names) for a in argv], capsys)
    assert code == 2
    assert err.startswith("error:")
    assert message in err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "file").read_text() == "keep"


def test_import_writes_a_teams_file_that_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "k"
    assert run(["export", "kueue", CLUSTER, "--teams", TEAMS, "--out", str(out)], capsys)[0] == 0
    teams = tmp_path / "teams.yaml"
    code, stdout, err = run(["import", "kueue", str(out), "--out", str(teams)], capsys)
    assert (code, err) == (0, "")
    assert "2 teams (research, prod)" in stdout
    spec = load(TeamsSpec, teams)
    assert [t.name for t in spec.teams] == ["research", "prod"]
    code, printed, _ = run(["import", "kueue", str(out)], capsys)
    assert code == 0
    assert printed == teams.read_text()


@pytest.mark.parametrize(
    ("files", "message"),
    [
        pytest.param({}, "no .yaml or .yml files", id="empty-dir"),
        pytest.param(
            {"a.yaml": "kind: Namespace\napiVersion: v1\n"},
            "no Kueue ClusterQueue",
            id="no-cluster-queue",
        ),
        pytest.param({"a.yaml": "kind: [\n"}, "YAML syntax error", id="bad-yaml"),
        pytest.param(
            {
                "a.yaml": "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\n"
                "metadata: {name: t}\nspec:\n  resourceGroups:\n  - coveredResources: "
                "[nvidia.com/gpu]\n    flavors:\n    - name: mystery\n      resources:\n"
                "      - {name: nvidia.com/gpu, nominalQuota: 8}\n"
            },
            "cannot tell which accelerator flavor mystery is",
            id="flavor-without-accelerator",
        ),
        pytest.param(
            {
                "a.yaml": "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\n"
                "metadata: {name: t}\nspec:\n  resourceGroups:\n  - coveredResources: "
                "[nvidia.com/gpu]\n    flavors:\n    - name: h100\n      resources:\n"
                "      - {name: nvidia.com/gpu, nominalQuota: eight}\n"
            },
            "is not a Kubernetes quantity",
            id="bad-quantity",
        ),
    ],
)
def test_import_bad_input_exits_2(
    files: dict[str, str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name, text in files.items():
        (src / name).write_text(text)
    code, _, err = run(["import", "kueue", str(src), "--out", str(tmp_path / "t.yaml")], capsys)
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "t.yaml").exists()


def test_import_of_a_missing_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["import", "kueue", str(tmp_path / "nope")], capsys)
    assert code == 2
    assert "no such file or directory" in err
