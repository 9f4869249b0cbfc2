"""`import kueue`: round trips through `export kueue`, a foreign setup, and a property over
random teams (every export validates against the CRDs and imports back the same quotas)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.errors import UserError
from gpufleet.export.bundle import write_bundle
from gpufleet.export.kueue import export_kueue
from gpufleet.export.kueue_import import import_kueue, parse_quantity, read_documents
from gpufleet.export.model import build_flavors
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.load import validate
from gpufleet.specs.teams import TeamsSpec

from .crd import has_crd, problems
from .scenarios import ROOT, SCENARIOS, documents, fleet_of


def effective(spec: TeamsSpec, leave_out: frozenset[str] = frozenset()) -> dict[str, Any]:
    """What a teams spec means to the scheduler: the fields a round trip must keep.

    Without a cohort a team never borrows nor lends, so its limits mean nothing; a
    quota's reach is its guarantee when it may not borrow. Quotas of the flavors in
    `leave_out` are not compared: their guarantees need more than the flavor's resources
    weigh, so the export writes less (and warns; tests/export/test_mig_apportion.py).
    """
    out: dict[str, Any] = {
        "classes": sorted((c.name, c.value, c.preemptible) for c in spec.priority_classes)
    }
    for t in spec.teams:
        quotas = {}
        for q in t.quotas:
            if q.flavor in leave_out:
                continue
            reach = q.guaranteed_gpus if t.cohort is None or not q.borrowing else q.max_gpus
            lends = q.lendable_gpus if t.cohort is not None else 0
            quotas[q.flavor] = (q.guaranteed_gpus, reach, lends)
        out[t.name] = (t.cohort, t.weight, t.default_priority, tuple(t.projects), quotas)
    return out


def round_trip(bundle_files: dict[str, str], tmp: Path) -> TeamsSpec:
    for name, text in bundle_files.items():
        (tmp / name).write_text(text)
    return import_kueue(read_documents(tmp), str(tmp)).teams


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_export_then_import_gives_the_same_teams(scenario: str, tmp_path: Path) -> None:
    s = SCENARIOS[scenario]
    fleet = s.fleet()
    assert fleet.teams_spec is not None
    imported = round_trip(dict(s.bundle("kueue").files), tmp_path)
    assert effective(imported) == effective(fleet.teams_spec)


def test_round_trip_on_the_mixed_a100_cluster(tmp_path: Path) -> None:
    """Whole GPUs and MIG slices of one accelerator: the quota split over four resources."""
    from gpufleet.export.model import build_fleet
    from gpufleet.specs.cluster import ClusterSpec
    from gpufleet.specs.load import load

    fleet = build_fleet(
        load(ClusterSpec, ROOT / "examples/sim-cluster-a100.yaml"),
        load(TeamsSpec, ROOT / "examples/sim-teams.yaml"),
    )
    out = tmp_path / "out"
    write_bundle(export_kueue(fleet), out)
    imported = import_kueue(read_documents(out), str(out))
    assert fleet.teams_spec is not None
    assert effective(imported.teams) == effective(fleet.teams_spec)


def test_a_foreign_setup_imports_with_notes() -> None:
    path = ROOT / "tests/export/inputs/foreign-kueue.yaml"
    imported = import_kueue(read_documents(path), str(path))
    a, b = imported.teams.teams
    assert (a.name, a.cohort, a.weight) == ("team-a", "research", 0.5)
    assert [
        (q.flavor, q.guaranteed_gpus, q.borrowing_limit_gpus, q.lending_limit_gpus)
        for q in a.quotas
    ] == [
        ("h100-sxm5-80gb", 16, 8, None),
        ("a100-sxm4-80gb", 2, None, 1),  # 14 x 1g.10gb = 2 GPUs' compute, 7 lendable = 1
    ]
    assert (b.name, b.cohort, [(q.flavor, q.guaranteed_gpus) for q in b.quotas]) == (
        "team-b",
        "research",
        [("h100-sxm5-80gb", 1000)],
    )
    notes = " ".join(imported.notes)
    for expected in ("parent org", "cpu, memory", "default classes", "--profile kueue-like"):
        assert expected in notes


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (8, 8),
        ("8", 8),
        ("500m", 0.5),
        ("1k", 1000),
        ("2Gi", 2 * 2**30),
        ("1e3", 1000),
        ("1.5", 1.5),
        (0.25, 0.25),
    ],
)
def test_quantities(text: object, value: float) -> None:
    assert parse_quantity(text, "x") == value


@pytest.mark.parametrize("text", ["eight", "1x", "", True])
def test_bad_quantities(text: object) -> None:
    with pytest.raises(UserError):
        parse_quantity(text, "x")


# -- property: any valid teams spec on these clusters exports, validates and comes back ---

CLUSTERS = {
    "h100": {
        "nodes": [
            {
                "name": "h",
                "count": 6,
                "accelerator": "h100-sxm5-80gb",
                "topology": {"block": "b", "leaf": ["l1", "l2"]},
            }
        ]
    },
    "mixed": {
        "nodes": [
            {"name": "h", "count": 4, "accelerator": "h100-sxm5-80gb", "topology": "b1/l1"},
            {"name": "a", "count": 3, "accelerator": "a100-sxm4-80gb", "topology": "b2/l2"},
            {
                "name": "m",
                "count": 5,
                "accelerator": "a100-sxm4-80gb",
                "mig_layout": "all-balanced",
                "topology": "b2/l3",
            },
            {
                "name": "s",
                "count": 2,
                "accelerator": "a100-sxm4-80gb",
                "mig_layout": {"3g.40gb": 2},
                "topology": "b2/l3",
            },
        ]
    },
}


@st.composite
def teams_specs(draw: st.DrawFn, flavors: dict[str, int]) -> dict[str, Any]:
    """Random valid teams on a cluster with `flavors` (accelerator -> its GPUs): a guarantee
    is at most the cluster's GPUs of its flavor (more is refused, `build_fleet`)."""
    n_classes = draw(st.integers(1, 4))
    classes = [
        {
            "name": f"pc{i}",
            "value": draw(st.integers(-100, 10_000)),
            "preemptible": draw(st.booleans()),
        }
        for i in range(n_classes)
    ]
    teams = []
    for i in range(draw(st.integers(1, 4))):
        quotas = []
        for flavor in draw(st.lists(st.sampled_from(sorted(flavors)), unique=True, max_size=2)):
            g = draw(st.integers(0, min(64, flavors[flavor])))
            q: dict[str, Any] = {"flavor": flavor, "guaranteed_gpus": g}
            if draw(st.booleans()):
                q["limit_gpus"] = g + draw(st.integers(0, 64))
            if draw(st.booleans()):
                q["lending_limit_gpus"] = draw(st.integers(0, g))
            q["borrowing"] = draw(st.booleans())
            q["lending"] = draw(st.booleans())
            quotas.append(q)
        teams.append(
            {
                "name": draw(st.sampled_from(["a", "b", "c", "d"])) + str(i),
                "cohort": draw(st.sampled_from([None, "x", "y"])),
                "weight": draw(st.sampled_from([0.5, 1, 1.5, 2, 3, 0.25])),
                "quotas": quotas,
                "projects": draw(st.lists(st.sampled_from(["p", "q"]), unique=True, max_size=2)),
                "default_priority": f"pc{draw(st.integers(0, n_classes - 1))}",
            }
        )
    return {"priority_classes": classes, "teams": teams}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), cluster=st.sampled_from(sorted(CLUSTERS)), per_project=st.booleans())
def test_any_teams_spec_exports_valid_objects_and_imports_back(
    data: st.DataObject, cluster: str, per_project: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    spec = validate(ClusterSpec, {"kind": "cluster", **CLUSTERS[cluster]}, "cluster")
    flavors = {acc: f.gpus for acc, f in build_flavors(spec).items()}
    teams = data.draw(teams_specs(flavors))
    fleet = fleet_of(
        CLUSTERS[cluster],
        teams,
        data.draw(
            st.sampled_from(
                ["default", "kueue-like", "slurm-like", "fifo", "strict-fifo", "tiresias"]
            )
        ),
    )
    bundle = export_kueue(fleet, per_project=per_project)
    for _, obj in documents(bundle):
        if has_crd(obj):
            assert problems(obj) == []
    imported = round_trip(dict(bundle.files), tmp_path_factory.mktemp("rt"))
    assert fleet.teams_spec is not None
    short = frozenset(o.flavor for o in fleet.overcommits if o.short)
    assert effective(imported, short) == effective(fleet.teams_spec, short)
