"""GPU readings in the store: attributed to holders, billed as used GPU-hours, rolled up, idle.

Each test checks a figure against an independent calculation: the busy share the
readings were made with, times the GPU-seconds the job held.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import func, select

from gpufleet.control import telemetry_rollup as rollup
from gpufleet.control import telemetry_series as tseries
from gpufleet.control import telemetry_store as ts
from gpufleet.control.models import GpuLatest, GpuSample, GpuSample5m, Job, Team, UsageEntry
from gpufleet.telemetry.samples import GpuSample as GpuReading

from .conftest import Plane
from .test_flow import job, submit

CONFIG = ts.TelemetryConfig(interval_s=15, idle_threshold_pct=5, idle_after_s=600, max_gap_s=60)


def Reading(node: str, gpu: int, util: float) -> GpuReading:  # noqa: N802 - reads as a record
    return GpuReading(
        time_s=0.0,
        node=node,
        gpu_index=gpu,
        source="test",
        sm_util_pct=util,
        mem_used_bytes=10 * 2**30,
        mem_total_bytes=80 * 2**30,
        power_w=400.0,
        temp_c=60.0,
    )


def _all_gpus(plane: Plane, busy: dict[tuple[str, int], float]) -> list[Reading]:
    """A reading of every GPU of the h100 nodes: `busy` where given, else 0 %."""
    return [
        Reading(f"h100-{n}", g, busy.get((f"h100-{n}", g), 0.0)) for n in range(2) for g in range(8)
    ]


def _placed(plane: Plane, job_id: int) -> list[tuple[str, int]]:
    got = job(plane, "vision-member", job_id)
    return [(p["node"], g) for p in got["placement"] for g in p["gpus"]]


def _run(plane: Plane, seconds: float, util: dict[tuple[str, int], float]) -> None:
    """Read every 15 s for `seconds`, reconciling as the loop does."""
    for _ in range(round(seconds / 15)):
        plane.cycle(15)
        with plane.sessions.begin() as s:
            ts.ingest(s, _all_gpus(plane, util), plane.clock(), CONFIG)


def test_used_gpu_hours_are_held_hours_times_busy_share(plane: Plane) -> None:
    j = submit(plane, "vision-member", name="a", gpus=4, runtime_estimate_s=1200)["id"]
    plane.cycle()
    plane.cycle(1)
    gpus = _placed(plane, j)
    # two GPUs at 90 %, two at 30 %: 60 % busy on average
    util = {g: (90.0 if i < 2 else 30.0) for i, g in enumerate(gpus)}
    _run(plane, 1200, util)
    assert job(plane, "vision-member", j)["state"] == "succeeded"
    with plane.sessions() as s:
        row = s.scalars(select(UsageEntry).where(UsageEntry.job_id == j)).one()
        held = row.gpu_milli / 1000 * (row.end_s - row.start_s)
        assert row.used_gpu_s is not None
        assert abs(row.used_gpu_s - 0.6 * held) < 1e-6 * held
    js = plane.client.get("/api/v1/reports/chargeback", headers=plane.auth("admin")).json()
    vision = next(r for r in js["rows"] if r["team"] == "vision")
    assert abs(float(vision["gpu_hours_used"]) - 0.6 * float(vision["gpu_hours_allocated"])) < 0.01


def test_a_reading_of_a_free_gpu_belongs_to_no_one(plane: Plane) -> None:
    with plane.sessions.begin() as s:
        report = ts.ingest(s, _all_gpus(plane, {}), plane.clock(), CONFIG)
    assert report.samples == 16
    assert report.unattributed == 16
    with plane.sessions() as s:
        assert s.scalar(select(func.count()).where(GpuSample.job_id.is_not(None))) == 0


def _idle_job(plane: Plane, policy: str) -> int:
    with plane.sessions.begin() as s:
        s.scalars(select(Team).where(Team.name == "vision")).one().idle_policy = policy
    j = submit(plane, "vision-member", name="nb", gpus=1, runtime_estimate_s=7200)["id"]
    plane.cycle()
    plane.cycle(1)
    return int(j)


def test_an_idle_job_is_flagged_once_and_cleared_when_busy(plane: Plane) -> None:
    j = _idle_job(plane, "notify")
    gpu = _placed(plane, j)[0]
    _run(plane, 600 - 15, {gpu: 1.0})  # one reading short of the 10 minutes
    kinds = [e["kind"] for e in job(plane, "vision-member", j)["events"]]
    assert "idle" not in kinds
    _run(plane, 300, {gpu: 1.0})
    events = job(plane, "vision-member", j)["events"]
    assert [e["kind"] for e in events].count("idle") == 1
    idle = next(e for e in events if e["kind"] == "idle")
    assert "under 5 % busy for 10 min" in idle["message"]
    _run(plane, 30, {gpu: 80.0})
    kinds = [e["kind"] for e in job(plane, "vision-member", j)["events"]]
    assert kinds[-1] == "busy"
    assert job(plane, "vision-member", j)["state"] == "running"


def test_reclaim_policy_stops_an_idle_job(plane: Plane) -> None:
    j = _idle_job(plane, "reclaim")
    gpu = _placed(plane, j)[0]
    _run(plane, 600, {gpu: 0.0})
    assert job(plane, "vision-member", j)["state"] == "stopping"
    _run(plane, 60, {gpu: 0.0})
    got = job(plane, "vision-member", j)
    assert got["state"] == "cancelled"
    assert "idle" in got["events"][-1]["message"]


def test_policy_off_never_flags(plane: Plane) -> None:
    j = _idle_job(plane, "off")
    _run(plane, 900, {})
    assert "idle" not in [e["kind"] for e in job(plane, "vision-member", j)["events"]]


def test_roll_up_keeps_means_and_prunes_by_age(plane: Plane) -> None:
    j = submit(plane, "vision-member", name="r", gpus=1, runtime_estimate_s=10**6)["id"]
    plane.cycle()
    plane.cycle(1)
    gpu = _placed(plane, j)[0]
    start = plane.clock()
    for i in range(40):  # 10 minutes: 20 % then 60 %
        plane.clock.advance(15)
        with plane.sessions.begin() as s:
            ts.ingest(s, [Reading(*gpu, 20.0 if i < 20 else 60.0)], plane.clock(), CONFIG)
    with plane.sessions.begin() as s:
        written = rollup.roll_up(s, plane.clock())
        again = rollup.roll_up(s, plane.clock())
    assert written >= 2
    assert again == 0
    with plane.sessions() as s:
        rows = s.scalars(select(GpuSample5m).order_by(GpuSample5m.bucket_s)).all()
        total = sum(r.util_mean_pct * r.samples for r in rows)
        raw = s.scalars(select(GpuSample).where(GpuSample.time_s < rows[-1].bucket_s + 300)).all()
        assert abs(total - sum(r.util_pct for r in raw)) < 1e-6
        assert all(r.job_id == j and r.team == "vision" for r in rows)
        whole = tseries.series(s, start, plane.clock() + 1, 3600)["all"]
        assert len(whole) == 1
        assert abs(whole[0].util_pct - 40.0) < 1e-9
    plane.clock.advance(ts.RAW_KEEP_S + 600)
    with plane.sessions.begin() as s:
        rollup.roll_up(s, plane.clock())
    with plane.sessions() as s:
        assert s.scalar(select(func.count()).select_from(GpuSample)) == 0
        # the roll-ups still answer for the day that is gone
        kept = tseries.series(s, start, start + 700, 3600)["all"]
        assert abs(kept[0].util_pct - 40.0) < 1e-9


def test_series_by_team_and_latest(plane: Plane) -> None:
    a = submit(plane, "vision-member", name="a", gpus=2, runtime_estimate_s=10**5)["id"]
    b = submit(plane, "nlp-member", name="b", gpus=2, runtime_estimate_s=10**5)["id"]
    plane.cycle()
    plane.cycle(1)
    ga = _placed(plane, a)
    got = plane.client.get(f"/api/v1/jobs/{b}", headers=plane.auth("nlp-member")).json()
    gb = [(p["node"], g) for p in got["placement"] for g in p["gpus"]]
    util: dict[tuple[str, int], float] = {**dict.fromkeys(ga, 80.0), **dict.fromkeys(gb, 10.0)}
    start = plane.clock()
    _run(plane, 300, util)
    with plane.sessions() as s:
        teams = tseries.series(s, start, plane.clock() + 1, 60, by_team=True)
        assert {round(p.util_pct) for p in teams["vision"]} == {80}
        assert {round(p.util_pct) for p in teams["nlp"]} == {10}
        assert {round(p.util_pct) for p in teams["unattributed"]} == {0}
        now = {(g.node, g.gpu): g for g in ts.latest(s)}
        assert len(now) == 16
        assert now[ga[0]].team == "vision"
        assert now[ga[0]].util_pct == 80.0
        # the whole cluster's GPUs read per round are all 16, not 16 / 3 keys (a round was
        # counted once per team before)
        whole = tseries.series(s, start, plane.clock() + 1, 60)["all"]
        assert {p.gpus for p in whole} == {16.0}
        assert {p.gpus for p in teams["vision"]} == {2.0}
        assert {p.gpus for p in teams["unattributed"]} == {12.0}
        # the per-team round sums `ingest` wrote give what the raw rows give
        assert teams == tseries.series(s, start, plane.clock() + 1, 60, by_team=True, per_gpu=True)
    plane.clock.advance(ts.RAW_KEEP_S + 600)
    with plane.sessions.begin() as s:
        rollup.roll_up(s, plane.clock())
    with plane.sessions() as s:
        rolled = tseries.series(s, start, start + 300, 60)
        assert rolled["all"]
        assert all(p.gpus == pytest.approx(16.0) for p in rolled["all"])
        assert rolled == tseries.series(s, start, start + 300, 60, per_gpu=True)


def test_latest_is_each_gpus_newest_reading_until_pruned(plane: Plane) -> None:
    """`gpu_latest` holds each GPU's newest reading (what the raw day's newest row says, every
    column: it is copied from that row in the store), and forgets a GPU when its raw rows
    are pruned."""
    lite = plane
    t = lite.clock()
    with lite.sessions.begin() as s:
        ts.ingest(s, _all_gpus(lite, {}), t, CONFIG)
        ts.ingest(s, [Reading("h100-0", 0, 50.0)], t + 200, CONFIG)
        # a second round at the same instant (a clock that did not move): the later reading
        ts.ingest(s, [replace(Reading("h100-0", 0, 40.0), mem_used_bytes=7)], t + 200, CONFIG)
        ts.ingest(s, [Reading("h100-1", 0, 70.0)], t + ts.RAW_KEEP_S, CONFIG)
    with lite.sessions() as s:
        now = {(g.node, g.gpu): (g.time_s, g.util_pct) for g in ts.latest(s)}
        raw = s.execute(select(GpuSample.node, GpuSample.gpu, GpuSample.time_s)).all()
        columns = list(GpuLatest.__table__.columns)
        latest_rows = {(r.node, r.gpu): tuple(r) for r in s.execute(select(*columns))}
        copied = s.execute(
            select(*(GpuSample.__table__.c[c.name] for c in columns)).where(
                GpuSample.node == "h100-0", GpuSample.gpu == 0, GpuSample.mem_used_bytes == 7
            )
        ).one()
    assert latest_rows[("h100-0", 0)] == tuple(copied)
    assert len(now) == 16
    assert now[("h100-0", 0)] == (t + 200, 40.0)
    assert now[("h100-1", 0)] == (t + ts.RAW_KEEP_S, 70.0)
    assert now[("h100-1", 7)] == (t, 0.0)
    newest = {
        (node, gpu): max(u for n, g, u in raw if (n, g) == (node, gpu)) for node, gpu, _ in raw
    }
    assert {k: v[0] for k, v in now.items()} == newest
    with lite.sessions.begin() as s:
        rollup.roll_up(s, t + ts.RAW_KEEP_S + 100)  # prunes the raw rows before t + 100
    with lite.sessions() as s:
        kept = [(g.node, g.gpu) for g in ts.latest(s)]
    assert kept == [("h100-0", 0), ("h100-1", 0)]


def test_config_refuses_nonsense() -> None:
    bad: list[dict[str, Any]] = [{"interval_s": 0}, {"idle_threshold_pct": 120}, {"max_gap_s": -1}]
    for kwargs in bad:
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            ts.TelemetryConfig(**kwargs)


def _one_gpu_at_half(plane: Plane, name: str) -> tuple[int, tuple[str, int]]:
    """A one-GPU job placed and read at 50 % for a minute: its id and its GPU."""
    j = submit(plane, "vision-member", name=name, gpus=1, runtime_estimate_s=10**5)["id"]
    plane.cycle()
    plane.cycle(1)
    gpu = _placed(plane, j)[0]
    _run(plane, 60, {gpu: 50.0})
    return j, gpu


def test_a_new_attempt_starts_its_meters_afresh(lite: Plane) -> None:
    j, _ = _one_gpu_at_half(lite, "x")
    with lite.sessions.begin() as s:
        job_row = s.get(Job, j)
        assert job_row is not None
        assert ts.busy_share(s, j, job_row.attempt) == 0.5
        assert ts.busy_share(s, j, job_row.attempt + 1) is None


def test_a_job_level_reading_stands_for_every_gpu_its_job_holds(lite: Plane) -> None:
    """Slurm's TRES usage is per job: it is spread over the GPUs the job holds in the store."""
    j = submit(lite, "vision-member", name="s", gpus=4, runtime_estimate_s=10**5)["id"]
    lite.cycle()
    lite.cycle(1)
    whole_job = GpuReading(
        time_s=0.0, node="", gpu_index=None, source="slurm", sm_util_pct=70.0, job_id=str(j)
    )
    stranger = GpuReading(
        time_s=0.0, node="", gpu_index=None, source="slurm", sm_util_pct=9.0, job_id="999"
    )
    with lite.sessions.begin() as s:
        report = ts.ingest(s, [whole_job, stranger], lite.clock(), CONFIG)
    assert report.samples == 4
    with lite.sessions() as s:
        rows = s.scalars(select(GpuSample)).all()
        assert {(r.node, r.gpu) for r in rows} == set(_placed(lite, j))
        assert {r.util_pct for r in rows} == {70.0}
        assert all(r.mem_used_bytes is None for r in rows)


def test_the_emulated_source_feeds_the_store_through_the_loop(plane: Plane, cluster: Any) -> None:
    """make_collector -> TelemetryLoop.tick -> store: a training job reads busy, an idle dev
    box reads idle and is flagged, free GPUs read 0 % and belong to no one, MIG slices count
    on their GPU, and nothing is read while another server leads."""
    from gpufleet.control.telemetry_sources import (
        BUSY_PROFILE_ENV,
        TelemetryLoop,
        TelemetryOptions,
        make_collector,
    )

    train = submit(plane, "vision-member", name="t", gpus=4, runtime_estimate_s=10**5)["id"]
    idle = submit(
        plane,
        "nlp-member",
        name="d",
        gpus=1,
        runtime_estimate_s=10**5,
        env={BUSY_PROFILE_ENV: "idle"},
    )["id"]
    nb = submit(plane, "nlp-member", name="n", kind="interactive", mig_profile="1g.10gb")["id"]
    plane.cycle()
    plane.cycle(1)
    collector = make_collector(TelemetryOptions(source="auto"), "emulated", plane.sessions, cluster)
    assert collector is not None
    leading = [False]
    loop = TelemetryLoop(plane.sessions, collector, CONFIG, lambda: leading[0], clock=plane.clock)
    assert loop.tick() is None
    leading[0] = True
    for _ in range(60):  # 15 minutes: past the 2-minute warm-up and the 10-minute idle limit
        plane.clock.advance(15)
        report = loop.tick()
        assert report is not None
    assert report.samples == 24  # every GPU of the cluster, the MIG one included
    with plane.sessions() as s:
        now = {(g.node, g.gpu): g for g in ts.latest(s)}
        assert len(now) == 24
        busy = {g.job_id: g.util_pct for g in now.values() if g.job_id is not None}
    assert busy[train] > 80
    assert busy[idle] < 5
    assert 0 <= busy[nb] <= 80  # a notebook on a MIG slice: read on the slice's GPU
    assert [e["kind"] for e in job(plane, "nlp-member", idle)["events"]].count("idle") == 1
    assert "idle" not in [e["kind"] for e in job(plane, "vision-member", train)["events"]]
    free = [g for g in now.values() if g.team is None]
    assert free
    assert all(g.util_pct == 0 for g in free)


def test_metrics_export_gpu_team_job_and_idle(plane: Plane) -> None:
    j = _idle_job(plane, "notify")
    gpu = _placed(plane, j)[0]
    _run(plane, 900, {gpu: 1.0})
    text = plane.client.get("/metrics", headers=plane.auth("admin")).text
    node, index = gpu
    assert (
        f'gpufleet_gpu_utilization_ratio{{gpu="{index}",node="{node}",team="vision"}} 0.01' in text
    )
    assert 'gpufleet_team_gpu_utilization_ratio{team="vision"} 0.01' in text
    assert f'gpufleet_job_gpu_utilization_ratio{{job="{j}",team="vision"}} 0.01' in text
    assert 'gpufleet_idle_jobs{team="vision"} 1.0' in text


def test_mig_instances_of_one_gpu_are_one_reading(lite: Plane) -> None:
    """DCGM reports each MIG instance with its GPU's index: combined, never counted twice."""
    a = GpuReading(
        time_s=0, node="h100-0", gpu_index=3, source="dcgm", sm_util_pct=20.0, mem_used_bytes=10
    )
    b = GpuReading(
        time_s=0, node="h100-0", gpu_index=3, source="dcgm", sm_util_pct=60.0, mem_used_bytes=30
    )
    with lite.sessions.begin() as s:
        report = ts.ingest(s, [a, b], lite.clock(), CONFIG)
    assert report.samples == 1
    with lite.sessions() as s:
        row = s.scalars(select(GpuSample)).one()
        assert row.util_pct == 40.0
        assert row.mem_used_bytes == 40


def test_an_idle_job_is_posted_to_the_webhook(plane: Plane, cluster: Any) -> None:
    """`--idle-webhook`: one JSON notice per job flagged idle, through a real HTTP server."""
    import http.server
    import threading

    from gpufleet.control.telemetry_sources import TelemetryLoop, TelemetryOptions, make_collector

    got: list[dict[str, Any]] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            return

    server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        j = _idle_job(plane, "notify")
        collector = make_collector(TelemetryOptions(), "emulated", plane.sessions, cluster)
        assert collector is not None
        url = f"http://127.0.0.1:{server.server_port}/hook"
        loop = TelemetryLoop(
            plane.sessions, collector, CONFIG, lambda: True, clock=plane.clock, webhook=url
        )
        with plane.sessions.begin() as s:
            s.get(Job, j).env = {"GPUFLEET_EMULATE_BUSY": "idle"}  # type: ignore[union-attr]
        for _ in range(60):
            plane.clock.advance(15)
            loop.tick()
    finally:
        server.shutdown()
    assert len(got) == 1
    assert got[0]["event"] == "idle"
    assert got[0]["job"] == j
    assert got[0]["team"] == "vision"
    assert got[0]["text"].startswith(f"gpufleet: job #{j} nb (team vision): GPUs idle")
    assert loop.errors == 0


def test_a_round_written_in_pieces_holds_the_write_lock_a_piece_at_a_time(
    plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader's loop commits every `commit_every` GPUs' rows and jobs' meters (SQLite has
    one write lock, which every submit waits for: a round of 8,000 GPUs written at once held
    it 0.2-0.5 s). Pieces change nothing stored: used GPU-hours are the busy share times the
    held hours, as when a round is one transaction."""
    from sqlalchemy import event

    engine = plane.sessions.kw["bind"]
    inserted: list[int] = [0]
    per_transaction: list[int] = []

    write = ts._write_samples

    def count(session: Any, rows: Sequence[Any], now_s: float) -> None:
        # the rows written (PostgreSQL's COPY passes no statement event to count)
        inserted[0] += len(rows)
        write(session, rows, now_s)

    def committed(conn: Any) -> None:
        per_transaction.append(inserted[0])
        inserted[0] = 0

    j = submit(plane, "vision-member", name="a", gpus=4, runtime_estimate_s=1200)["id"]
    k = submit(plane, "vision-member", name="b", gpus=2, runtime_estimate_s=1200)["id"]
    plane.cycle()
    plane.cycle(1)
    gpus = _placed(plane, j)
    util = {g: (90.0 if i < 2 else 30.0) for i, g in enumerate(gpus)}  # 60 % on average
    util |= dict.fromkeys(_placed(plane, k), 50.0)
    monkeypatch.setattr(ts, "_write_samples", count)
    event.listen(engine, "commit", committed)
    try:
        for _ in range(80):  # 1,200 s
            plane.cycle(15)
            with plane.sessions() as s:
                report = ts.ingest(s, _all_gpus(plane, util), plane.clock(), CONFIG, commit_every=3)
            assert report.samples == 16
    finally:
        event.remove(engine, "commit", committed)
    assert max(per_transaction) == 3  # 16 GPUs: six pieces a round, none larger
    assert sum(per_transaction) == 80 * 16
    with plane.sessions() as s:
        assert s.scalar(select(func.count()).select_from(GpuSample)) == 80 * 16
        for job_id, share in ((j, 0.6), (k, 0.5)):
            row = s.scalars(select(UsageEntry).where(UsageEntry.job_id == job_id)).one()
            held = row.gpu_milli / 1000 * (row.end_s - row.start_s)
            assert row.used_gpu_s is not None
            assert abs(row.used_gpu_s - share * held) < 1e-6 * held


@pytest.mark.parametrize("commit_every", [None, 1])
def test_a_later_attempt_replaces_the_earlier_attempts_meters(
    lite: Plane, commit_every: int | None
) -> None:
    """The same job on the same GPU under a new attempt (a restart): its meters start from
    this reading, and the earlier attempt's share is gone (one row per job)."""
    from gpufleet.control.models import Allocation, JobUtilization

    j, gpu = _one_gpu_at_half(lite, "r")
    with lite.sessions.begin() as s:
        row = s.get(Job, j)
        assert row is not None
        first = row.attempt
        row.attempt = first + 1
        for alloc in s.scalars(select(Allocation).where(Allocation.job_id == j)):
            alloc.attempt = first + 1
    with lite.sessions() as s:
        ts.ingest(s, _all_gpus(lite, {gpu: 20.0}), lite.clock(), CONFIG, commit_every=commit_every)
        s.commit()
    with lite.sessions() as s:
        assert ts.busy_share(s, j, first) is None
        assert ts.busy_share(s, j, first + 1) == pytest.approx(0.2)
        meter = s.get(JobUtilization, j)
        assert meter is not None
        assert meter.sampled_gpu_s == CONFIG.interval_s  # one GPU, one reading
