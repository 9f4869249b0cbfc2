"""Fuzz the OpenAPI: no generated request, well-formed or not, makes the server answer 5xx.

Every operation of the published schema gets Hypothesis-generated requests from
schemathesis, sent with an admin's and a member's token (the 401 paths are covered by
the security tests)."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import Case

from .conftest import Plane

EXAMPLES_PER_OPERATION = 20


def test_no_server_errors(lite: Plane) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", lite.client.app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    failures: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Case) -> None:
            for who in ("admin", "vision-member"):
                case.headers = {
                    **(case.headers or {}),
                    "Authorization": f"Bearer {lite.tokens[who]}",
                }
                response = case.call()
                if response.status_code >= 500:
                    failures.append(
                        f"{case.method} {case.formatted_path} as {who}: {response.status_code} "
                        f"{response.text[:300]}"
                    )

        check()
    assert not failures, "\n".join(failures[:10])
