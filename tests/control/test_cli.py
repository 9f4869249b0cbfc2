"""`gpufleet db|admin` end to end through the CLI: happy paths and bad input (exit 2, one
message, nothing changed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from gpufleet.cli.main import main
from gpufleet.control.db import make_engine, sessions
from gpufleet.control.models import AuditEntry, Quota, Team, Token


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/cli.db"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_admin_lifecycle(db: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "admin", "init", "--db", db)
    assert code == 0
    token = out.strip().splitlines()[-1]
    assert token.startswith("gpf_")
    assert run(capsys, "admin", "team", "create", "vision", "--db", db, "--cohort", "ml")[0] == 0
    code, out, _ = run(
        capsys, "admin", "team", "set-quota", "vision", "H100", "--guaranteed", "16", "--db", db
    )
    assert code == 0, out
    assert "h100-sxm5-80gb" in out  # the alias resolved to the catalog name
    teams = tmp_path / "teams.yaml"
    teams.write_text(
        "kind: teams\nteams:\n  - {name: nlp, quota: {h100-sxm5-80gb: 8}}\n"
        "  - {name: vision, quota: {h100-sxm5-80gb: 99}}\n"
    )
    code, out, _ = run(capsys, "admin", "team", "import", str(teams), "--db", db)
    assert code == 0
    assert "nlp" in out
    code, out, _ = run(capsys, "admin", "team", "list", "--db", db, "--format", "json")
    assert code == 0
    assert '"guaranteed_gpus": 16' in out  # import kept the existing team as it was
    code, out, _ = run(
        capsys,
        "admin",
        "token",
        "create",
        "--db",
        db,
        "--team",
        "vision",
        "--role",
        "member",
        "--user",
        "ana",
        "--expires",
        "90d",
    )
    assert code == 0
    member = out.strip().splitlines()[-1]
    assert member.startswith("gpf_")
    code, out, _ = run(capsys, "admin", "token", "list", "--db", db)
    assert member not in out  # never shown again
    assert run(capsys, "admin", "token", "revoke", "2", "--db", db)[0] == 0
    assert run(capsys, "db", "check", "--db", db)[0] == 0
    with sessions(make_engine(db))() as s:
        assert s.scalar(select(func.count()).select_from(Team)) == 2
        assert s.scalar(select(Quota.guaranteed_gpus).join(Team).where(Team.name == "vision")) == 16
        revoked = s.scalar(select(Token.revoked_s).where(Token.id == 2))
        assert revoked is not None
        actions = set(s.scalars(select(AuditEntry.action)))
    assert {"admin.init", "team.create", "quota.set", "token.create", "token.revoke"} <= actions


BAD = [
    pytest.param(["admin", "team", "create", "Bad_Name"], "DNS label", id="team-name"),
    pytest.param(
        ["admin", "team", "set-quota", "nope", "h100-sxm5-80gb", "--guaranteed", "1"],
        "unknown team 'nope'",
        id="unknown-team",
    ),
    pytest.param(
        ["admin", "team", "set-quota", "vision", "h101", "--guaranteed", "1"],
        "h101",
        id="unknown-flavor",
    ),
    pytest.param(
        ["admin", "token", "create", "--role", "boss", "--user", "x", "--team", "vision"],
        "use one of admin, lead, member, viewer",
        id="bad-role",
    ),
    pytest.param(
        ["admin", "token", "create", "--role", "member", "--user", "x"],
        "belongs to a team",
        id="member-without-team",
    ),
    pytest.param(
        [
            "admin",
            "token",
            "create",
            "--role",
            "member",
            "--user",
            "x",
            "--team",
            "vision",
            "--expires",
            "soon",
        ],
        "--expires",
        id="bad-expiry",
    ),
    pytest.param(["admin", "token", "revoke", "99"], "no token with id 99", id="unknown-token"),
    pytest.param(["admin", "init"], "already has an admin", id="second-init"),
    pytest.param(["admin", "team", "create", "vision"], "exists already", id="duplicate-team"),
]


@pytest.mark.parametrize(("args", "needle"), BAD)
def test_bad_input_exits_2_and_changes_nothing(
    db: str, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    run(capsys, "admin", "init", "--db", db)
    run(capsys, "admin", "team", "create", "vision", "--db", db)
    with sessions(make_engine(db))() as s:
        before = s.scalar(select(func.count()).select_from(AuditEntry))
    code, out, err = run(capsys, *args, "--db", db)
    assert code == 2, (out, err)
    assert needle in err
    assert "Traceback" not in err
    with sessions(make_engine(db))() as s:
        assert s.scalar(select(func.count()).select_from(AuditEntry)) == before


def test_store_errors_are_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "admin", "team", "list", "--db", "mysql://x@y/z")
    assert code == 2
    assert "SQLite or PostgreSQL" in err
    fresh = f"sqlite:///{tmp_path}/fresh.db"
    code, _, err = run(capsys, "admin", "team", "list", "--db", fresh)
    assert code == 2
    assert "gpufleet db upgrade" in err
    assert run(capsys, "db", "upgrade", "--db", fresh)[0] == 0
    code, _, err = run(capsys, "serve", "--cluster", str(tmp_path / "none.yaml"), "--db", fresh)
    assert code == 2
    assert "none.yaml" in err
