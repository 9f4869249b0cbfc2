"""Admin pages: teams, quotas, rates, nodes, tokens (shown once) and the audit log, through
the admin API's own handlers."""

from __future__ import annotations

import re

from .conftest import Portal, login


def test_an_admin_creates_a_team_sets_a_quota_and_issues_a_token(portal: Portal) -> None:
    admin = portal.as_("admin")
    r = admin.post(
        "/portal/admin/teams",
        {
            "name": "speech",
            "cohort": "ml",
            "weight": "2",
            "default_priority": "standard",
            "projects": "asr, tts",
            "monthly_budget_gpu_h": "100",
        },
    )
    assert r.status_code == 200
    assert "Team speech created." in r.text
    r = admin.post(
        "/portal/admin/quotas",
        {
            "team": "speech",
            "flavor": "h100-sxm5-80gb",
            "guaranteed_gpus": "4",
            "limit_gpus": "8",
            "borrowing": "on",
            "lending": "on",
        },
    )
    assert r.status_code == 200
    assert "4 guaranteed GPUs" in r.text
    r = admin.post(
        "/portal/admin/tokens",
        {"user": "sam", "role": "lead", "team": "speech", "expires_in": "90d"},
    )
    assert r.status_code == 200
    token = re.search(r'id="new-token" readonly value="(gpf_[^"]+)"', r.text).group(1)  # type: ignore[union-attr]
    assert token not in admin.get("/portal/admin/tokens").text  # shown once
    sam = portal.browser()
    assert login(sam.client, token).status_code == 303
    page = sam.get("/portal/team").text
    assert "Team speech" in page
    assert "asr, tts" in page
    audit = admin.get("/portal/admin/audit").text
    log = re.search(r'id="admin-audit">(.*?)</table>', audit, re.S).group(1)  # type: ignore[union-attr]
    for action in ("team.create", "quota.set", "token.create"):
        assert action in log
    assert token not in log


def test_revoking_a_token_from_the_page_ends_its_sessions(portal: Portal) -> None:
    member = portal.as_("nlp-member")
    admin = portal.as_("admin")
    page = admin.get("/portal/admin/tokens").text
    token_id = re.search(
        r'<tr id="token-(\d+)"><th scope="row">\d+</th><td><code>[^<]*</code>'
        r"</td><td>nlp-member</td>",
        page,
    ).group(1)  # type: ignore[union-attr]
    r = admin.post(f"/portal/admin/tokens/{token_id}/revoke")
    assert r.status_code == 200
    assert "revoked" in r.text
    assert member.get("/portal/jobs", follow_redirects=False).status_code == 303


def test_bad_admin_input_is_explained_and_changes_nothing(portal: Portal) -> None:
    admin = portal.as_("admin")
    r = admin.post("/portal/admin/teams", {"name": "Bad Name"})
    assert r.status_code == 409
    assert 'id="admin-error"' in r.text
    assert "DNS label" in r.text
    r = admin.post("/portal/admin/teams", {"name": "ok", "weight": "-1"})
    assert r.status_code == 422
    assert "weight" in r.text
    r = admin.post(
        "/portal/admin/quotas", {"team": "nope", "flavor": "h100-sxm5-80gb", "guaranteed_gpus": "1"}
    )
    assert r.status_code == 422
    assert "unknown team" in r.text
    r = admin.post("/portal/admin/rates", {"flavor": "h100-sxm5-80gb", "usd_per_gpu_h": "x"})
    assert r.status_code == 422
    r = admin.post("/portal/admin/tokens", {"user": "x", "role": "member", "expires_in": "soon"})
    assert r.status_code == 422
    assert "expires in" in r.text
    page = admin.get("/portal/admin").text
    assert ">ok<" not in page
    assert "Bad Name" not in page


def test_rates_nodes_and_team_changes(portal: Portal) -> None:
    admin = portal.as_("admin")
    r = admin.post("/portal/admin/rates", {"flavor": "h100-sxm5-80gb", "usd_per_gpu_h": "3.1"})
    assert r.status_code == 200
    assert re.search(r"h100-sxm5-80gb</th><td class=\"num\">3.10<", r.text)
    assert "Rate of h100-sxm5-80gb set to 3.10 USD per GPU-hour from now." in r.text
    # a later rate: the one in force stays, the history shows both
    r = admin.post(
        "/portal/admin/rates",
        {"flavor": "h100-sxm5-80gb", "usd_per_gpu_h": "0.0000004"},
    )
    assert r.status_code == 422
    assert "below the resolution" in r.text
    r = admin.post(
        "/portal/admin/rates",
        {"flavor": "h100-sxm5-80gb", "usd_per_gpu_h": "4.1234567", "effective": "2099-01-01"},
    )
    assert r.status_code == 200, r.text
    assert "set to 4.123457 USD per GPU-hour from 2099-01-01 00:00 UTC." in r.text
    assert re.search(r"h100-sxm5-80gb</th><td class=\"num\">3.10<", r.text)  # still now
    history = r.text.split('id="admin-rate-history"', 1)[1].split("</table>", 1)[0]
    assert history.count("<tr>") == 3  # a header and two rates
    assert "in force" in history
    r = admin.post(
        "/portal/admin/rates",
        {"flavor": "h100-sxm5-80gb", "usd_per_gpu_h": "5", "effective": "2020-01-01"},
    )
    assert r.status_code == 422
    assert "reprice=true" in r.text
    r = admin.post(
        "/portal/admin/rates",
        {
            "flavor": "h100-sxm5-80gb",
            "usd_per_gpu_h": "5",
            "effective": "2020-01-01",
            "reprice": "on",
        },
    )
    assert r.status_code == 200, r.text
    assert "It re-prices GPU time already used." in r.text
    assert "re-priced time already used" in r.text
    r = admin.post("/portal/admin/nodes", {"node": "h100-1", "state": "drain", "reason": "fan"})
    assert r.status_code == 200
    assert "Node h100-1 is now drain." in r.text
    r = admin.post("/portal/admin/teams/update", {"team": "nlp", "weight": "3"})
    assert r.status_code == 200
    assert re.search(r">nlp</a></th><td>ml</td><td class=\"num\">3.0<", r.text)


def test_only_admins_administer(portal: Portal) -> None:
    lead = portal.as_("vision-lead")
    assert lead.get("/portal/admin").status_code == 403
    r = lead.post("/portal/admin/teams", {"name": "sneaky"})
    assert r.status_code == 403
    assert "sneaky" not in portal.as_("admin").get("/portal/admin").text


def test_a_token_row_with_an_impossible_expiry_does_not_break_the_page(portal: Portal) -> None:
    """Older versions stored expiries such as 1e308 and -1e308; the page renders, and lists
    only the first as live."""
    from sqlalchemy import update

    from gpufleet.control.models import Token

    admin = portal.as_("admin")
    for n, expiry in enumerate((1e308, -1e308)):
        r = admin.post("/portal/admin/tokens", {"user": f"odd{n}", "role": "member", "team": "nlp"})
        assert r.status_code == 200
        with portal.plane.sessions.begin() as s:
            s.execute(update(Token).where(Token.user.has(name=f"odd{n}")).values(expires_s=expiry))
    page = admin.get("/portal/admin/tokens")
    assert page.status_code == 200, page.text[:500]
    assert "odd0" in page.text  # 1e308: far in the future, still live
    assert "1 revoked or expired token not listed" in page.text  # -1e308: long expired


def test_each_section_has_its_own_page_and_the_quota_form_shows_the_quota(portal: Portal) -> None:
    admin = portal.as_("admin")
    pages = {
        k: admin.get(f"/portal/admin/{k}") for k in ("teams", "nodes", "rates", "tokens", "audit")
    }
    assert all(r.status_code == 200 for r in pages.values())
    assert 'id="admin-nodes"' in pages["nodes"].text
    assert 'id="admin-tokens"' not in pages["nodes"].text  # one section per page
    assert 'aria-current="page">Nodes<' in pages["nodes"].text
    assert admin.get("/portal/admin/nope").status_code == 404
    # the quota form is filled in with the quota it edits, not zeros
    r = admin.post(
        "/portal/admin/quotas",
        {
            "team": "nlp",
            "flavor": "h100-sxm5-80gb",
            "guaranteed_gpus": "6",
            "limit_gpus": "12",
            "borrowing": "on",
        },
    )
    assert r.status_code == 200
    page = admin.get("/portal/admin/teams?team=nlp&flavor=h100-sxm5-80gb").text
    form = re.search(r'<form[^>]*id="quota-form">(.*?)</form>', page, re.S).group(1)  # type: ignore[union-attr]
    assert (
        'id="quota-guaranteed" name="guaranteed_gpus" type="number" min="0" step="1" value="6"'
        in form
    )
    assert 'name="limit_gpus" type="number" min="0" step="1" value="12"' in form
    assert "<option selected>nlp</option>" in form
    assert 'id="quota-lending" name="lending" value="on">' in form  # lending off now
    # a destructive form asks first (portal.js reads data-confirm)
    assert "data-confirm=" in pages["nodes"].text
    assert "data-confirm=" in pages["tokens"].text
