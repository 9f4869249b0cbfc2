"""A GPU share is held, and billed, in whole eighths of a GPU (`sched.requests`): asking for
0.3 holds 0.375. A review found no page or document saying so: the job page read "0.3 of a
GPU" beside a 0.375 placement, and the form offered steps of 0.01."""

from __future__ import annotations

import copy
import html as html_lib
import math
import re

import pytest
from sqlalchemy import Engine

from control.conftest import CLUSTER, build_plane
from gpufleet.api.schemas import held_gpu_fraction
from gpufleet.cluster import Cluster
from gpufleet.control.models import Allocation
from gpufleet.sched.requests import requests_for
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.jobs import JobSpec

from .conftest import Portal

SUBMIT = {
    "name": "nb",
    "kind": "interactive",
    "request_type": "gpu_fraction",
    "gpu_fraction": "0.3",
    "workers": "1",
    "action": "preview",
}


@pytest.fixture
def shares(portal_engine: Engine) -> Portal:
    """The portal's cluster with the H100s shared by fraction."""
    spec = copy.deepcopy(CLUSTER)
    spec["nodes"][0]["fractions"] = True  # type: ignore[index]
    return Portal(build_plane(portal_engine, Cluster.from_spec(ClusterSpec.model_validate(spec))))


@pytest.mark.parametrize("asked", [0.0001, 0.1, 0.125, 0.3, 0.5, 0.6, 0.875, 0.88, 0.9999])
def test_the_held_share_is_the_schedulers(asked: float) -> None:
    job = JobSpec(name="j", team="t", gpu_fraction=asked)
    (request,) = requests_for(job, ["h100-sxm5-80gb"])
    assert held_gpu_fraction(asked) == request.eighths / 8
    assert held_gpu_fraction(asked) >= asked
    assert (held_gpu_fraction(asked) * 8).is_integer()


def test_the_api_says_what_a_share_holds(shares: Portal) -> None:
    plane = shares.plane
    auth = plane.auth("vision-member")
    for asked, held in ((0.3, 0.375), (0.0001, 0.125), (0.5, 0.5)):
        r = plane.client.post(
            "/api/v1/jobs", json={"name": "s", "gpu_fraction": asked}, headers=auth
        )
        assert r.status_code == 201, r.text
        assert r.json()["held_gpu_fraction"] == held
        assert r.json()["request"]["gpu_fraction"] == asked  # what was asked is kept
        got = plane.client.get(f"/api/v1/jobs/{r.json()['id']}", headers=auth).json()
        assert got["held_gpu_fraction"] == held
    r = plane.client.post("/api/v1/jobs", json={"name": "w", "gpus": 1}, headers=auth)
    assert r.json()["held_gpu_fraction"] is None
    spec = plane.client.get("/openapi.json").json()["components"]["schemas"]["JobOut"]
    assert "eighths" in spec["properties"]["held_gpu_fraction"]["description"]


def test_the_job_page_shows_asked_and_held(shares: Portal) -> None:
    plane = shares.plane
    job = shares.submit_api("vision-member", name="nb", kind="interactive", gpu_fraction=0.3)
    plane.cycle()
    plane.cycle(1)
    with plane.sessions() as s:
        (milli,) = [a.milli for a in s.query(Allocation).filter_by(job_id=job)]
    assert milli == 375  # the scheduler holds three eighths
    page = shares.as_("vision-member").get(f"/portal/jobs/{job}").text
    request = re.search(r'<dd id="job-request">(.*?)</dd>', page, re.S)
    assert request is not None
    said = html_lib.unescape(re.sub(r"<[^>]+>", "", request.group(1)))
    assert "0.3 of a GPU asked, 0.375 held" in said
    assert "whole eighths" in said
    assert "billed" in said
    whole = shares.submit_api("vision-member", name="w", gpus=2)
    page = shares.as_("vision-member").get(f"/portal/jobs/{whole}").text
    request = re.search(r'<dd id="job-request">(.*?)</dd>', page, re.S)
    assert request is not None
    assert "held" not in request.group(1)


def test_the_form_offers_eighths_and_shows_the_rounding(shares: Portal) -> None:
    b = shares.as_("vision-member")
    page = b.get("/portal/submit").text
    field = re.search(r'<input type="number" id="gpu-fraction"[^>]*>', page)
    assert field is not None
    assert 'step="0.125"' in field.group(0)
    assert 'min="0.125"' in field.group(0)
    assert 'max="0.875"' in field.group(0)
    help_text = re.search(r'id="gpu-fraction-help">(.*?)</p>', page, re.S)
    assert help_text is not None
    assert "eighths" in help_text.group(1)
    assert "billed" in help_text.group(1)
    r = b.post("/portal/submit", SUBMIT)
    assert r.status_code == 200
    held = re.search(r'id="fraction-held">(.*?)</p>', r.text, re.S)
    assert held is not None
    said = html_lib.unescape(re.sub(r"<[^>]+>", "", held.group(1)))
    assert "0.3 of a GPU asked: 0.375 held" in said
    # a share already in eighths is held as asked, and says so without a warning
    r = b.post("/portal/submit", {**SUBMIT, "gpu_fraction": "0.25"})
    held = re.search(r'id="fraction-held">(.*?)</p>', r.text, re.S)
    assert held is not None
    assert "0.25 of a GPU held" in held.group(1)
    r = b.post("/portal/submit", {**SUBMIT, "request_type": "gpus", "gpus": "1"})
    assert 'id="fraction-held"' not in r.text
    assert math.isclose(held_gpu_fraction(0.25), 0.25)
