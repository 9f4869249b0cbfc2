"""The planner (the `gpufleet plan` engine and report in the page) and what-if waits."""

from __future__ import annotations

import html
import re
from typing import Any

from .conftest import Portal

CHAT: dict[str, Any] = {
    "name": "chat-70b",
    "workload_kind": "inference",
    "model": "llama-2-70b",
    "deployment": "both",
    "serving_precision": "fp8",
    "engine": "vllm",
    "input_tokens": "1024",
    "output_tokens": "256",
    "request_rate": "50",
    "ttft_p99_ms": "1000",
    "tpot_p99_ms": "100",
    "action": "plan",
}


def test_the_planner_renders_the_plan_report(portal: Portal) -> None:
    b = portal.as_("vision-member")
    page = b.get("/portal/planner")
    assert page.status_code == 200
    assert 'id="run-plan"' in page.text
    r = b.post("/portal/planner", CHAT)
    assert r.status_code == 200, r.text[:500]
    assert re.search(r'id="plan-summary"><strong>[^<]+</strong>', r.text)  # the decision
    summary = re.search(r'id="plan-fleet-gpus">([\d,]+) × ([\w.-]+), ', r.text)
    assert summary
    assert int(summary.group(1).replace(",", "")) > 0
    frame = re.search(
        r'<iframe class="report" id="plan-report" title="Plan report" sandbox '
        r'srcdoc="(.*?)"></iframe>',
        r.text,
        re.S,
    )
    assert frame
    report = html.unescape(frame.group(1))
    assert report.startswith("<!doctype html>") or report.lstrip().lower().startswith("<!doctype")
    assert "chat-70b" in report
    assert summary.group(2) in report
    download = b.post("/portal/planner", {**CHAT, "action": "download"})
    assert download.headers["content-disposition"] == 'attachment; filename="plan-chat-70b.html"'
    assert download.text == report  # the same file `gpufleet plan` writes as plan.html


def test_planner_problems_are_shown_next_to_fields(portal: Portal) -> None:
    b = portal.as_("vision-member")
    r = b.post("/portal/planner", {**CHAT, "model": "llama-9-1t", "request_rate": "-3"})
    assert r.status_code == 422
    assert re.search(r'id="model-error">unknown model preset', r.text)
    assert re.search(r'id="request-rate-error">', r.text)
    r = b.post("/portal/planner", {**CHAT, "spec_yaml": "kind: plan\nworkloads: [\n"})
    assert r.status_code == 422
    assert 'id="spec-yaml-error">not valid YAML' in r.text


def test_the_planner_reads_a_pasted_spec(portal: Portal) -> None:
    spec = """
kind: plan
name: pasted
deployment: cloud
workloads:
  - name: chat
    kind: inference
    model: {preset: llama-3-8b}
    serving: {precision: fp8, engine: vllm, input_tokens: 512, output_tokens: 128,
              request_rate: 5}
"""
    r = portal.as_("vision-member").post("/portal/planner", {**CHAT, "spec_yaml": spec})
    assert r.status_code == 200
    assert 'id="plan-summary"' in r.text
    assert "pasted" in html.unescape(r.text)


def test_what_if_more_gpus_shortens_the_predicted_waits(portal: Portal) -> None:
    plane = portal.plane
    portal.submit_api(
        "vision-member",
        name="hog",
        gpus=8,
        workers=2,
        preemptible=False,
        accelerator="h100-sxm5-80gb",
        runtime_estimate_s=36_000,
    )
    plane.cycle()
    plane.cycle(1)
    waiting = portal.submit_api(
        "vision-member", name="w", gpus=8, accelerator="h100-sxm5-80gb", runtime_estimate_s=600
    )
    plane.cycle(10)
    b = portal.as_("vision-member")
    r = b.get("/portal/whatif?run=1&add_gpus=8&accelerator=h100-sxm5-80gb&profile=default")
    assert r.status_code == 200
    row = re.search(rf"#{waiting}</a></th>(.*?)</tr>", r.text, re.S).group(1)  # type: ignore[union-attr]
    cells = re.findall(r"<td>(.*?)</td>", row)
    today, scenario = cells[-2], cells[-1]
    assert "h" in today  # behind a 10-hour job
    assert today != scenario
    assert "min" in scenario or " s" in scenario
    assert "24 h100-sxm5-80gb" in r.text
    other = portal.as_("nlp-member").get("/portal/whatif?run=1&add_gpus=8").text
    assert 'id="whatif-empty"' in other  # the waiting job is vision's
    assert portal.as_("vision-member").get("/portal/whatif").status_code == 200  # no run yet
    bad = b.get("/portal/whatif?run=1&add_gpus=99999")
    assert bad.status_code == 422
    assert "add between 0 and" in bad.text
