"""The per-team telemetry tables give the series the per-GPU tables give (migration 0009).

The portal's cluster and team charts read `gpu_team_samples` / `gpu_team_5m`, summed per
step in the database; a job's chart reads the per-GPU rows, summed in Python. Hypothesis
draws readings (GPUs, holders, gaps, memory or none, a bucket grid the window does not
line up with), and every series is checked three ways: the team tables, the per-GPU
tables, and a sum written out here from the per-GPU roll-ups. The back-fill of a store
that had readings before the upgrade is checked the same way.
"""

from __future__ import annotations

import itertools
import math
import os
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, insert, select

from gpufleet.control import telemetry_rollup as rollup
from gpufleet.control import telemetry_series as tseries
from gpufleet.control import telemetry_store as ts
from gpufleet.control.db import make_engine, sessions, upgrade
from gpufleet.control.models import (
    GpuSample,
    GpuSample5m,
    GpuTeam1h,
    GpuTeam5m,
    GpuTeamSample,
    TelemetryState,
)

from .conftest import _pg_engine

SCALE = float(os.environ.get("GPUFLEET_PROPERTY_SCALE", "1"))  # multiplies max_examples
T0 = 1_779_998_400.0  # on the hour
# (job id, team) holders a GPU may have; None: no one
HOLDERS = ((None, None), (1, "a"), (2, "a"), (3, "b"), (4, "c"))
GPUS = (("n0", 0), ("n0", 1), ("n0", 2), ("n1", 0))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """One store per module (Hypothesis runs many examples on it; each empties it first)."""
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('team') / 'store.db'}")
        upgrade(engine)
        yield engine
        engine.dispose()
        return
    for engine in _pg_engine():
        upgrade(engine)
        yield engine


@dataclass(frozen=True)
class Raw:
    time_s: float
    node: str
    gpu: int
    holder: int  # index into HOLDERS
    util_pct: float
    mem_used_bytes: int | None


@st.composite
def readings(draw: st.DrawFn) -> list[Raw]:
    """Rounds every 15 s (some of them: up to three hours, with gaps) from an offset off the
    bucket grid; each round reads some of the GPUs; a GPU keeps its holder for a while and
    then may change."""
    offset = draw(st.integers(0, 299))
    last = draw(st.sampled_from((99, 720)))  # 25 minutes, or three hours
    rounds = draw(st.lists(st.integers(0, last), min_size=1, max_size=40, unique=True))
    with_mem = draw(st.booleans())
    holder = {g: draw(st.integers(0, len(HOLDERS) - 1)) for g in GPUS}
    out = []
    for k in sorted(rounds):
        read = draw(st.lists(st.sampled_from(GPUS), min_size=1, unique=True))
        for g in read:
            if draw(st.integers(0, 9)) == 0:  # a new holder now and then
                holder[g] = draw(st.integers(0, len(HOLDERS) - 1))
            mem = draw(st.integers(0, 80)) * 2**30 if with_mem or draw(st.booleans()) else None
            util = draw(st.floats(0, 100, allow_nan=False, allow_infinity=False))
            out.append(Raw(T0 + offset + 15 * k, *g, holder[g], util, mem))
    return out


def _write(engine: Engine, rows: list[Raw]) -> None:
    """The raw rows, and each round's sums per team and for the cluster as `ingest` writes
    them."""
    teams: dict[tuple[float, bool, str | None], list[float]] = defaultdict(lambda: [0, 0.0, 0, 0])
    raw = []
    for r in rows:
        job_id, team = HOLDERS[r.holder]
        raw.append(
            {
                "time_s": r.time_s,
                "node": r.node,
                "gpu": r.gpu,
                "job_id": job_id,
                "team": team,
                "util_pct": r.util_pct,
                "mem_used_bytes": r.mem_used_bytes,
                "healthy": True,
                "health": "",
                "source": "test",
            }
        )
        for sums in (teams[(r.time_s, False, team)], teams[(r.time_s, True, None)]):
            sums[0] += 1
            sums[1] += r.util_pct
            if r.mem_used_bytes is not None:
                sums[2] += r.mem_used_bytes
                sums[3] += 1
    with sessions(engine).begin() as s:
        for model in (GpuSample, GpuSample5m, GpuTeamSample, GpuTeam5m, GpuTeam1h, TelemetryState):
            s.execute(delete(model))
        s.execute(insert(GpuSample), raw)
        s.execute(
            insert(GpuTeamSample),
            [
                {
                    "time_s": t,
                    "cluster": whole,
                    "team": team,
                    "readings": n,
                    "util_sum_pct": u,
                    "mem_used_sum_bytes": m,
                    "mem_readings": mn,
                }
                for (t, whole, team), (n, u, m, mn) in teams.items()
            ],
        )


def _by_hand(
    rows: list[GpuSample5m], start_s: float, end_s: float, step_s: float, by_team: bool
) -> dict[str, dict[int, tuple[float, float, float | None]]]:
    """The series from per-GPU roll-ups, written out: per step, Σ mean x samples / Σ samples;
    GPUs read per round = Σ samples / Σ over buckets of the bucket's most samples of one GPU
    (per key: a round is counted once for the whole cluster, not once per team)."""
    sums: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    most: dict[tuple[str, int, float], int] = defaultdict(int)
    for r in rows:
        if not (start_s - ts.BUCKET_S < r.bucket_s < end_s):
            continue
        key = (r.team or "unattributed") if by_team else "all"
        i = max(0, math.floor((r.bucket_s - start_s) / step_s))
        acc = sums[(key, i)]
        acc[0] += r.util_mean_pct * r.samples
        acc[1] += r.samples
        if r.mem_used_max_bytes is not None:
            acc[2] += r.mem_used_max_bytes * r.samples
            acc[3] += r.samples
        most[(key, i, r.bucket_s)] = max(most[(key, i, r.bucket_s)], r.samples)
    rounds: dict[tuple[str, int], int] = defaultdict(int)
    for (key, i, _), n in most.items():
        rounds[(key, i)] += n
    out: dict[str, dict[int, tuple[float, float, float | None]]] = defaultdict(dict)
    for (key, i), (busy, n, mem, mem_n) in sums.items():
        out[key][i] = (busy / n, n / rounds[(key, i)], mem / mem_n if mem_n else None)
    return out


def _same(a: dict[str, list[tseries.Point]], b: dict[str, list[tseries.Point]]) -> None:
    assert a.keys() == b.keys()
    for key, points in a.items():
        assert [p.start_s for p in points] == [p.start_s for p in b[key]], key
        for p, q in zip(points, b[key], strict=True):
            assert p.util_pct == pytest.approx(q.util_pct, rel=1e-9, abs=1e-9)
            assert p.gpus == pytest.approx(q.gpus, rel=1e-12)
            if p.mem_used_bytes is None:
                assert q.mem_used_bytes is None
            else:
                assert p.mem_used_bytes == pytest.approx(q.mem_used_bytes, rel=1e-12)


WINDOWS = st.tuples(
    st.floats(-4000, 8000),  # window start after T0
    st.floats(60, 15_000),  # its length
    # steps finer than a bucket, of whole buckets (some of whole hours), and neither
    st.sampled_from((15.0, 60.0, 100.0, 300.0, 450.0, 1000.0, 1800.0, 3600.0, 7200.0)),
)


@settings(
    max_examples=int(60 * SCALE),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=readings(), window=WINDOWS, pruned_at=st.floats(0, 11_000))
def test_team_tables_give_the_per_gpu_series(
    store: Engine, rows: list[Raw], window: tuple[float, float, float], pruned_at: float
) -> None:
    """Raw rows only, then rolled up to a point, then raw pruned to it (roll-ups before,
    raw after), then only roll-ups: each time the team tables (with hours taken whole where
    they fit a step) and the per-GPU tables agree, by team, for the whole cluster and for
    one team, and count every reading once."""
    _write(store, rows)
    offset, span_s, step_s = window
    start_s, end_s = T0 + offset, T0 + offset + span_s
    last = max(r.time_s for r in rows)
    maker = sessions(store)
    # no roll-up yet; rolled up to a point, raw rows all there (the steady state); raw rows
    # pruned to that point; everything rolled up and pruned
    for now in (
        None,
        T0 + pruned_at,
        T0 + pruned_at + ts.RAW_KEEP_S,
        last + ts.RAW_KEEP_S + 600,
    ):
        if now is not None:
            with maker.begin() as s:
                rollup.roll_up(s, now)
        with maker() as s:
            for kwargs in ({"by_team": True}, {}, {"team": "a"}):
                got = tseries.series(s, start_s, end_s, step_s, **kwargs)  # type: ignore[arg-type]
                want = tseries.series(s, start_s, end_s, step_s, per_gpu=True, **kwargs)  # type: ignore[arg-type]
                _same(got, want)
            # every reading counted once: one step over all of them gives their mean
            mean = sum(r.util_pct for r in rows) / len(rows)
            for step in (6 * 3600.0, 20_100.0):  # whole buckets, or not
                (point,) = tseries.series(s, T0 - 300, T0 + 20_000, step)["all"]
                assert point.util_pct == pytest.approx(mean, rel=1e-9, abs=1e-9)
    with maker() as s:  # only roll-ups are left: both equal the sums written out
        assert not s.scalars(select(GpuSample)).first()
        rolled = list(s.scalars(select(GpuSample5m)))
        for by_team in (True, False):
            got = tseries.series(s, start_s, end_s, step_s, by_team=by_team)
            hand = _by_hand(rolled, start_s, end_s, step_s, by_team)
            assert got.keys() == {k for k, cells in hand.items() if cells}
            for key, points in got.items():
                steps = {round((p.start_s - start_s) / step_s): p for p in points}
                assert steps.keys() == hand[key].keys()
                for i, p in steps.items():
                    util, gpus, mem = hand[key][i]
                    assert p.util_pct == pytest.approx(util, rel=1e-9, abs=1e-9)
                    assert p.gpus == pytest.approx(gpus, rel=1e-12)
                    assert p.mem_used_bytes == (None if mem is None else pytest.approx(mem))


def test_the_upgrade_back_fills_the_team_tables(tmp_path: Path) -> None:
    """A store with raw rows and roll-ups from before 0009: after the upgrade its charts
    read the team tables and show what the per-GPU rows say."""
    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    try:
        upgrade(engine, "0008")
        rows = [
            Raw(T0 + 15 * k + 7, *g, (k // 7 + i) % len(HOLDERS), (k * 37 + i * 11) % 101, mem)
            for k in range(600)  # two and a half hours
            for i, g in enumerate(GPUS)
            for mem in [None if i == 3 else (k % 5) * 2**30]
        ]
        _write_as_0008(engine, rows, pruned_to_s=T0 + 4000, rolled_up_to_s=T0 + 9000)
        upgrade(engine)
        with sessions(engine)() as s:
            assert s.scalars(select(GpuTeam5m)).first() is not None
            assert s.scalars(select(GpuTeamSample)).first() is not None
            # the two hours whose buckets are all rolled up; the third is still open
            hours = s.scalars(select(GpuTeam1h.hour_s).where(GpuTeam1h.cluster)).all()
            assert sorted(hours) == [T0, T0 + 3600]
            newest = {g: max(r.time_s for r in rows if (r.node, r.gpu) == g) for g in GPUS}
            assert {(g.node, g.gpu): g.time_s for g in ts.latest(s)} == newest
            for step, by_team in itertools.product((60, 1800, 3600, 7200), (True, False)):
                got = tseries.series(s, T0 - 100, T0 + 9000, step, by_team=by_team)
                want = tseries.series(s, T0 - 100, T0 + 9000, step, by_team=by_team, per_gpu=True)
                _same(got, want)
                assert got
    finally:
        engine.dispose()


def _write_as_0008(
    engine: Engine, rows: list[Raw], *, pruned_to_s: float, rolled_up_to_s: float
) -> None:
    """What 0008's store held after these readings: every bucket rolled up per GPU and
    holder, the raw rows before `pruned_to_s` pruned (through the tables as they were)."""
    from sqlalchemy import MetaData

    meta = MetaData()
    meta.reflect(engine, only=["gpu_samples", "gpu_samples_5m", "telemetry_state"])
    cells: dict[tuple[float, str, int, int | None, str | None], list[Raw]] = defaultdict(list)
    for r in rows:
        job_id, team = HOLDERS[r.holder]
        bucket = math.floor(r.time_s / ts.BUCKET_S) * ts.BUCKET_S
        cells[(bucket, r.node, r.gpu, job_id, team)].append(r)
    with engine.begin() as conn:
        conn.execute(
            insert(meta.tables["gpu_samples"]),
            [
                {
                    "time_s": r.time_s,
                    "node": r.node,
                    "gpu": r.gpu,
                    "job_id": HOLDERS[r.holder][0],
                    "team": HOLDERS[r.holder][1],
                    "util_pct": float(r.util_pct),
                    "mem_used_bytes": r.mem_used_bytes,
                    "healthy": True,
                    "health": "",
                    "source": "test",
                }
                for r in rows
                if r.time_s >= pruned_to_s
            ],
        )
        conn.execute(
            insert(meta.tables["gpu_samples_5m"]),
            [
                {
                    "bucket_s": b,
                    "node": node,
                    "gpu": gpu,
                    "job_id": job_id,
                    "team": team,
                    "samples": len(got),
                    "util_mean_pct": sum(r.util_pct for r in got) / len(got),
                    "util_max_pct": max(r.util_pct for r in got),
                    "mem_used_max_bytes": max(mems) if (mems := _mems(got)) else None,
                    "mem_total_bytes": None,
                    "power_mean_w": None,
                    "unhealthy_samples": 0,
                }
                for (b, node, gpu, job_id, team), got in cells.items()
            ],
        )
        conn.execute(
            insert(meta.tables["telemetry_state"]),
            [
                {
                    "name": "rollup",
                    "rolled_up_to_s": rolled_up_to_s,
                    "raw_pruned_to_s": pruned_to_s,
                }
            ],
        )


def _mems(rows: list[Raw]) -> list[int]:
    return [r.mem_used_bytes for r in rows if r.mem_used_bytes is not None]
