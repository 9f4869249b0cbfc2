"""Trace readers: each format's fixture maps to exact jobs, every row is accounted for, bad
files are UserErrors naming what is missing, and the native format round-trips."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import tempfile
from importlib import resources
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.errors import UnknownNameError, UserError
from gpufleet.sim.traces import (
    READERS,
    bundled_openb,
    bundled_openb_nodes,
    read_native,
    read_openb,
    read_openb_nodes,
    read_trace,
    write_native,
)
from gpufleet.sim.traces.sacct import gpus_from_tres
from gpufleet.sim.workload import TraceJob, TraceNode, Workload

DATA = Path(__file__).parent / "data"
OPENB_PODS = DATA / "openb_pods_sample.csv"
OPENB_NODES = DATA / "openb_nodes_sample.csv"
PHILLY = DATA / "philly_sample.json"
HELIOS = DATA / "helios_sample.csv"
SACCT = DATA / "sacct_sample.txt"
NATIVE = DATA / "native_sample.csv"

SHIFTED = re.compile(r"arrival times shifted by [-+][\d,]+ s so the first is at 0")


def _shift_note(workload: Workload) -> tuple[str, int]:
    notes = [(k, n) for k, n in workload.report.cleaned.items() if SHIFTED.fullmatch(k)]
    assert len(notes) == 1, workload.report.cleaned
    return notes[0]


def _cleaned_without_shift(workload: Workload) -> dict[str, int]:
    return {k: n for k, n in workload.report.cleaned.items() if not SHIFTED.fullmatch(k)}


def _brief(workload: Workload) -> list[tuple[str, str, float, float, int | None, int]]:
    return [(j.name, j.team, j.submit_s, j.duration_s, j.gpus, j.workers) for j in workload.jobs]


# --- openb ---------------------------------------------------------------------------


def test_openb_pods_become_whole_gpus_fractions_and_type_constraints() -> None:
    w = read_openb(OPENB_PODS, OPENB_NODES)
    t0 = 9437497.0
    assert w.jobs == (
        TraceJob("openb-pod-0017", "openb", 0.0, 10769854 - t0, gpus=8),
        TraceJob("openb-pod-0022", "openb", 9679175 - t0, 294651.0, gpus=None, gpu_fraction=0.22),
        TraceJob(
            "openb-pod-0035",
            "openb",
            9967058 - t0,
            9968575 - 9967063,
            gpus=1,
            accelerators=("openb-V100M16", "openb-V100M32"),
            kind="inference",
        ),
        # never scheduled (Pending): duration from creation
        TraceJob(
            "openb-pod-0041", "openb", 9970000 - t0, 10000.0, gpus=None, gpu_fraction=0.5,
            kind="inference",
        ),
        TraceJob("openb-pod-0042", "openb", 9971000 - t0, 990.0, 2, accelerators=("openb-G2",)),
        TraceJob("openb-pod-0046", "openb", 9976000 - t0, 9900.0, 4, accelerators=("openb-T4",)),
    )  # fmt: skip


def test_openb_report_names_every_dropped_pod_and_every_change() -> None:
    w = read_openb(OPENB_PODS, OPENB_NODES)
    assert (w.report.rows, w.report.kept) == (10, 6)
    assert dict(w.report.dropped) == {
        "CPU-only pod (num_gpu 0)": 1,
        "non-positive duration (deletion_time not after start)": 1,
        "no deletion_time": 1,
        "gpu_milli of a one-GPU pod is not positive": 1,
    }
    assert _cleaned_without_shift(w) == {
        "never scheduled (no scheduled_time): duration from creation_time": 1,
        "kept a Failed pod (it held its GPUs until deleted)": 1,
        "single tenant: team 'openb' (the trace has no teams)": 6,
    }
    assert _shift_note(w) == ("arrival times shifted by -9,437,497 s so the first is at 0", 6)


def test_openb_node_list_keeps_gpu_nodes_with_prefixed_models() -> None:
    assert read_openb_nodes(OPENB_NODES) == (
        TraceNode("openb-node-0228", "openb-G3", 8),
        TraceNode("openb-node-0229", "openb-V100M32", 8),
        TraceNode("openb-node-0230", "openb-P100", 2),
    )
    assert read_openb(OPENB_PODS, OPENB_NODES).nodes == read_openb_nodes(OPENB_NODES)


def test_openb_without_a_node_list_uses_the_bundled_gpu_nodes() -> None:
    assert read_openb(OPENB_PODS).nodes == bundled_openb_nodes()
    assert read_trace(OPENB_PODS, "openb").nodes == bundled_openb_nodes()


def test_bundled_openb_reads_all_8152_pods_and_keeps_the_gpu_ones() -> None:
    # its speed is `make bench`'s (sim-openb-replay-*): a wall-clock bound here flakes on
    # a loaded CI machine
    w = bundled_openb()
    assert (w.report.rows, w.report.kept, len(w.jobs)) == (8152, 7063, 7063)
    assert dict(w.report.dropped) == {
        "CPU-only pod (num_gpu 0)": 1088,
        "non-positive duration (deletion_time not after start)": 1,
    }
    assert _cleaned_without_shift(w) == {
        "kept a Failed pod (it held its GPUs until deleted)": 1869,
        "never scheduled (no scheduled_time): duration from creation_time": 860,
        "single tenant: team 'openb' (the trace has no teams)": 7063,
    }
    assert w.jobs[0].submit_s == 0.0  # the trace already starts at 0: no shift
    whole = [j for j in w.jobs if j.gpus]
    shared = [j for j in w.jobs if j.gpu_fraction]
    assert (len(whole), len(shared)) == (3986, 3077)
    assert sum(j.gpus * j.workers for j in whole if j.gpus) == 4355
    assert round(sum(j.gpu_fraction for j in shared if j.gpu_fraction) * 1000) == 1_731_570
    assert {j.kind for j in w.jobs} == {"inference", "batch"}


def test_bundled_openb_cluster_is_1213_gpu_nodes_with_6212_gpus() -> None:
    nodes = bundled_openb_nodes()
    assert len(nodes) == 1213
    assert sum(n.gpus for n in nodes) == 6212
    by_type: dict[str, int] = {}
    for n in nodes:
        by_type[n.accelerator] = by_type.get(n.accelerator, 0) + 1
    assert by_type == {
        "openb-G2": 549,
        "openb-T4": 404,
        "openb-P100": 134,
        "openb-V100M16": 55,
        "openb-G3": 39,
        "openb-V100M32": 30,
        "openb-A10": 2,
    }


def test_bundled_openb_files_are_the_originals_named_in_provenance() -> None:
    folder = resources.files("gpufleet").joinpath("data", "traces", "openb")
    provenance = folder.joinpath("PROVENANCE.md").read_text("utf-8")
    for name in ("openb_node_list_gpu_node.csv", "openb_pod_list_default.csv"):
        original = gzip.decompress(folder.joinpath(f"{name}.gz").read_bytes())
        digest = hashlib.sha256(original).hexdigest()
        assert f"`{name}`" in provenance
        assert digest in provenance, name
    assert "no licence file" in provenance


# --- Philly --------------------------------------------------------------------------


def test_philly_jobs_take_the_first_attempts_hosts_as_workers() -> None:
    w = read_trace(PHILLY, "philly")
    assert _brief(w) == [
        ("application_1506638472019_10238", "ee9e8c", 0.0, 84.0, 1, 1),
        ("application_1506638472019_10239", "6214e9", 152.0, 20743.0, 8, 1),
        ("application_1506638472019_10240", "ee9e8c", 322.0, 75878.0, 8, 2),  # 2 hosts × 8
        ("application_1506638472019_10241", "b436b2", 666.0, 947.0, 4, 1),  # 3 attempts
        ("application_1506638472019_10242", "6214e9", 1822.0, 7200.0, 8, 2),  # 8 + 4: uneven
        ("application_1506638472019_10243", "103959", 3622.0, 1800.0, 2, 1),  # no submit time
        ("application_1506638472019_10247", "103959", 6022.0, 1198.0, 2, 1),  # GPUs in 2nd try
        ("application_1506638472019_10250", "b436b2", 10822.0, 172800.0, 8, 4),
        ("application_1506638472019_10251", "103959", 12622.0, 1800.0, 2, 1),
        ("application_1506638472019_10252", "ee9e8c", 14422.0, 10800.0, 4, 2),
    ]
    assert {j.kind for j in w.jobs} == {"training"}
    assert w.jobs[0].user == "user-3f1a"


def test_philly_report_counts_unfinished_unstarted_and_killed_jobs() -> None:
    w = read_trace(PHILLY, "philly")
    assert (w.report.rows, w.report.kept) == (15, 10)
    assert dict(w.report.dropped) == {
        "never started (no attempts)": 1,
        "last attempt has no end_time (still running at the trace's end?)": 1,
        "first attempt has no start_time": 1,
        "no GPUs recorded in any attempt": 1,
        "non-positive duration": 1,
    }
    assert _cleaned_without_shift(w) == {
        "uneven GPUs per host: every worker given the largest host's count": 1,
        "no submitted_time: arrival at the first attempt's start": 1,
        "first attempt lists no GPUs: request from a later attempt": 1,
        "several attempts: duration from the first start to the last end": 3,
        "kept a killed/failed job (it used GPUs until it ended)": 4,
    }
    assert _shift_note(w)[1] == 10


# --- Helios / Acme -------------------------------------------------------------------


def test_helios_jobs_spread_gpus_over_nodes() -> None:
    w = read_trace(HELIOS, "helios")
    assert _brief(w) == [
        ("1001", "vc6YE", 0.0, 3600.0, 8, 1),
        ("1003", "vcEwI", 150.0, 43200.0, 8, 2),
        ("1004", "vcEwI", 300.0, 1800.0, 2, 2),  # 3 GPUs on 2 nodes: rounded up
        ("1006", "vcKrW", 420.0, 120.0, 1, 1),
        ("1007", "vc6YE", 480.0, 7200.0, 2, 1),  # no duration: end − start
        ("1009", "vcHvQ", 540.0, 600.0, 4, 1),  # node_num 0
        ("1010", "vcEwI", 600.0, 604800.0, 8, 1),
        ("1001~2", "vcHvQ", 840.0, 1800.0, 2, 1),  # a repeated job_id, renamed
        ("1013", "vc6YE", 900.0, 300.0, 1, 1),  # no submit_time: arrives at start
        ("1014", "vcEwI", 960.0, 86400.0, 8, 8),
    ]


def test_helios_report_counts_cpu_jobs_cancellations_and_fixes() -> None:
    w = read_trace(HELIOS, "helios")
    assert (w.report.rows, w.report.kept) == (13, 10)
    assert dict(w.report.dropped) == {
        "CPU job (gpu_num 0)": 1,
        "non-positive duration": 1,
        "unreadable submit_time": 1,
    }
    assert _cleaned_without_shift(w) == {
        "gpu_num not divisible by node_num: GPUs per node rounded up": 1,
        "kept a cancelled/failed/timed-out job (it ran until it ended)": 2,
        "no duration: end_time − start_time": 1,
        "no submit_time: arrival at start_time": 1,
        "node_num missing or 0: one node assumed": 1,
        "renamed a repeated job name (suffix ~2, ~3, ...)": 1,
    }


def test_helios_reads_epoch_seconds_like_date_times(tmp_path: Path) -> None:
    epoch = tmp_path / "acme.csv"
    epoch.write_text(
        "job_id,user,vc,gpu_num,node_num,submit_time,start_time,end_time,duration,state\n"
        "a,u1,vcA,8,1,1585699200,1585699205,1585702805,,COMPLETED\n"
        "b,u1,vcA,16,2,1585699350,1585699830,1585743030,43200,COMPLETED\n",
        encoding="utf-8",
    )
    assert _brief(read_trace(epoch, "helios")) == [
        ("a", "vcA", 0.0, 3600.0, 8, 1),
        ("b", "vcA", 150.0, 43200.0, 8, 2),
    ]


# --- Slurm sacct ---------------------------------------------------------------------


def test_sacct_jobs_take_gpus_from_alloc_tres_and_estimates_from_timelimit() -> None:
    w = read_trace(SACCT, "sacct")
    rows = [
        (*b, j.accelerators, j.runtime_estimate_s) for b, j in zip(_brief(w), w.jobs, strict=True)
    ]
    assert rows == [
        ("4100", "nlp", 0.0, 86400.0, 8, 4, ("h100",), 172800.0),
        ("4101", "vision", 300.0, 1800.0, 1, 1, (), 3600.0),
        ("4105", "nlp", 1800.0, 7207.0, 4, 1, ("a100",), 7200.0),  # TIMEOUT, kept
        ("4106", "vision", 2400.0, 190.0, 1, 1, (), 1800.0),  # Timelimit 30:00 = MM:SS
        ("4107", "speech", 3000.0, 1800.0, 3, 3, (), 14400.0),  # 8 GPUs on 3 nodes
        ("4108_1", "vision", 3600.0, 1200.0, 1, 1, (), None),  # Partition_Limit
        ("4108_2", "vision", 3600.0, 1530.0, 1, 1, (), None),
        ("4109", "unassigned", 4200.0, 7200.0, 1, 1, (), 28800.0),  # no Account
        ("4111", "speech", 4800.0, 600.0, 2, 1, (), 3600.0),  # GPUs from ReqTRES
        ("4112", "speech", 5400.0, 183845.0, 8, 8, ("h100",), 259200.0),  # 2-03:04:05
    ]
    assert w.jobs[1].user == "bob"


def test_sacct_report_skips_steps_pending_running_and_cpu_jobs() -> None:
    w = read_trace(SACCT, "sacct")
    assert (w.report.rows, w.report.kept) == (16, 10)
    assert dict(w.report.dropped) == {
        "job step (its job is counted on its own row)": 2,
        "never started (Start Unknown or None)": 2,
        "no End (still pending or running)": 1,
        "no GPUs allocated (CPU job)": 1,
    }
    assert _cleaned_without_shift(w) == {
        "GPUs not divisible by NNodes: GPUs per node rounded up": 1,
        "empty AllocTRES: GPUs from ReqTRES": 1,
        "kept a cancelled/failed/timed-out job (it ran until it ended)": 4,
        "no Account: team 'unassigned'": 1,
    }


@pytest.mark.parametrize(
    ("tres", "expected"),
    [
        ("cpu=8,gres/gpu=4,mem=64G", (4, ())),
        ("cpu=8,gres/gpu:a100=4,gres/gpu=4,node=1", (4, ("a100",))),
        ("gres/gpu:a100=2,gres/gpu:h100=4", (6, ("a100", "h100"))),
        ("billing=16,cpu=16,gres/gpumem=80G,gres/gpuutil=50,mem=64G", (0, ())),
        ("cpu=16,mem=64G", (0, ())),
    ],
    ids=["untyped", "typed-and-total", "two-types-summed", "gpumem-is-not-a-count", "cpu-only"],
)
def test_sacct_tres_strings_give_gpu_counts_and_types(
    tres: str, expected: tuple[int, tuple[str, ...]]
) -> None:
    assert gpus_from_tres(tres) == expected


# --- native --------------------------------------------------------------------------


def test_native_csv_reads_every_request_form_and_defaults_empty_cells() -> None:
    w = read_trace(NATIVE, "gpufleet")
    assert w.jobs == (
        TraceJob(
            "pretrain", "research", 0.0, 86400.0, gpus=8, workers=4,
            accelerators=("h100-sxm5-80gb",), kind="training", priority_class="high",
            user="alice", project="llm", runtime_estimate_s=90000.0,
            checkpoint_interval_s=3600.0, busy_fraction=0.85,
        ),
        TraceJob(
            "chat", "prod", 10.5, 3600.0, gpus=None, mig_profile="3g.40gb",
            accelerators=("a100-sxm4-80gb", "h100-sxm5-80gb"), kind="inference",
            preemptible=False, slo_ttft_ms=200.0,
        ),
        TraceJob(
            "notebook", "research", 20.0, 1800.0, gpus=None, gpu_fraction=0.25,
            kind="interactive", user="bob",
        ),
        TraceJob("sweep-1", "research", 30.0, 600.0, gpus=1),
    )  # fmt: skip
    assert dict(w.report.dropped) == {
        "more than one request (give one of gpus, gpu_fraction, mig_profile)": 1,
        "non-positive duration": 1,
        "unknown kind 'serving'": 1,
        "no request (none of gpus, gpu_fraction, mig_profile)": 1,
        "several workers of a fraction or MIG slice": 1,
        "unreadable submit_s": 1,
    }
    assert dict(w.report.cleaned) == {}  # native times are not shifted


def test_native_jobs_become_valid_scheduler_job_specs() -> None:
    specs = [j.to_job_spec() for j in read_trace(NATIVE, "gpufleet").jobs]
    assert [s.total_gpus for s in specs] == [32, 0, 0, 1]


def test_native_file_may_hold_only_the_required_columns(tmp_path: Path) -> None:
    path = tmp_path / "few.csv"
    path.write_text("name,team,submit_s,duration_s,gpus\nj,t,5,60,2\n", encoding="utf-8")
    assert read_native(path).jobs == (TraceJob("j", "t", 5.0, 60.0, gpus=2),)


STRATEGY_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")),
    min_size=1,
    max_size=12,
).filter(lambda s: s.strip() == s)
POSITIVE = st.floats(min_value=1e-3, max_value=1e9, allow_nan=False, allow_infinity=False)
WITHIN_A_TRACE = st.floats(min_value=1e-3, max_value=3e8)  # a job of 10 years at most


@st.composite
def trace_jobs(draw: st.DrawFn) -> TraceJob:
    form = draw(st.sampled_from(["gpus", "fraction", "mig"]))
    request: dict[str, object] = {"gpus": None}
    if form == "gpus":
        request = {"gpus": draw(st.integers(1, 16)), "workers": draw(st.integers(1, 64))}
    elif form == "fraction":
        request["gpu_fraction"] = draw(st.floats(min_value=0.001, max_value=0.999))
    else:
        request["mig_profile"] = draw(st.sampled_from(["1g.10gb", "3g.40gb", "7g.80gb"]))
    optional_text = st.none() | STRATEGY_TEXT
    optional_positive = st.none() | POSITIVE
    return TraceJob(
        name=draw(STRATEGY_TEXT),
        team=draw(STRATEGY_TEXT),
        submit_s=draw(st.floats(min_value=0, max_value=3e8)),
        duration_s=draw(WITHIN_A_TRACE),
        accelerators=tuple(draw(st.lists(STRATEGY_TEXT.filter(lambda s: "|" not in s)))),
        kind=draw(st.sampled_from(["training", "inference", "interactive", "batch"])),
        priority_class=draw(optional_text),
        user=draw(optional_text),
        project=draw(optional_text),
        runtime_estimate_s=draw(optional_positive),
        checkpoint_interval_s=draw(optional_positive),
        preemptible=draw(st.booleans()),
        busy_fraction=draw(st.none() | st.floats(min_value=0, max_value=1)),
        slo_ttft_ms=draw(optional_positive),
        **request,  # type: ignore[arg-type]
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(trace_jobs(), max_size=8, unique_by=lambda j: j.name))
def test_native_csv_and_parquet_round_trip_any_valid_jobs(jobs: list[TraceJob]) -> None:
    expected = tuple(sorted(jobs, key=lambda j: (j.submit_s, j.name)))
    with tempfile.TemporaryDirectory() as folder:
        for name in ("w.csv", "w.csv.gz", "w.parquet"):
            path = Path(folder) / name
            write_native(jobs, path)
            w = read_native(path)
            assert w.jobs == expected, name
            assert (w.report.rows, w.report.kept, dict(w.report.dropped)) == (
                len(jobs),
                len(jobs),
                {},
            )


def test_a_converted_trace_saved_as_native_reads_back_the_same(tmp_path: Path) -> None:
    philly = read_trace(PHILLY, "philly")
    write_native(philly.jobs, tmp_path / "philly.parquet")
    assert read_trace(tmp_path / "philly.parquet", "gpufleet").jobs == philly.jobs


def test_native_parquet_accepts_a_list_column_of_accelerators(tmp_path: Path) -> None:
    path = tmp_path / "list.parquet"
    table = pa.table(
        {
            "name": ["a"],
            "team": ["t"],
            "submit_s": [0],  # an integer column is fine for seconds
            "duration_s": [60.0],
            "gpus": [2],
            "accelerators": [["h100-sxm5-80gb", "a100-sxm4-80gb"]],
        }
    )
    pq.write_table(table, path)
    assert read_native(path).jobs == (
        TraceJob("a", "t", 0.0, 60.0, gpus=2, accelerators=("h100-sxm5-80gb", "a100-sxm4-80gb")),
    )


def test_write_native_refuses_a_job_the_reader_would_drop(tmp_path: Path) -> None:
    both = TraceJob("x", "t", 0.0, 60.0, gpus=1, gpu_fraction=0.5)
    with pytest.raises(ValueError, match="more than one request"):
        write_native([both], tmp_path / "x.csv")


# --- every format: accounting and errors ---------------------------------------------

FIXTURES = [
    ("openb", OPENB_PODS),
    ("philly", PHILLY),
    ("helios", HELIOS),
    ("sacct", SACCT),
    ("gpufleet", NATIVE),
]


@pytest.mark.parametrize(("fmt", "path"), FIXTURES, ids=[f for f, _ in FIXTURES])
def test_every_reader_accounts_for_every_row_and_sorts_by_arrival(fmt: str, path: Path) -> None:
    w = read_trace(path, fmt)
    assert w.report.kept + sum(w.report.dropped.values()) == w.report.rows
    assert w.report.kept == len(w.jobs) > 0
    assert w.report.source == path.name
    assert [(j.submit_s, j.name) for j in w.jobs] == sorted((j.submit_s, j.name) for j in w.jobs)
    assert w.jobs[0].submit_s == 0.0
    assert len({j.name for j in w.jobs}) == len(w.jobs)


def test_the_registry_offers_exactly_the_five_formats() -> None:
    assert set(READERS) == {"openb", "philly", "helios", "sacct", "gpufleet"}


def test_an_unknown_format_suggests_the_closest_one() -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'philly'"):
        read_trace(PHILLY, "phily")


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_a_missing_file_is_a_user_error(fmt: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such trace file"):
        read_trace(tmp_path / "nope.csv", fmt)


def _drop_column(text: str, column: str, sep: str) -> str:
    lines = text.splitlines()
    index = lines[0].split(sep).index(column)
    kept = ([c for i, c in enumerate(line.split(sep)) if i != index] for line in lines)
    return "\n".join(sep.join(cells) for cells in kept)


@pytest.mark.parametrize(
    ("fmt", "fixture", "column", "sep"),
    [
        ("openb", OPENB_PODS, "num_gpu", ","),
        ("openb", OPENB_PODS, "deletion_time", ","),
        ("helios", HELIOS, "gpu_num", ","),
        ("helios", HELIOS, "vc", ","),
        ("sacct", SACCT, "AllocTRES", "|"),
        ("sacct", SACCT, "End", "|"),
        ("gpufleet", NATIVE, "duration_s", ","),
        ("gpufleet", NATIVE, "team", ","),
    ],
)
def test_a_file_missing_a_required_column_names_it(
    fmt: str, fixture: Path, column: str, sep: str, tmp_path: Path
) -> None:
    path = tmp_path / fixture.name
    path.write_text(_drop_column(fixture.read_text("utf-8"), column, sep), encoding="utf-8")
    with pytest.raises(UserError, match=f"missing column '{column}'"):
        read_trace(path, fmt)


def test_a_philly_log_without_job_fields_names_the_field(tmp_path: Path) -> None:
    records = json.loads(PHILLY.read_text("utf-8"))
    for record in records:
        del record["attempts"]
    path = tmp_path / "philly.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(UserError, match="no field 'attempts'"):
        read_trace(path, "philly")


def test_helios_needs_a_duration_or_start_and_end_columns(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("job_id,vc,gpu_num,node_num,submit_time,start_time\n", encoding="utf-8")
    with pytest.raises(UserError, match="'duration' or 'start_time'\\+'end_time'"):
        read_trace(path, "helios")


def test_a_native_file_without_any_request_column_says_which_it_needs(tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    path.write_text("name,team,submit_s,duration_s\nj,t,0,60\n", encoding="utf-8")
    with pytest.raises(UserError, match="'gpus' or 'gpu_fraction' or 'mig_profile'"):
        read_trace(path, "gpufleet")


def test_a_native_column_typo_gets_a_suggestion(tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    path.write_text("name,team,submit_s,duration_s,gpu\nj,t,0,60,1\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"unknown column 'gpu' \(did you mean 'gpus'\?\)"):
        read_trace(path, "gpufleet")


def test_every_unknown_native_column_is_named_with_what_it_means(tmp_path: Path) -> None:
    """Issue 29: a Pollux-style header got 'runtime_estimate_s' suggested for 'time' (by
    spelling) and only the first of its four unknown columns named."""
    path = tmp_path / "n.csv"
    path.write_text(
        "name,time,application,num_replicas,batch_size\nj,0,bert,1,32\n", encoding="utf-8"
    )
    with pytest.raises(UserError) as exc:
        read_trace(path, "gpufleet")
    message = str(exc.value)
    assert "'time' (did you mean 'submit_s'?)" in message
    assert "'num_replicas' (did you mean 'workers'?)" in message
    assert "'application'" in message
    assert "'batch_size'" in message


BAD_FILES: list[tuple[str, str, bytes, str]] = [
    ("binary", "x.csv", bytes(range(256)) * 4, "not UTF-8"),
    ("empty", "x.csv", b"", "empty file"),
    ("bad-gzip", "x.csv.gz", b"not gzip at all", "broken gzip"),
]
CSV_FORMATS = ("openb", "helios", "sacct", "gpufleet")


@pytest.mark.parametrize(
    ("fmt", "name", "content", "message"),
    [(fmt, name, data, msg) for fmt in CSV_FORMATS for _, name, data, msg in BAD_FILES],
    ids=[f"{fmt}-{kind}" for fmt in CSV_FORMATS for kind, *_ in BAD_FILES],
)
def test_a_file_that_is_not_text_or_is_empty_is_a_user_error(
    fmt: str, name: str, content: bytes, message: str, tmp_path: Path
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(UserError, match=message):
        read_trace(path, fmt)


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "invalid JSON"), ('{"jobid": 1}', "top level is not an array")],
    ids=["broken", "object"],
)
def test_a_philly_file_that_is_not_a_job_array_is_a_user_error(
    content: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "p.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        read_trace(path, "philly")


def test_a_file_that_is_not_parquet_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    path.write_text("name,team\n", encoding="utf-8")
    with pytest.raises(UserError, match="not a Parquet file"):
        read_trace(path, "gpufleet")


def test_a_native_trace_with_another_suffix_is_a_user_error() -> None:
    with pytest.raises(UserError, match=r"\.csv, \.csv\.gz or \.parquet"):
        read_trace(PHILLY, "gpufleet")


def test_a_row_with_more_cells_than_columns_is_dropped_not_misread(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    path.write_text(
        "name,team,submit_s,duration_s,gpus\nok,t,0,60,1\nshifted,t,0,60,1,extra\n",
        encoding="utf-8",
    )
    w = read_native(path)
    assert [j.name for j in w.jobs] == ["ok"]
    assert dict(w.report.dropped) == {"more cells than columns (unquoted separator?)": 1}


def test_sacct_parsable_with_trailing_separators_reads_like_parsable2(tmp_path: Path) -> None:
    path = tmp_path / "trailing.sacct"
    lines = SACCT.read_text("utf-8").splitlines()
    path.write_text("".join(f"{line}|\n" for line in lines), encoding="utf-8")
    assert read_trace(path, "sacct").jobs == read_trace(SACCT, "sacct").jobs


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1-00:00:00", 86400.0),
        ("00:30:00", 1800.0),
        ("59:59", 3599.0),
        ("2-23:59", 259_140.0),
        ("90", 5400.0),
        ("12:00:00.5", 43_200.5),
    ],
)
def test_slurm_clocks_read_as_slurm_prints_them(text: str, seconds: float) -> None:
    from gpufleet.sim.traces._common import parse_clock_s

    assert parse_clock_s(text, "Elapsed") == seconds


@pytest.mark.parametrize(
    "text", ["99:99:99", "01:60:00", "00:00:60", "1-24:00:00", "0-25:00:00", "61:75"]
)
def test_an_impossible_slurm_clock_is_unreadable(text: str) -> None:
    """`99:99:99` read as 4 days 4 h (it was accepted); no field after the first passes 59."""
    from gpufleet.sim.traces._common import CellError, parse_clock_s

    with pytest.raises(CellError, match="unreadable Elapsed"):
        parse_clock_s(text, "Elapsed")


def test_a_job_lasting_or_arriving_past_ten_years_is_dropped_with_its_reason(
    tmp_path: Path,
) -> None:
    """A duration of 1e10 s was kept, and the run's 10-minute samples over it exhausted
    memory (killed, no message); such rows are dropped and counted like any bad row."""
    path = tmp_path / "long.csv"
    path.write_text(
        "name,team,submit_s,duration_s,gpus\n"
        "ok,a,0,3600,1\n"
        "forever,a,0,1e10,1\n"
        "late,a,1e12,3600,1\n",
        encoding="utf-8",
    )
    w = read_trace(path, "gpufleet")
    assert [j.name for j in w.jobs] == ["ok"]
    assert dict(w.report.dropped) == {
        "duration over 10 years": 1,
        "submit time over 10 years after the trace's start": 1,
    }
