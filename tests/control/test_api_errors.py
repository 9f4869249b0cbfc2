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


def test_a_validation_422_lists_what_failed(lite: Plane) -> None:
    r = lite.client.get("/api/v1/jobs?limit=0&after_id=x", headers=lite.auth("admin"))
    assert r.status_code == 422
    got = ValidationErrorOut.model_validate(r.json())
    assert isinstance(got.detail, list)
    assert {tuple(i.loc) for i in got.detail} == {("query", "limit"), ("query", "after_id")}


def test_a_request_that_cannot_be_done_is_one_sentence(lite: Plane) -> None:
    r = lite.client.get("/api/v1/reports/chargeback?group_by=nope", headers=lite.auth("admin"))
    assert r.status_code == 422
    assert isinstance(ValidationErrorOut.model_validate(r.json()).detail, str)
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
