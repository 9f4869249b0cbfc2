"""`gpufleet simulate` and `simulate compare` on a tiny cluster and workload; `sim.setup`.

Everything here runs in well under a second per simulation: a 2-node cluster and a
one-day workload of a few dozen jobs, written to tmp_path by the fixtures.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from scipy import stats

from gpufleet.cli.main import main
from gpufleet.cluster import Cluster
from gpufleet.cluster.topology import Node
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.sim.setup import (
    cluster_from_nodes,
    load_workload,
    open_teams,
    placement_warnings,
    workload_source,
)
from gpufleet.sim.workload import CleaningReport, TraceJob, TraceNode, Workload
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.load import load
from gpufleet.specs.teams import OPEN_QUOTA_GPUS

DATA = Path(__file__).parent / "data"
OPENB_PODS = DATA / "openb_pods_sample.csv"
OPENB_NODES = DATA / "openb_nodes_sample.csv"
EXAMPLES = Path(__file__).parents[2] / "examples"

CLUSTER = """\
kind: cluster
name: tiny
nodes:
  - {name: big, count: 2, accelerator: h100-sxm5-80gb, gpus_per_node: 4,
     topology: {block: b1, leaf: l1}}
  - {name: share, count: 1, accelerator: h100-sxm5-80gb, gpus_per_node: 2,
     topology: {block: b1, leaf: l2}, fractions: true}
"""
WORKLOAD = """\
kind: workload
horizon: 1d
teams:
  - name: vision
    workloads:
      - kind: training
        arrivals_per_day: 12
        gpus: {choices: [2, 4, 8], weights: [0.5, 0.3, 0.2]}
        gpus_per_worker: 4
        duration: {lognormal_median: 2h, sigma: 0.5, max: 6h}
        checkpoint_interval: 30min
  - name: research
    priority_class: opportunistic
    workloads:
      - kind: interactive
        arrivals_per_day: 10
        gpu_fraction: 0.5
        duration: {exponential_mean: 1h}
"""
TEAMS = """\
kind: teams
teams:
  - {name: vision, cohort: lab, quota: {h100-sxm5-80gb: 6}}
  - {name: research, cohort: lab, quota: {h100-sxm5-80gb: 4}}
"""
STABLE_FIELDS = {
    "gpu_allocation_ratio",
    "busy_utilization",
    "goodput_ratio",
    "wait_s",
    "jct_s",
    "jain_fairness",
    "slo_attainment",
    "preemptions",
    "lost_gpu_hours",
    "fragmented_gpus_mean",
    "jobs_completed",
    "jobs_unfinished",
    "gpu_hours_completed",
    "per_team",
    "per_kind",
}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in (("cluster", CLUSTER), ("workload", WORKLOAD), ("teams", TEAMS)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        out[name] = path
    return out


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def args(files: dict[str, Path], *extra: str) -> list[str]:
    return [str(files["cluster"]), str(files["workload"]), *extra]


# -- simulate run ------------------------------------------------------------------------


def test_table_output(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["simulate", *args(files, "--teams", str(files["teams"]))], capsys)
    assert code == 0, err
    assert "generator: read" in out  # the workload's cleaning report comes first
    assert "GPU allocation" in out
    assert "gpu_allocation_ratio" in out
    assert "Per team" in out
    assert "vision" in out
    assert "research" in out


def test_json_output_and_run_is_the_default_command(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["simulate", "run", *args(files, "--format", "json")], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert list(data) == ["profile", "seed", "metrics", "warnings"]
    assert data["profile"] == "default"
    assert data["seed"] == 0
    assert set(data["metrics"]) >= STABLE_FIELDS
    assert "samples" not in data["metrics"]  # series only in result.json
    assert data["metrics"]["jobs_completed"] > 0
    assert "no --teams file" in err  # notes go to stderr so stdout stays JSON
    code, again, _ = run(["simulate", *args(files, "--format", "json")], capsys)
    assert code == 0
    assert again == out


def test_same_seed_is_byte_identical_and_another_seed_differs(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = []
    for folder, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        argv = args(files, "--seed", seed, "--gpu-mtbf-h", "200", "--format", "json")
        code, out, err = run(["simulate", *argv, "--out", str(tmp_path / folder)], capsys)
        assert code == 0, err
        outputs.append((out, (tmp_path / folder / "result.json").read_bytes()))
    assert outputs[0] == outputs[1]
    assert outputs[0][0] != outputs[2][0]


def test_out_writes_result_json_with_series(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "deep" / "out"
    argv = [
        "simulate",
        *args(files, "--profile", "fifo", "--horizon", "12h", "--out", str(out_dir)),
    ]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert sorted(p.name for p in out_dir.iterdir()) == ["result.json"]  # no .partial left
    data = json.loads((out_dir / "result.json").read_text(encoding="utf-8"))
    assert data["profile"] == "fifo"
    assert data["cluster"] == "tiny"
    assert data["cycles"] > 0
    samples = data["metrics"]["samples"]
    assert samples
    assert {"t_s", "allocated_ratio", "pending"} <= set(samples[0])
    assert data["metrics"]["duration_s"] <= 12 * 3600
    assert "result.json" in out


def test_trace_cluster_from_openb_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "trace", str(OPENB_PODS), "--trace-format", "openb"]
    argv += ["--trace-nodes", str(OPENB_NODES), "--format", "json"]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    data = json.loads(out)
    # the fixture's G2 and T4 pods match none of its three nodes: counted, not rewritten
    assert any("openb-G2" in w for w in data["warnings"])
    assert any("openb-T4" in w for w in data["warnings"])
    assert data["metrics"]["jobs_unfinished"] == 2
    assert data["metrics"]["jobs_completed"] == 4
    assert "read 10 rows, kept 6" in err  # the cleaning report
    assert "openb-G2" in err


# -- simulate compare --------------------------------------------------------------------


def test_compare_writes_json_html_md_with_right_intervals(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "cmp"
    argv = ["simulate", "compare", *args(files, "--profiles", "default,fifo", "--seeds", "2")]
    argv += ["--teams", str(files["teams"]), "--out", str(out_dir), "--format", "json"]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    names = {p.name for p in out_dir.iterdir()}
    assert {"compare.json", "compare.html", "compare.md"} <= names
    assert not [n for n in names if n.endswith(".partial")]
    assert out == (out_dir / "compare.json").read_text(encoding="utf-8")
    data = json.loads(out)
    assert data["profiles"] == ["default", "fifo"]
    assert data["seeds"] == [0, 1]
    assert data["workload"]["kind"].startswith("generator")
    for profile in ("default", "fifo"):
        for metric, est in data["metrics"][profile].items():
            values = [v for v in est["values"] if v is not None]
            assert len(est["values"]) == 2, metric
            assert est["n"] == len(values)
            if len(values) < 2:
                assert est["ci_low"] is None
                continue
            mean = sum(values) / len(values)
            assert est["mean"] == pytest.approx(mean)
            if values[0] == values[1]:
                assert est["ci_low"] == pytest.approx(mean)
                continue
            low, high = stats.t.interval(0.95, 1, loc=mean, scale=stats.sem(values))
            assert est["ci_low"] == pytest.approx(low), metric
            assert est["ci_high"] == pytest.approx(high), metric
        shares = data["team_shares"][profile]
        assert set(shares) == {"research", "vision"}
        assert sum(s["mean"] for s in shares.values()) == pytest.approx(1.0)
    html = (out_dir / "compare.html").read_text(encoding="utf-8")
    assert html.count("<svg") == 5
    assert "chart-allocation" in html
    assert "<script" not in html
    md = (out_dir / "compare.md").read_text(encoding="utf-8")
    assert "| GPU allocation |" in md
    assert "![allocation](compare-allocation.svg)" in md
    assert "compare-allocation.svg" in names


def test_compare_is_reproducible_and_prints_a_table(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blobs = []
    for folder in ("x", "y"):
        argv = ["simulate", "compare", *args(files, "--profiles", "binpack", "--seeds", "1")]
        code, out, err = run([*argv, "--out", str(tmp_path / folder)], capsys)
        assert code == 0, err
        assert "binpack" in out
        assert "GPU allocation" in out
        blobs.append({p.name: p.read_bytes() for p in sorted((tmp_path / folder).iterdir())})
    assert blobs[0] == blobs[1]
    one_seed = json.loads(blobs[0]["compare.json"])["metrics"]["binpack"]
    assert one_seed["gpu_allocation_ratio"]["ci_low"] is None  # no interval from one seed


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["simulate", "missing.yaml", "{workload}"], "no such file", id="no-cluster"),
        pytest.param(["simulate", "{cluster}", "missing.yaml"], "no such file", id="no-workload"),
        pytest.param(
            ["simulate", "{teams}", "{workload}"], "reads cluster specs", id="cluster-kind"
        ),
        pytest.param(
            ["simulate", "{cluster}", "{cluster}"], "reads workload specs", id="workload-kind"
        ),
        pytest.param(
            ["simulate", "{cluster}", "{pods}", "--trace-format", "opnb"],
            "did you mean 'openb'",
            id="trace-format",
        ),
        pytest.param(
            ["simulate", "{cluster}", "{pods}"], "give --trace-format", id="trace-no-format"
        ),
        pytest.param(
            ["simulate", "{cluster}", "{workload}", "--profile", "fifoo"],
            "unknown scheduling profile 'fifoo'; did you mean 'fifo'",
            id="profile",
        ),
        pytest.param(
            ["simulate", "compare", "{cluster}", "{workload}", "--profiles", "default,binpak"],
            "did you mean 'binpack'",
            id="compare-profile",
        ),
        pytest.param(
            ["simulate", "trace", "{workload}"], "lists no nodes of its own", id="trace-cluster"
        ),
        pytest.param(
            ["simulate", "{cluster}", "{workload}", "--horizon", "3 fortnights"],
            "--horizon",
            id="horizon",
        ),
        pytest.param(
            ["simulate", "{cluster}", "{workload}", "--teams", "{strict_teams}"],
            "priority class 'opportunistic'",
            id="priority-class",
        ),
        pytest.param(
            ["simulate", "{cluster}", "bundled:philly"], "unknown bundled trace", id="bundled"
        ),
        pytest.param(
            ["simulate", "{cluster}", "{empty}", "--trace-format", "gpufleet"],
            "no jobs to simulate (read 0 rows, kept 0)",
            id="empty-workload",
        ),
    ],
)
def test_bad_input_exits_2_with_one_message_and_writes_nothing(
    argv: list[str],
    message: str,
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    strict = tmp_path / "strict-teams.yaml"
    strict.write_text(
        "kind: teams\npriority_classes: [{name: standard, value: 1}]\n"
        "teams: [{name: vision}, {name: research}]\n",
        encoding="utf-8",
    )
    values = {k: str(v) for k, v in files.items()}
    empty = tmp_path / "empty.csv"
    empty.write_text("name,team,submit_s,duration_s,gpus,workers\n", encoding="utf-8")
    values |= {"pods": str(OPENB_PODS), "strict_teams": str(strict), "empty": str(empty)}
    out_dir = tmp_path / "never"
    code, out, err = run([a.format(**values) for a in argv] + ["--out", str(out_dir)], capsys)
    assert code == 2
    assert message in err
    assert "Traceback" not in err + out
    assert err.startswith("error:")
    assert not out_dir.exists()


def test_out_that_is_a_file_is_refused(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine", encoding="utf-8")
    code, _, err = run(["simulate", *args(files, "--out", str(taken))], capsys)
    assert code == 2
    assert "not a folder" in err
    assert taken.read_text(encoding="utf-8") == "mine"


def test_bare_group_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["simulate"], capsys)
    assert code == 0
    assert "run" in out
    assert "compare" in out


# -- sim.setup ---------------------------------------------------------------------------


def _job(name: str, team: str = "t", **kw: Any) -> TraceJob:
    return TraceJob(name=name, team=team, submit_s=0.0, duration_s=60.0, **kw)


def _workload(*jobs: TraceJob, nodes: tuple[TraceNode, ...] = ()) -> Workload:
    return Workload(jobs, CleaningReport("test", len(jobs), len(jobs)), nodes)


def test_cluster_from_nodes_is_flat_and_shares_gpus() -> None:
    cluster = cluster_from_nodes((TraceNode("n1", "openb-G3", 8), TraceNode("n2", "openb-T4", 2)))
    assert cluster.levels == ("node",)
    assert [n.name for n in cluster.nodes] == ["n1", "n2"]
    assert all(n.fractions for n in cluster.nodes)
    assert dict(cluster.gpus_by_accelerator) == {"openb-G3": 8, "openb-T4": 2}
    with pytest.raises(UserError, match="no nodes"):
        cluster_from_nodes(())


def test_open_teams_give_every_team_a_quota_that_never_binds() -> None:
    cluster = cluster_from_nodes((TraceNode("n1", "openb-G3", 8), TraceNode("n2", "openb-T4", 2)))
    teams = open_teams(
        cluster,
        _workload(_job("a", team="x", gpus=1), _job("b", team="y", gpus=1, priority_class="vip")),
    )
    assert [t.name for t in teams.teams] == ["x", "y"]
    for team in teams.teams:
        open_quota = {"openb-G3": OPEN_QUOTA_GPUS, "openb-T4": OPEN_QUOTA_GPUS}
        assert {q.flavor: q.guaranteed_gpus for q in team.quotas} == open_quota
    assert {"production", "standard", "opportunistic", "vip"} <= {
        c.name for c in teams.priority_classes
    }


def test_placement_warnings_count_jobs_that_can_never_run() -> None:
    spec = load(ClusterSpec, EXAMPLES / "sim-cluster-a100.yaml")
    cluster = Cluster.from_spec(spec)
    workload = _workload(
        _job("a", gpus=1, accelerators=("a100",)),
        _job("b", gpus=1, accelerators=("a100",)),
        _job("c", gpus=1, accelerators=("a100", "a100-sxm4-80gb")),  # one matches: fine
        _job("d", mig_profile="7g.80gb"),
        _job("e", gpus=1),
    )
    lines = placement_warnings(cluster, workload)
    assert len(lines) == 2
    assert lines[0].startswith("2 jobs ask for a100,")
    assert "MIG slice 7g.80gb" in lines[1]
    whole = Cluster(("node",), (Node("n", "x", 1),))
    (line,) = placement_warnings(whole, _workload(_job("f", gpu_fraction=0.5)))
    assert line.startswith("1 job asks for a GPU fraction; no node of the cluster shares GPUs")
    # the simulator re-cuts idle MIG GPUs: a 7g.80gb job ran after a re-cut it was warned of
    recut = placement_warnings(cluster, workload, recut=True)
    assert len(recut) == 1
    assert not any("MIG slice" in line for line in recut)
    (never,) = placement_warnings(whole, _workload(_job("g", mig_profile="1g.10gb")), recut=True)
    assert "no GPU of the cluster is cut into or can be re-cut into" in never


def test_load_workload_generator_per_seed_and_trace_fixed(files: dict[str, Path]) -> None:
    a = load_workload(files["workload"], None, 1)
    b = load_workload(files["workload"], None, 1)
    c = load_workload(files["workload"], None, 2)
    assert a.jobs == b.jobs
    assert a.jobs != c.jobs
    source = workload_source(OPENB_PODS, "openb", nodes=OPENB_NODES)
    assert not source.varies_with_seed
    assert source.draw(0) is source.draw(5)
    assert len(source.draw(0).nodes) == 3
    with pytest.raises(UnknownNameError):
        load_workload(OPENB_PODS, "phily", 0)
    with pytest.raises(UserError, match="--trace-nodes is for openb"):
        workload_source(OPENB_PODS, "sacct", nodes=OPENB_NODES)


def test_experiment_fragmentation_runs_from_the_cli_and_prints_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpufleet.cli.main import main

    code = main(
        ["simulate", "experiment", "fragmentation", "--profiles", "best-fit,random-fit",
         "--points", "3", "--format", "json"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    assert set(data["results"]) == {"best-fit", "random-fit"}
    assert 0 < data["results"]["best-fit"]["allocated_share"] <= 1


def test_an_unknown_experiment_is_refused_with_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpufleet.cli.main import main

    assert main(["simulate", "experiment", "fragmentaton"]) == 2
    assert "did you mean 'fragmentation'" in capsys.readouterr().err


def _compare_pollux(out: Path, *extra: str) -> int:
    """`simulate compare` of fifo and tiresias on the first Pollux workload, JSON on stdout."""
    args = ["simulate", "compare", "trace", "bundled:pollux-1", "--profiles", "fifo,tiresias"]
    return main([*args, "--restart-overhead", "30s", "--format", "json", "--out", str(out), *extra])


def test_a_pollux_workload_replays_on_its_own_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 29: the paper's workloads ship with gpufleet; `compare` prints the mean JCT the
    paper reports, and tiresias preempts where fifo does not."""
    assert _compare_pollux(tmp_path / "out") == 0
    summary = json.loads(capsys.readouterr().out)
    text = json.dumps(summary)
    assert "jct_s.mean" in text
    runs = json.loads((tmp_path / "out" / "compare.json").read_text("utf-8"))
    assert "tiresias" in json.dumps(runs)
    # a fixed trace with nothing random: one run per profile, not three identical ones
    assert runs["seeds"] == [0]


@pytest.mark.parametrize("value", ["-5s", "soon"])
def test_a_bad_restart_overhead_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "trace", "bundled:pollux-1", "--restart-overhead", value]) == 2
    assert "--restart-overhead" in capsys.readouterr().err


def test_jobs_out_writes_one_row_per_completed_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 29: the per-job records papers tabulate, with JCT = wait + run time and
    slowdown = JCT ÷ run time; the makespan and slowdown are in the metrics too."""
    path = tmp_path / "jobs.csv"
    code = main(
        ["simulate", "trace", "bundled:pollux-1", "--format", "json", "--jobs-out", str(path)]
    )
    assert code == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    with path.open(encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == metrics["jobs_completed"] == 160
    for r in rows:
        wait, jct, run = float(r["wait_s"]), float(r["jct_s"]), float(r["duration_s"])
        assert wait == pytest.approx(float(r["first_start_s"]) - float(r["submit_s"]))
        assert jct == pytest.approx(float(r["end_s"]) - float(r["submit_s"]))
        assert jct >= wait + run - 1e-6  # never faster than its run time (fifo: no restarts)
        assert float(r["slowdown"]) == pytest.approx(jct / run)
        assert int(r["attempts"]) == 1
    ends = [float(r["end_s"]) for r in rows]
    first = min(float(r["submit_s"]) for r in rows)
    assert metrics["makespan_s"] == pytest.approx(max(ends) - first)
    mean = sum(float(r["jct_s"]) for r in rows) / len(rows)
    assert metrics["jct_s"]["mean"] == pytest.approx(mean)


def test_jobs_out_refuses_an_unknown_suffix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "trace", "bundled:pollux-1", "--jobs-out", "jobs.txt"]) == 2
    assert ".csv or .parquet" in capsys.readouterr().err
    out = tmp_path / "cmp"
    args = ["simulate", "compare", "trace", "bundled:pollux-1", "--profiles", "fifo"]
    assert main([*args, "--out", str(out), "--jobs-out", "jobs.txt"]) == 2
    assert ".csv or .parquet" in capsys.readouterr().err
    assert not out.exists()  # refused before anything ran or was written


def test_an_output_that_cannot_be_written_exits_2_and_leaves_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --jobs-out or --out under a file (not a folder) is the user's to change: exit 2, a
    message naming the path, no traceback; and the other output, written first, is undone."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    run = ["simulate", "run", "trace", "bundled:pollux-1"]
    assert main([*run, "--jobs-out", str(blocker / "jobs.csv")]) == 2
    err = capsys.readouterr().err
    assert f"--jobs-out {blocker / 'jobs.csv'}: cannot write there ({blocker} is not a" in err
    assert "Traceback" not in err
    assert "simulating" not in err  # refused before the run, as the guide says
    jobs = tmp_path / "jobs.csv"
    assert main([*run, "--out", str(blocker / "out"), "--jobs-out", str(jobs)]) == 2
    assert f"--out {blocker / 'out'}: cannot write there" in capsys.readouterr().err
    assert not jobs.exists()
    assert _compare_pollux(blocker / "out", "--jobs-out", str(jobs)) == 2
    assert f"--out {blocker / 'out'}: cannot write there" in capsys.readouterr().err
    assert not jobs.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_compare_jobs_out_gives_every_runs_jobs_as_its_summary_counts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A researcher setting a policy beside a paper's reads per-job rows of each profile: the
    rows of each run give the mean JCT and wait, the preemptions and the makespan that
    compare.json reports for it (recomputed here from submit, first start and end)."""
    path = tmp_path / "jobs.csv"
    assert _compare_pollux(tmp_path / "cmp", "--jobs-out", str(path)) == 0
    summary = json.loads(capsys.readouterr().out)["metrics"]
    with path.open(encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    assert {r["seed"] for r in rows} == {"0"}  # a fixed trace runs once per profile
    for profile in ("fifo", "tiresias"):
        mine = [r for r in rows if r["profile"] == profile]
        got = summary[profile]
        assert len(mine) == got["jobs_completed"]["mean"] == 160
        jct = [float(r["end_s"]) - float(r["submit_s"]) for r in mine]
        wait = [float(r["first_start_s"]) - float(r["submit_s"]) for r in mine]
        assert got["jct_s.mean"]["mean"] == pytest.approx(sum(jct) / len(jct))
        assert got["wait_s.mean"]["mean"] == pytest.approx(sum(wait) / len(wait))
        restarts = sum(int(r["attempts"]) - 1 for r in mine)
        assert got["preemptions"]["mean"] == restarts
        span = max(float(r["end_s"]) for r in mine) - min(float(r["submit_s"]) for r in mine)
        assert got["makespan_s"]["mean"] == pytest.approx(span)
    # tiresias preempts on this workload (issue 29): the rows show it
    assert any(int(r["attempts"]) > 1 for r in rows if r["profile"] == "tiresias")
