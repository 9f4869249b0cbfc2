"""The scheduler's input files: cluster (topology maps), teams (short quota form), jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufleet.errors import SpecError
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.jobs import JobSpec, JobsSpec
from gpufleet.specs.kinds import load_spec
from gpufleet.specs.load import validate
from gpufleet.specs.teams import TeamsSpec

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_cluster_nodes_spread_over_listed_leaves() -> None:
    spec = load_spec(EXAMPLES / "sched-cluster.yaml")
    assert isinstance(spec, ClusterSpec)
    h100 = spec.node_groups[0]
    paths = h100.node_paths(spec.topology_levels)
    assert paths[:8] == [("b1", "l1")] * 8
    assert paths[8:] == [("b1", "l2")] * 8
    assert spec.node_groups[1].mig_instances() == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


def test_unknown_topology_level_is_named() -> None:
    with pytest.raises(SpecError) as info:
        validate(
            ClusterSpec,
            {
                "nodes": [
                    {"name": "g", "count": 1, "accelerator": "h100", "topology": {"rack": "r1"}}
                ]
            },
            "x",
        )
    assert info.value.problems == [
        "node_groups[0].topology: unknown level rack; levels are block, leaf"
    ]


def test_teams_short_form_expands_to_quotas() -> None:
    spec = load_spec(EXAMPLES / "sched-teams.yaml")
    assert isinstance(spec, TeamsSpec)
    research, prod = spec.teams
    q = research.quota_for("h100-sxm5-80gb")
    assert q is not None
    assert (q.guaranteed_gpus, q.max_gpus, q.lendable_gpus) == (64, 96, 64)
    p = prod.quota_for("h100-sxm5-80gb")
    assert p is not None
    assert (p.guaranteed_gpus, p.max_gpus, p.lendable_gpus) == (64, None, 32)
    assert research.cohort == prod.cohort == "ml"


@pytest.mark.parametrize(
    ("team", "message"),
    [
        pytest.param(
            {"name": "t", "quota": {"h100": 8}, "lending_limit": {"h100": 16}},
            "teams[0].quotas[0]: lending_limit_gpus (16) exceeds guaranteed_gpus (8)",
            id="lend-more-than-owned",
        ),
        pytest.param(
            {"name": "t", "quota": {"h100": 8}, "borrowing_limit": {"a100": 4}},
            "teams[0]: borrowing_limit: a100 has no entry in quota",
            id="limit-without-quota",
        ),
    ],
)
def test_bad_team_quotas(team: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as info:
        validate(TeamsSpec, {"teams": [team]}, "x")
    assert info.value.problems == [message]


def test_jobs_example() -> None:
    spec = load_spec(EXAMPLES / "sched-jobs.yaml")
    assert isinstance(spec, JobsSpec)
    by = {j.name: j for j in spec.jobs}
    assert by["pretrain"].total_gpus == 32
    assert by["pretrain"].topology.required == "leaf"
    assert by["pretrain"].spot_ok
    assert not by["chat-7b"].spot_ok
    assert by["eval-sweep"].accelerators == ["h100-sxm5-80gb", "a100-sxm4-80gb"]
    assert by["chat-8b-sized"].workload is not None


@pytest.mark.parametrize(
    ("job", "message"),
    [
        pytest.param(
            {"gpus": 2, "gpu_fraction": 0.5},
            "give exactly one of gpus, mig_profile, gpu_fraction or workload "
            "(got gpus and gpu_fraction)",
            id="two-request-forms",
        ),
        pytest.param(
            {},
            "give exactly one of gpus, mig_profile, gpu_fraction or workload (got none)",
            id="no-request",
        ),
        pytest.param(
            {"mig_profile": "1g.10gb", "workers": 2},
            "workers > 1 needs gpus per worker (slices and fractions are single)",
            id="gang-of-slices",
        ),
        pytest.param(
            {"gpus": 1, "state": "running"},
            "a running job needs its placement",
            id="running-without-placement",
        ),
        pytest.param(
            {"gpus": 1, "placement": [{"node": "n-0", "gpus": [0]}]},
            "a pending job has no placement; set state: running",
            id="pending-with-placement",
        ),
        pytest.param(
            {"gpus": 4, "state": "running", "placement": [{"node": "n-0", "gpus": [0, 1]}]},
            "the placement holds 2 whole GPUs; the job asks 4 x 1 = 4: list exactly its GPUs",
            id="running-on-fewer-gpus-than-it-asks",
        ),
        pytest.param(
            {
                "gpus": 2,
                "workers": 2,
                "state": "running",
                "placement": [{"node": "n-0", "gpus": [0, 1]}, {"node": "n-1", "gpus": [0, 1, 2]}],
            },
            "the placement holds 5 whole GPUs; the job asks 2 x 2 = 4: list exactly its GPUs",
            id="gang-placed-on-more",
        ),
        pytest.param(
            {
                "gpus": 4,
                "state": "running",
                "placement": [{"node": "n-0", "gpus": [0, 1]}, {"node": "n-1", "gpus": [0, 1]}],
            },
            "a node holds 2 of its GPUs: each worker's 4 GPUs are on one node, so each "
            "node's count is a multiple of 4",
            id="one-worker-split-over-two-nodes",
        ),
    ],
)
def test_bad_jobs(job: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as info:
        validate(JobsSpec, {"jobs": [{"name": "j", "team": "t", **job}]}, "x")
    assert info.value.problems == [f"jobs[0]: {message}"]


def test_spot_rules() -> None:
    def job(**kw: Any) -> JobSpec:
        return JobSpec.model_validate({"name": "j", "team": "t", "gpus": 1, **kw})

    assert not job(kind="inference", allow_spot=True).spot_ok
    assert not job(kind="training").spot_ok  # no checkpoints: restarting loses everything
    assert job(kind="training", checkpoint_interval_s="1h").spot_ok
    assert not job(kind="training", checkpoint_interval_s="1h", allow_spot=False).spot_ok
