"""Fixtures for the portal: the control plane of `tests/control` (store, reconciler,
emulated executor, manual clock, tokens for admin and vision/nlp lead/member/viewer) on
SQLite, and a logged-in browser per role (a TestClient with its own cookie jar)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from control.conftest import CLUSTER, Plane, build_plane
from gpufleet.cluster import Cluster
from gpufleet.control.db import make_engine, upgrade
from gpufleet.specs.cluster import ClusterSpec

CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    found = CSRF_RE.search(html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


@dataclass
class Browser:
    """One person's browser: a cookie jar logged in (or not) to the portal."""

    client: TestClient
    csrf: str = ""

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.get(path, **kwargs)

    def post(
        self, path: str, data: dict[str, Any] | None = None, *, csrf: bool = True, **kwargs: Any
    ) -> httpx.Response:
        body = dict(data or {})
        if csrf:
            body.setdefault("csrf_token", self.csrf)
        kwargs.setdefault("follow_redirects", False)
        return self.client.post(path, data=body, **kwargs)


def login(client: TestClient, token: str, next_url: str = "/portal/") -> httpx.Response:
    """Log in through the form, as a person would: GET the form, POST the token."""
    form = client.get("/portal/login")
    assert form.status_code == 200
    return client.post(
        "/portal/login",
        data={"token": token, "csrf_token": csrf_of(form.text), "next": next_url},
        follow_redirects=False,
    )


@dataclass
class Portal:
    plane: Plane
    browsers: dict[str, Browser] = field(default_factory=dict)

    def browser(self, who: str | None = None) -> Browser:
        """A new browser, logged in as `who` (a key of `plane.tokens`) unless None."""
        b = Browser(TestClient(self.plane.client.app))
        if who is not None:
            r = login(b.client, self.plane.tokens[who])
            assert r.status_code == 303, r.text
            b.csrf = csrf_of(b.get("/portal/jobs").text)
        return b

    def as_(self, who: str) -> Browser:
        """The (cached) logged-in browser of `who`."""
        if who not in self.browsers:
            self.browsers[who] = self.browser(who)
        return self.browsers[who]

    def submit_api(self, who: str, **body: Any) -> int:
        """Submit a job through the API (bearer token); its id."""
        body.setdefault("name", "job")
        r = self.plane.client.post("/api/v1/jobs", json=body, headers=self.plane.auth(who))
        assert r.status_code == 201, r.text
        return int(r.json()["id"])


@pytest.fixture
def portal_engine(tmp_path: object) -> Iterator[Engine]:
    eng = make_engine(f"sqlite:///{tmp_path}/portal.db")
    upgrade(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def portal(portal_engine: Engine) -> Portal:
    cluster = Cluster.from_spec(ClusterSpec.model_validate(CLUSTER))
    return Portal(build_plane(portal_engine, cluster))
