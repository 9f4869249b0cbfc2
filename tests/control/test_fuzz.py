"""Fuzz the OpenAPI: no generated request, well-formed or not, makes the server answer 5xx,
and every answer is one the published schema declares (status code, content type, headers,
body), on SQLite and on PostgreSQL, with an admin's and a member's token (issue 23).

Every operation gets positive and negative schemathesis cases (`fuzzing.Fuzzer`); the
declared errors that random cases rarely reach (no token, a body over the cap, a rate limit,
a store that is down) are probed on purpose, each answer checked against the schema too.

The default run is bounded by examples (about 20 s per store on 2 cores). A longer run,
not part of the suite, takes a time budget and prints what it found:

    GPUFLEET_FUZZ_SECONDS=300 .venv/bin/python -m pytest -q -s tests/control/test_fuzz.py \\
        -k "for_seconds and postgresql"
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from schemathesis.checks import not_a_server_error
from sqlalchemy.orm import sessionmaker

from gpufleet.api.body_limit import MAX_BODY_BYTES
from gpufleet.api.context import RateLimiter
from gpufleet.control.auth import PrincipalCache
from gpufleet.control.db import make_engine, read_sessions

from .conftest import Plane
from .fuzzing import Fuzzer, FuzzReport, seed

EXAMPLES_PER_OPERATION = 15  # per generation mode: 30 cases x 2 tokens per operation
FUZZ_SECONDS = float(os.environ.get("GPUFLEET_FUZZ_SECONDS", "0"))
HEALTH = {"GET /healthz", "GET /readyz", "GET /metrics"}


def _assert_clean(report: FuzzReport) -> None:
    print(report.summary())  # the counts, shown with -s or -rP
    assert report.operations >= 25
    assert not report.findings, report.summary()


def test_fuzz_finds_no_server_error_and_no_undeclared_answer(plane: Plane) -> None:
    report = Fuzzer(plane, known=seed(plane), cycles=True).run(examples=EXAMPLES_PER_OPERATION)
    assert report.requests >= report.operations * 2 * EXAMPLES_PER_OPERATION
    _assert_clean(report)


@pytest.mark.skipif(not FUZZ_SECONDS, reason="a long run: set GPUFLEET_FUZZ_SECONDS")
def test_fuzz_for_seconds(plane: Plane) -> None:
    fuzzer = Fuzzer(plane, known=seed(plane), cycles=True)
    report = fuzzer.run(examples=EXAMPLES_PER_OPERATION, seconds=FUZZ_SECONDS)
    _assert_clean(report)


def test_no_token_is_401_with_www_authenticate(lite: Plane) -> None:
    fuzzer = Fuzzer(lite)
    seen = fuzzer.probe(lambda case: fuzzer.send(case, None))
    for label, statuses in seen.items():
        assert statuses == ({200} if label in HEALTH else {401}), label
    _assert_clean(fuzzer.report)


def test_a_bad_token_is_401(lite: Plane) -> None:
    fuzzer = Fuzzer(lite)
    lite.tokens["forged"] = "gpf_" + "A" * 43
    seen = fuzzer.probe(lambda case: fuzzer.send(case, "forged"))
    assert all(s == {401} for label, s in seen.items() if label not in HEALTH), seen
    _assert_clean(fuzzer.report)


def test_a_body_over_the_cap_is_413_everywhere(lite: Plane) -> None:
    fuzzer = Fuzzer(lite)
    big = b"[" + b"0," * (MAX_BODY_BYTES // 2) + b"0]"
    seen = fuzzer.probe(
        lambda case: fuzzer.send(
            case, "admin", content=big, headers={"Content-Type": "application/json"}
        )
    )
    assert all(s == {413} for s in seen.values()), seen
    _assert_clean(fuzzer.report)


def test_a_rate_limited_token_is_429(lite: Plane) -> None:
    lite.client.app.state.ctx.limiter = RateLimiter(rate_per_s=0.0, burst=0.0)  # type: ignore[attr-defined]
    fuzzer = Fuzzer(lite)
    seen = fuzzer.probe(lambda case: fuzzer.send(case, "vision-member"))
    assert all(s == {429} for label, s in seen.items() if label not in HEALTH), seen
    _assert_clean(fuzzer.report)


def test_a_store_that_is_down_is_503(lite: Plane, tmp_path: Path) -> None:
    fuzzer = Fuzzer(lite)  # the schema is read while the store still answers
    fuzzer.checks = [c for c in fuzzer.checks if c is not not_a_server_error]  # 503 is the point
    down = make_engine(f"sqlite:///{tmp_path}/no/such/dir/gpufleet.db")
    ctx = lite.client.app.state.ctx  # type: ignore[attr-defined]
    ctx.sessions = sessionmaker(down, expire_on_commit=False)
    ctx.read_sessions = read_sessions(down)
    ctx.principals = PrincipalCache()  # every caller is looked up in the store
    seen = fuzzer.probe(lambda case: fuzzer.send(case, "admin"))
    assert all(s == {503} for label, s in seen.items() if label != "GET /healthz"), seen
    _assert_clean(fuzzer.report)
