"""The API's error surface: the OpenAPI declares the real error codes and bodies of every
operation, and inputs the fuzzer cannot send (a NUL byte in a path, `Infinity` in JSON,
times beyond 2100) answer 422 on both stores rather than 500 (issue 23).

schemathesis never puts a NUL byte or a '/' in a path parameter and only sends valid JSON,
so these are table tests beside `test_fuzz.py`."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.api.schemas import ErrorOut, ValidationErrorOut

from .conftest import Plane

AUTHED_ERRORS = {"401", "413", "422", "429", "503"}
ERROR_SCHEMAS = {
    "#/components/schemas/ErrorOut",
    "#/components/schemas/ValidationErrorOut",
    "#/components/schemas/UnreadyOut",
}


def test_every_operation_declares_its_errors_with_their_bodies(lite: Plane) -> None:
    spec = lite.client.get("/openapi.json").json()
    assert "HTTPValidationError" not in spec["components"]["schemas"]  # FastAPI's, not sent
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            where = f"{method.upper()} {path}"
            codes = set(op["responses"])
            if path.startswith("/api/"):
                assert codes >= AUTHED_ERRORS, where
                assert op["responses"]["401"]["headers"]["WWW-Authenticate"]["required"], where
            assert "413" in codes, where
            for code, response in op["responses"].items():
                if int(code) < 400:
                    continue
                content = response["content"]
                assert list(content) == ["application/json"], (where, code)
                ref = content["application/json"]["schema"]["$ref"]
                assert ref in ERROR_SCHEMAS, (where, code, ref)
                expect = "ValidationErrorOut" if code == "422" else "Out"
                assert ref.endswith(expect), (where, code, ref)


def _job(plane: Plane) -> int:
    body = {"name": "j", "gpus": 8, "accelerator": "h100-sxm5-80gb"}
    r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth("vision-member"))
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


NUL = "a\x00b"
# (id, method, url, JSON body or raw text); {job} is a waiting job of team vision
HOSTILE: list[tuple[str, str, str, Any]] = [
    ("team-path-nul", "PATCH", "/api/v1/admin/teams/a%00b", {}),
    ("quota-team-nul", "PUT", "/api/v1/admin/teams/a%00b/quotas/h100", {"guaranteed_gpus": 1}),
    ("quota-flavor-nul", "PUT", "/api/v1/admin/teams/vision/quotas/a%00b", {"guaranteed_gpus": 1}),
    ("node-path-nul", "PUT", "/api/v1/admin/nodes/a%00b", {"state": "up"}),
    ("rate-flavor-nul", "PUT", "/api/v1/admin/rates/a%00b?usd_per_gpu_h=1", None),
    ("node-reason-nul", "PUT", "/api/v1/admin/nodes/h100-0", {"state": "drain", "reason": NUL}),
    ("team-priority-nul", "POST", "/api/v1/admin/teams", {"name": "t", "default_priority": NUL}),
    ("patch-priority-nul", "PATCH", "/api/v1/admin/teams/vision", {"default_priority": NUL}),
    ("token-team-nul", "POST", "/api/v1/admin/tokens", {"user": "u", "role": "lead", "team": NUL}),
    ("job-priority-nul", "PATCH", "/api/v1/jobs/{job}", {"priority_class": NUL}),
    ("submit-team-nul", "POST", "/api/v1/jobs", {"name": "j", "gpus": 1, "team": NUL}),
    (
        "submit-class-nul",
        "POST",
        "/api/v1/jobs",
        {"name": "j", "gpus": 1, "team": "vision", "priority_class": NUL},
    ),
    (
        "budget-inf",
        "POST",
        "/api/v1/admin/teams",
        '{"name": "t", "monthly_budget_gpu_h": Infinity}',
    ),
    ("budget-nan", "PATCH", "/api/v1/admin/teams/vision", '{"monthly_budget_gpu_h": NaN}'),
    ("patch-budget-inf", "PATCH", "/api/v1/admin/teams/vision", '{"monthly_budget_gpu_h": 1e999}'),
    ("period-huge", "GET", "/api/v1/reports/chargeback?from=-1e308&to=1e308", None),
    ("period-csv", "GET", "/api/v1/reports/chargeback?from=0&to=1e308&format=csv", None),
    ("period-nan", "GET", "/api/v1/reports/chargeback?from=nan", None),
    ("period-year-1", "GET", "/api/v1/reports/chargeback?from=0001-01-01", None),
    ("period-year-9999", "GET", "/api/v1/reports/chargeback?to=9999-12-31", None),
]


@pytest.mark.parametrize(
    ("method", "url", "body"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE]
)
def test_hostile_values_answer_422_on_both_stores(
    plane: Plane, method: str, url: str, body: Any
) -> None:
    url = url.replace("{job}", str(_job(plane)))
    who = "vision-member" if url.startswith("/api/v1/jobs/") else "admin"
    headers = {**plane.auth(who), "Content-Type": "application/json"}
    kwargs: dict[str, Any] = {"json": body} if isinstance(body, dict) else {"content": body}
    if body is None:
        kwargs = {}
    r = plane.client.request(method, url, headers=headers, **kwargs)
    assert r.status_code == 422, r.text
    ValidationErrorOut.model_validate(r.json())  # the declared body
    # and nothing was left behind that fails a later read
    assert plane.client.get("/api/v1/teams", headers=plane.auth("admin")).status_code == 200
    plane.cycle()


# names break a rule the schema states and the core enforces: 409 with the rule, as the
# portal's forms answer too (admin.check_name)
NAME_RULE: list[tuple[str, str, str, Any]] = [
    ("team-name", "POST", "/api/v1/admin/teams", {"name": "Bad Name"}),
    ("team-project-nul", "POST", "/api/v1/admin/teams", {"name": "t", "projects": [NUL]}),
    ("token-user", "POST", "/api/v1/admin/tokens", {"user": "U", "role": "lead", "team": "nlp"}),
    ("token-role", "POST", "/api/v1/admin/tokens", {"user": "u", "role": "root", "team": "nlp"}),
]


@pytest.mark.parametrize(
    ("method", "url", "body"), [h[1:] for h in NAME_RULE], ids=[h[0] for h in NAME_RULE]
)
def test_a_name_against_the_rule_is_409_with_the_rule(
    lite: Plane, method: str, url: str, body: Any
) -> None:
    r = lite.client.request(method, url, json=body, headers=lite.auth("admin"))
    assert r.status_code == 409, r.text
    ErrorOut.model_validate(r.json())


def test_a_validation_422_is_one_sentence_with_the_list_beside_it(lite: Plane) -> None:
    """The guide promises `{"detail": "<one sentence>"}` for every error; a 422 that
    failed validation gave pydantic's list in `detail`. The list is in `errors` now."""
    r = lite.client.get("/api/v1/jobs?limit=0&after_id=x", headers=lite.auth("admin"))
    assert r.status_code == 422
    got = ValidationErrorOut.model_validate(r.json())
    assert isinstance(got.detail, str)
    assert got.detail.startswith("query parameter ")
    assert got.detail.endswith("(and 1 more problem: see errors)")
    assert got.errors is not None
    assert {tuple(i.loc) for i in got.errors} == {("query", "limit"), ("query", "after_id")}


BAD_INPUT: list[tuple[str, str, str, Any, str]] = [
    (
        "negative-gpus",
        "POST",
        "/api/v1/jobs",
        {"name": "x", "gpus": -1},
        "field gpus: input should be greater than or equal to 1",
    ),
    (
        "gpus-true",
        "POST",
        "/api/v1/jobs",
        {"name": "x", "gpus": True},
        "field gpus: input should be a valid integer",
    ),
    (
        "gpus-string",
        "POST",
        "/api/v1/jobs",
        {"name": "x", "gpus": "2"},
        "field gpus: input should be a valid integer",
    ),
    (
        "workers-string",
        "POST",
        "/api/v1/jobs",
        {"name": "x", "gpus": 1, "workers": "2"},
        "field workers: input should be a valid integer",
    ),
    (
        "fraction-string",
        "POST",
        "/api/v1/jobs",
        {"name": "x", "gpu_fraction": "0.5"},
        "field gpu_fraction: input should be a valid number",
    ),
    (
        "two-requests",
        "POST",
        "/api/v1/jobs",
        {"name": "x", "gpus": 1, "mig_profile": "1g.10gb"},
        "the body: give exactly one of gpus, mig_profile or gpu_fraction",
    ),
    (
        "malformed-json",
        "POST",
        "/api/v1/jobs",
        '{"name": "x", "gpus": 1,',
        "the body is not valid JSON (at character 24)",
    ),
    (
        "bad-basis",
        "GET",
        "/api/v1/reports/chargeback?basis=cost",
        None,
        "query parameter basis: input should be 'allocation' or 'usage'",
    ),
]


@pytest.mark.parametrize(
    ("method", "url", "body", "sentence"),
    [b[1:] for b in BAD_INPUT],
    ids=[b[0] for b in BAD_INPUT],
)
def test_field_errors_answer_one_sentence(
    lite: Plane, method: str, url: str, body: Any, sentence: str
) -> None:
    """`"gpus": true` was taken as 1 GPU and `"gpus": "2"` as 2 (counts are strict now);
    negative GPUs, a bad basis and malformed JSON came back as pydantic lists."""
    headers = {**lite.auth("vision-member"), "Content-Type": "application/json"}
    kwargs: dict[str, Any] = {}
    if isinstance(body, dict):
        kwargs = {"json": body}
    elif body is not None:
        kwargs = {"content": body}
    r = lite.client.request(method, url, headers=headers, **kwargs)
    assert r.status_code == 422, r.text
    got = ValidationErrorOut.model_validate(r.json())
    assert got.detail.startswith(sentence), got.detail
    assert "\n" not in got.detail
    assert got.errors


def test_the_portal_form_still_sends_counts_as_numbers(lite: Plane) -> None:
    """The strict counts are the API's JSON; the form turns its text into numbers first."""
    from gpufleet.control.jobs import JobRequest
    from gpufleet.portal.forms import parse_submit

    parsed = parse_submit({"name": "x", "request_type": "gpus", "gpus": "2", "workers": "2"})
    assert JobRequest.model_validate(parsed.data).gpus == 2


def test_a_request_that_cannot_be_done_is_one_sentence(lite: Plane) -> None:
    r = lite.client.get("/api/v1/reports/chargeback?group_by=nope", headers=lite.auth("admin"))
    assert r.status_code == 422
    got = ValidationErrorOut.model_validate(r.json())
    assert isinstance(got.detail, str)
    assert got.errors is None
    r = lite.client.get("/api/v1/admin/rates", headers=lite.auth("vision-member"))
    assert r.status_code == 403
    ErrorOut.model_validate(r.json())


def test_a_member_naming_a_team_with_a_nul_byte_gets_a_4xx(plane: Plane) -> None:
    """Not the same 4xx on both stores yet: SQLite finds no such team (404), PostgreSQL
    refuses the value (422, the DataError handler). `JobRequest.team` has no name rule of its
    own (`control.jobs`); with one, both would answer 422 before any query."""
    body = {"name": "j", "gpus": 1, "team": NUL}
    r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth("vision-member"))
    assert r.status_code in (404, 422), r.text
