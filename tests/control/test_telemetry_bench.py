"""Smoke test of the telemetry-store benchmark (`benchmarks.telemetry_store`) at toy size:
the store it builds holds a roll-up per GPU per bucket and a reading per GPU per round,
its team tables give the per-GPU series, sizes are measured, and the overview renders
with every GPU read. The figures themselves are `make bench`'s."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks import telemetry_store as bench

from gpufleet.control import telemetry_series as tseries
from gpufleet.control.db import make_engine, sessions

NOW_S = 1_780_000_200.0  # on a bucket boundary: a day is 288 closed buckets


def test_the_bench_store_is_whole_and_the_overview_renders(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    built = bench.build_store(url, bench.StoreConfig(nodes=1, days=1.0, pending=5), NOW_S)
    size = bench.store_size(url)
    gpus = bench.GPUS_PER_NODE
    assert size.of("gpu_samples").rows == gpus * 5760
    assert size.of("gpu_samples_5m").rows == gpus * 288
    assert size.of("gpu_team_1h").rows > 0
    assert 50 < size.of("gpu_samples").bytes_per_row < 300
    assert size.total_bytes >= sum(t.table_bytes + t.index_bytes for t in size.tables)
    assert built.jobs_finished + built.jobs_running > 0
    assert size.of("usage_ledger").rows == built.ledger_rows == built.jobs_finished
    engine = make_engine(url)
    try:
        with sessions(engine)() as s:
            for span_s, step_s in ((86_400.0, 1800.0), (3600.0, 60.0), (86_400.0, 7200.0)):
                start = NOW_S - span_s
                for by_team in (True, False):
                    got = tseries.series(s, start, NOW_S, step_s, by_team=by_team)
                    want = tseries.series(s, start, NOW_S, step_s, by_team=by_team, per_gpu=True)
                    assert got.keys() == want.keys()
                    assert got
                    for key, points in got.items():
                        assert [p.start_s for p in points] == [p.start_s for p in want[key]]
                        assert [p.util_pct for p in points] == pytest.approx(
                            [p.util_pct for p in want[key]], rel=1e-9
                        )
    finally:
        engine.dispose()
    overview = bench.Overview(built)
    try:
        assert overview.check(gpus) == "24h"
        assert overview.render("/portal/?window=24h") > 0
    finally:
        overview.close()
    assert "gpu_samples_5m" in bench.describe(built, size)
