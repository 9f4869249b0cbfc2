"""Submit: validation messages next to their fields (from `JobRequest` and `jobs.submit`),
nothing stored when refused, a preview of the request, and the job's page when accepted."""

from __future__ import annotations

import html as html_lib
import json
import re
from typing import Any

import pytest
from sqlalchemy import func, select

from gpufleet.control.models import Job

from .conftest import Portal

GOOD: dict[str, Any] = {
    "name": "resnet-50",
    "project": "p1",
    "kind": "training",
    "request_type": "gpus",
    "gpus": "4",
    "workers": "1",
    "priority_class": "",
    "checkpoint_interval": "30min",
    "runtime_estimate": "2h",
    "command": "python train.py --data '/data/imagenet 1k'",
    "env": "EPOCHS=3\n",
    "action": "submit",
}


def _jobs(portal: Portal) -> int:
    with portal.plane.sessions() as s:
        return s.scalar(select(func.count()).select_from(Job)) or 0


def _error(html: str, field: str) -> str:
    found = re.search(rf'<p class="field-error" id="{field}-error">(.*?)</p>', html, re.S)
    assert found, f"no error next to {field}"
    return html_lib.unescape(found.group(1))


def test_a_valid_form_queues_the_job_and_shows_its_page(portal: Portal) -> None:
    b = portal.as_("vision-member")
    r = b.post("/portal/submit", GOOD)  # preemptible unticked: a checkbox sends nothing
    assert r.status_code == 303
    job_id = int(r.headers["location"].rsplit("/", 1)[1])
    got = portal.plane.client.get(
        f"/api/v1/jobs/{job_id}", headers=portal.plane.auth("vision-member")
    ).json()
    assert got["command"] == ["python", "train.py", "--data", "/data/imagenet 1k"]
    assert got["checkpoint_interval_s"] == 1800
    assert got["runtime_estimate_s"] == 7200
    assert got["request"] == {"gpus": 4, "workers": 1}
    assert got["preemptible"] is False
    assert got["project"] == "p1"
    assert got["user"] == "vision-member"
    assert got["team"] == "vision"
    page = b.get(r.headers["location"]).text
    assert "resnet-50" in page
    assert "pending" in page


def test_field_errors_are_shown_next_to_fields_and_nothing_is_stored(portal: Portal) -> None:
    b = portal.as_("vision-member")
    bad = {
        **GOOD,
        "name": "bad name!",
        "runtime_estimate": "2 fortnights",
        "command": "python 'unclosed",
        "checkpoint_interval": "90d",
    }
    r = b.post("/portal/submit", bad)
    assert r.status_code == 422
    assert "letters, digits" in _error(r.text, "name")
    assert "fortnights" in _error(r.text, "runtime-estimate")
    assert "cannot split" in _error(r.text, "command")
    assert _error(r.text, "checkpoint-interval") == "at most 30 d"
    assert 'id="name" name="name" value="bad name!"' in r.text  # the input is kept
    assert 'aria-invalid="true" aria-describedby="name-error"' in r.text
    assert _jobs(portal) == 0


def test_errors_from_the_cluster_check_land_on_their_fields(portal: Portal) -> None:
    b = portal.as_("vision-member")
    cases = [
        ({"gpus": "9"}, "gpus", "largest node has 8"),
        ({"gpus": "8", "workers": "4"}, "workers", "at most 16"),
        ({"request_type": "mig_profile", "mig_profile": "9g.99gb"}, "mig-profile", "unknown MIG"),
        (
            {"request_type": "mig_profile", "mig_profile": "3g.40gb", "workers": "2"},
            "workers",
            "workers > 1",
        ),
        ({"accelerator": "b200"}, "accelerator", "unknown accelerator"),
        ({"priority_class": "urgent"}, "priority-class", "unknown priority class"),
        ({"project": "p9"}, "project", "unknown project"),
    ]
    for change, field, message in cases:
        r = b.post("/portal/submit", {**GOOD, **change})
        assert r.status_code == 422, change
        assert message in _error(r.text, field), (change, r.text[:300])
    # this cluster shares no GPU by fraction, so the form has no such field: the error
    # goes to the top of the form
    r = b.post("/portal/submit", {**GOOD, "request_type": "gpu_fraction", "gpu_fraction": "0.5"})
    assert r.status_code == 422
    assert 'id="gpu-fraction"' not in r.text
    assert "no node of this cluster shares GPUs" in html_lib.unescape(
        re.search(r'id="form-error">(.*?)</p>', r.text, re.S).group(1)  # type: ignore[union-attr]
    )
    assert _jobs(portal) == 0


def test_a_viewer_can_preview_but_not_submit(portal: Portal) -> None:
    b = portal.as_("vision-viewer")
    page = b.get("/portal/submit").text
    assert 'id="submit-job"' not in page
    assert 'id="preview-job"' in page
    r = b.post("/portal/submit", GOOD)
    assert r.status_code == 422
    assert "viewer token can only read" in r.text
    assert _jobs(portal) == 0


def test_the_preview_is_the_request_body_and_stores_nothing(portal: Portal) -> None:
    b = portal.as_("vision-member")
    r = b.post("/portal/submit", {**GOOD, "action": "preview", "preemptible": "on"})
    assert r.status_code == 200
    pre = re.search(r'<pre id="spec-preview" tabindex="0">(.*?)</pre>', r.text, re.S)
    assert pre
    body = json.loads(html_lib.unescape(pre.group(1)))
    assert body == {
        "name": "resnet-50",
        "project": "p1",
        "kind": "training",
        "gpus": 4,
        "checkpoint_interval_s": 1800.0,
        "runtime_estimate_s": 7200.0,
        "command": ["python", "train.py", "--data", "/data/imagenet 1k"],
        "env": {"EPOCHS": "3"},
    }
    assert _jobs(portal) == 0
    r = portal.plane.client.post(  # the API takes the previewed body as it is
        "/api/v1/jobs", json=body, headers=portal.plane.auth("vision-member")
    )
    assert r.status_code == 201


def test_an_admin_names_the_team(portal: Portal) -> None:
    b = portal.as_("admin")
    r = b.post("/portal/submit", GOOD)
    assert r.status_code == 422
    assert "which team" in _error(r.text, "team")
    r = b.post("/portal/submit", {**GOOD, "team": "nlp"})
    assert r.status_code == 303


def test_data_staging_rows_become_the_requests_data_and_skip_empty_rows(portal: Portal) -> None:
    b = portal.as_("vision-member")
    rows = {
        "data_source_0": "/datasets/imagenet/val",
        "data_target_0": "data/val",
        "data_source_1": "",
        "data_target_1": "",
        "data_source_2": "/datasets/labels.csv",
        "data_target_2": "/scratch/labels.csv",
    }
    r = b.post("/portal/submit", {**GOOD, **rows})
    assert r.status_code == 303, r.text[:500]
    job_id = int(r.headers["location"].rsplit("/", 1)[1])
    with portal.plane.sessions() as s:
        job = s.get(Job, job_id)
        assert job is not None
        assert job.data == [
            {"source": "/datasets/imagenet/val", "target": "data/val"},
            {"source": "/datasets/labels.csv", "target": "/scratch/labels.csv"},
        ]


@pytest.mark.parametrize(
    ("rows", "field", "message"),
    [
        pytest.param(
            {"data_source_0": "/d/a", "data_target_0": ""},
            "data-target-0",
            "where to put it",
            id="source-without-target",
        ),
        pytest.param(
            {"data_source_0": "", "data_target_0": "data/a"},
            "data-source-0",
            "path to copy from",
            id="target-without-source",
        ),
        pytest.param(  # row 0 empty: the request's data[0] is form row 1
            {
                "data_source_0": "",
                "data_target_0": "",
                "data_source_1": "/d/" + "x" * 5000,
                "data_target_1": "t",
            },
            "data-source-1",
            "at most 4096 characters",
            id="too-long-lands-on-its-own-row",
        ),
    ],
)
def test_data_staging_errors_are_next_to_their_row(
    portal: Portal, rows: dict[str, str], field: str, message: str
) -> None:
    r = portal.as_("vision-member").post("/portal/submit", {**GOOD, **rows})
    assert r.status_code == 422
    assert message in _error(r.text, field)
    assert f'aria-describedby="{field}-error"' in r.text
    assert _jobs(portal) == 0


def test_add_another_input_keeps_the_form_and_adds_an_empty_row(portal: Portal) -> None:
    b = portal.as_("vision-member")
    page = b.get("/portal/submit").text
    assert 'id="data-source-0"' in page
    assert 'id="data-source-1"' not in page
    rows = {"data_source_0": "/d/a", "data_target_0": "a"}
    r = b.post("/portal/submit", {**GOOD, **rows, "action": "add_data"})
    assert r.status_code == 200
    assert 'id="data-source-0" name="data_source_0" value="/d/a"' in r.text
    assert 'id="data-source-1" name="data_source_1" value=""' in r.text
    assert 'id="name" name="name" value="resnet-50"' in r.text
    assert _jobs(portal) == 0


def test_pressing_enter_previews_rather_than_adding_a_row(portal: Portal) -> None:
    """Implicit submission uses the form's first submit button: it must be Preview."""
    page = portal.as_("vision-member").get("/portal/submit").text
    form = page[page.index('id="submit-form"') :]
    first = re.search(r"<button[^>]*>", form)
    assert first
    assert 'value="preview"' in first.group(0)


def test_the_error_summary_links_to_each_field_with_a_problem(portal: Portal) -> None:
    r = portal.as_("vision-member").post(
        "/portal/submit", {**GOOD, "gpus": "0", "data_source_1": "/d/a", "data_target_1": ""}
    )
    assert r.status_code == 422
    summary = re.search(r'<ul id="error-summary">(.*?)</ul>', r.text, re.S)
    assert summary
    links = dict(re.findall(r'<a href="#([^"]+)">([^<]+)</a>', summary.group(1)))
    assert list(links.items()) == [  # in the order of the form
        ("gpus", "GPUs per worker"),
        ("data-target-1", "Input 2: to"),
    ]
    for anchor in links:
        assert f'id="{anchor}"' in r.text  # each link has its field on the page
    assert "at least 1" in _error(r.text, "gpus")
