"""The API fuzzer behind `test_fuzz.py`: schemathesis cases for every operation of the
published OpenAPI, sent with an admin's and a member's token, each answer checked against
the schema (no 5xx; status code, content type, headers and body as documented).

A run is bounded by examples per operation (the default tests) or by seconds (the long run):
rounds over all operations, positive and negative cases, until the time is spent. Failures
are grouped by what went wrong where, with one example of each, so a long run reports a
short list rather than thousands of copies of one bug. Findings are collected, not raised,
so Hypothesis neither stops at the first one nor spends the budget shrinking it."""

from __future__ import annotations

import itertools
import math
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.failures import Failure, FailureGroup

from gpufleet.control import admin

from .conftest import Plane

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
WHO = ("admin", "vision-member")
# values that exist, for body fields a random string almost never matches: half of the
# positive cases that have such a field get one of these (the rest keep what was drawn)
KNOWN_BODY: dict[str, list[Any]] = {
    "name": ["fuzz-1", "t1"],
    "team": ["vision", "nlp"],
    "project": ["p1", "p2"],
    "priority_class": ["standard", "opportunistic", "production"],
    "default_priority": ["standard", "production"],
    "accelerator": [None, "h100-sxm5-80gb", "a100-sxm4-80gb"],
    "mig_profile": ["1g.10gb", "3g.40gb"],
    "user": ["vision-member", "fuzz-user"],
}
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)

Key = tuple[str, str, int, str]  # operation, as whom, status, the checks that failed


@dataclass
class Finding:
    key: Key
    example: str
    count: int = 1


@dataclass
class FuzzReport:
    operations: int = 0
    requests: int = 0
    rounds: int = 0
    seconds: float = 0.0
    by_status: dict[int, int] = field(default_factory=dict)
    by_operation: dict[str, dict[int, int]] = field(default_factory=dict)
    findings: dict[Key, Finding] = field(default_factory=dict)
    unsatisfiable: set[str] = field(default_factory=set)  # nothing to negate

    def add(self, key: Key, example: str) -> None:
        if key in self.findings:
            self.findings[key].count += 1
        else:
            self.findings[key] = Finding(key, example)

    def summary(self) -> str:
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(self.by_status.items()))
        lines = [
            f"{self.requests} requests over {self.operations} operations in {self.rounds} "
            f"round(s), {self.seconds:.1f} s; status codes {codes}; "
            f"{len(self.findings)} distinct failure(s)"
        ]
        never = sorted(
            op for op, codes in self.by_operation.items() if not any(c < 300 for c in codes)
        )
        if never and self.rounds:  # a probe sends one case per operation: no coverage to tell
            lines.append(f"never a 2xx: {', '.join(never)}")
        for f in self.findings.values():
            op, who, status, what = f.key
            lines.append(f"- {op} as {who}: {status} {what} (x{f.count})\n  {f.example}")
        return "\n".join(lines)


def _checks_failed(exc: Failure | FailureGroup) -> str:
    """The failed checks by title, without their (long, varying) details."""
    failures = exc.exceptions if isinstance(exc, FailureGroup) else (exc,)
    return "; ".join(sorted({f"{type(f).__name__}: {f.title}" for f in failures}))


def _describe(case: Case, status: int, body: str, exc: Failure | FailureGroup) -> str:
    return (
        f"{case.method} {case.formatted_path} query={case.query!r} "
        f"body={str(case.body)[:300]!r} -> {status} {body[:300]!r}; {str(exc).strip()[:800]!r}"
    )


def _has_input(operation: APIOperation) -> bool:
    """Anything a negative case could break: a body, or a parameter but the Authorization
    header (the fuzzer sets that one itself)."""
    params = (p for p in operation.iter_parameters() if p.name.lower() != "authorization")
    return len(operation.body) > 0 or any(True for _ in params)


def _known_body(drawn: tuple[Case, list[int]]) -> Case:
    case, picks = drawn
    if isinstance(case.body, dict):
        for (key, values), pick in zip(KNOWN_BODY.items(), picks, strict=True):
            if key in case.body and pick % 2:
                case.body[key] = values[pick // 2 % len(values)]
    return case


def seed(plane: Plane) -> dict[str, list[Any]]:
    """Jobs in every state for both teams, usage in the ledger, a rate and spare tokens, so
    that fuzzed requests reach more than "no such job"; the path values that name them."""
    client, ids = plane.client, list[int]()

    def submit(who: str, **body: Any) -> int:
        body = {"name": f"seed-{len(ids)}", "accelerator": "h100-sxm5-80gb", **body}
        r = client.post("/api/v1/jobs", json=body, headers=plane.auth(who))
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
        return int(ids[-1])

    submit("vision-member", gpus=8, runtime_estimate_s=60)  # succeeds
    submit("nlp-member", gpus=4, runtime_estimate_s=60, env={"GPUFLEET_EMULATE_EXIT_CODE": "3"})
    plane.cycle()
    plane.cycle(120.0)
    running = submit("vision-member", gpus=8, runtime_estimate_s=86400, checkpoint_interval_s=600)
    submit("nlp-member", gpus=8, runtime_estimate_s=86400)
    submit("nlp-member", mig_profile="3g.40gb", accelerator="a100-sxm4-80gb", project="p1")
    plane.cycle()
    plane.cycle(30.0)
    client.post(f"/api/v1/jobs/{running}/checkpoints", json={}, headers=plane.auth("admin"))
    submit("vision-member", gpus=8, priority_class="opportunistic")  # waits
    submit("vision-member", gpus=8)  # waits
    cancelled = submit("nlp-member", gpus=8)
    client.post(f"/api/v1/jobs/{cancelled}/cancel", headers=plane.auth("nlp-member"))
    admin = plane.auth("admin")
    client.put("/api/v1/admin/rates/h100-sxm5-80gb", params={"usd_per_gpu_h": 2.5}, headers=admin)
    spare = [
        client.post(
            "/api/v1/admin/tokens",
            json={"user": f"spare-{i}", "role": "viewer", "team": "nlp"},
            headers=admin,
        ).json()["id"]
        for i in range(2)
    ]
    return {
        "job_id": ids,
        "token_id": spare,
        "team": ["vision", "nlp"],
        "flavor": ["h100-sxm5-80gb", "a100-sxm4-80gb"],
        "node": ["h100-0", "a100-0"],
    }


class Fuzzer:
    """Sends schemathesis cases to a `Plane`'s app through a test client of its own (one
    that answers a server error with a 500 rather than raising it in the test).

    `known` names path values that exist (`seed`): half of the cases of an operation with
    path parameters use one of them, the other half whatever schemathesis draws. With
    `cycles`, after each operation the reconciler runs, so that what the fuzzer changed
    (quotas, nodes, priorities, budgets) also passes through the scheduler, and two new
    jobs wait in the queue (the admin's cases cancel the seeded ones early on)."""

    def __init__(
        self,
        plane: Plane,
        who: Iterable[str] = WHO,
        *,
        known: dict[str, list[Any]] | None = None,
        cycles: bool = False,
    ) -> None:
        self.plane = plane
        self.client = TestClient(plane.client.app, raise_server_exceptions=False)
        self.who = tuple(who)
        self.known = known or {}
        self.cycles = cycles
        self.schema = schemathesis.openapi.from_dict(self.client.get("/openapi.json").json())
        self.operations: list[APIOperation] = [
            result.ok() for result in self.schema.get_all_operations()
        ]
        self.report = FuzzReport(operations=len(self.operations))
        self.checks = list(CHECKS)

    def _strategy(self, operation: APIOperation, mode: GenerationMode) -> Any:
        strategy = operation.as_strategy(generation_mode=mode)
        names = [p.name for p in operation.path_parameters]
        if names and all(name in self.known for name in names):
            combos = itertools.product(*(self.known[name] for name in names))
            known = [
                operation.as_strategy(
                    generation_mode=mode, path_parameters=dict(zip(names, c, strict=True))
                )
                for c in combos
            ]
            strategy = st.one_of(strategy, st.one_of(known))
        if mode is GenerationMode.POSITIVE and self.known:
            picks = st.lists(st.integers(0, 5), min_size=len(KNOWN_BODY), max_size=len(KNOWN_BODY))
            strategy = st.tuples(strategy, picks).map(_known_body)
        return strategy

    def _cycle(self, label: str) -> None:
        for who in ("vision-member", "nlp-member"):
            body = {"name": "refill", "gpus": 8, "accelerator": "h100-sxm5-80gb"}
            r = self.client.post("/api/v1/jobs", json=body, headers=self.plane.auth(who))
            if r.status_code == 201 and "job_id" in self.known:  # else a gate the fuzzer set
                self.known["job_id"] = [*self.known["job_id"][-11:], r.json()["id"]]
        try:
            self.plane.cycle(30.0)
        except Exception as exc:  # a reconciler crash is a finding too
            what = f"{type(exc).__name__}: {str(exc)[:200]}"
            self.report.add((f"reconciler after {label}", "-", 0, what), traceback.format_exc())

    def run(self, *, examples: int, seconds: float | None = None) -> FuzzReport:
        """One round of `examples` cases per operation and mode (positive, negative); with
        `seconds`, rounds of fresh random draws until that much time is spent."""
        start = time.monotonic()
        deadline = start + seconds if seconds else math.inf
        while True:
            for operation in self.operations:
                if time.monotonic() > deadline:
                    break
                for mode in MODES if _has_input(operation) else MODES[:1]:
                    self._each(
                        f"{operation.label} ({mode.value})",
                        self._strategy(operation, mode),
                        examples,
                        self._send_as_each,
                    )
                if self.cycles:
                    self._cycle(operation.label)
            self.report.rounds += 1
            if seconds is None or time.monotonic() > deadline:
                break
        self.report.seconds = time.monotonic() - start
        return self.report

    def probe(self, send: Callable[[Case], int], *, examples: int = 1) -> dict[str, set[int]]:
        """Valid cases of every operation, each sent by `send` (with `self.send` and the
        changes a test is about) and checked against the schema; statuses by operation."""
        seen: dict[str, set[int]] = {}

        def record(case: Case) -> None:
            seen.setdefault(case.operation.label, set()).add(send(case))

        for operation in self.operations:
            strategy = operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
            self._each(operation.label, strategy, examples, record)
        return seen

    def send(self, case: Case, who: str | None, **overrides: Any) -> int:
        """One request for `case` with `who`'s token (None: no token), checked; its status."""
        headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
        if who is not None:
            headers["Authorization"] = f"Bearer {self.plane.tokens[who]}"
        headers.update(overrides.pop("headers", {}))
        kwargs = case.as_transport_kwargs(headers=headers)
        kwargs.pop("base_url", None)
        if not kwargs.get("cookies"):
            kwargs.pop("cookies", None)  # the client warns on per-request cookies, even {}
        if isinstance(kwargs.get("data"), bytes | str):
            kwargs["content"] = kwargs.pop("data")  # raw bytes: httpx's spelling
        url = kwargs.pop("url")
        kwargs.update(overrides)
        path = "/" + url.split("://", 1)[-1].split("/", 1)[-1]  # the test client's own base
        response = self.client.request(url=path, **kwargs)
        status = response.status_code
        self.report.requests += 1
        self.report.by_status[status] = self.report.by_status.get(status, 0) + 1
        codes = self.report.by_operation.setdefault(case.operation.label, {})
        codes[status] = codes.get(status, 0) + 1
        try:
            case.validate_response(response, checks=self.checks, headers=headers)
        except (Failure, FailureGroup) as exc:
            key = (f"{case.method} {case.operation.path}", who or "nobody", status)
            self.report.add(
                (*key, _checks_failed(exc)), _describe(case, status, response.text, exc)
            )
        return status

    def _send_as_each(self, case: Case) -> None:
        for who in self.who:
            if self.send(case, who) == 401:  # the fuzzer revoked it (DELETE /admin/tokens/..)
                self._reissue(who)

    def _reissue(self, who: str) -> None:
        team, _, role = who.partition("-")  # "vision-member"; "admin" has no team
        with self.plane.sessions.begin() as s:
            issued = admin.create_token(
                s,
                admin.cli_principal(),
                self.plane.clock(),
                role=role or "admin",
                team=team if role else None,
                user=who,
                expires_s=None,
            )
        self.plane.tokens[who] = issued.token

    def _each(self, label: str, strategy: Any, examples: int, send: Callable[[Case], None]) -> None:
        @given(case=strategy)
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=[Phase.generate],  # findings are collected, not raised: nothing to shrink
            suppress_health_check=list(HealthCheck),
        )
        def each(case: Case) -> None:
            send(case)

        try:
            each()
        except Unsatisfiable:  # a negative mode with nothing to negate (no parameters)
            self.report.unsatisfiable.add(label)
