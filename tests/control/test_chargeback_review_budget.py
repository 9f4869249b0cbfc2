"""Budgets as a team lead reads them: the percentage never reaches a threshold that has not
fired, and a budget that is no number of GPU-hours is refused at the CLI (exit 2).

Review findings: 999.9999999 of a 1,000 GPU-hour budget read "used 100% … (alert at 80%)"
while the team was under; `gpufleet admin team create|update --budget-gpu-h inf` (or
1e400, or nan) was stored, and every later `GET /teams` answered 422 for everyone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from gpufleet.cli.main import main
from gpufleet.control.chargeback_budget import budget_status
from gpufleet.control.db import make_engine, sessions
from gpufleet.control.models import Team


@pytest.mark.parametrize(
    ("used", "budget", "alert"),
    [
        pytest.param(
            999.9999999,
            1000.0,
            "the team has used 99% (999.9999999 GPU-hours) of its 1,000 GPU-hour monthly "
            "budget (alert at 80%)",
            id="a hair under the budget reads 99%, not 100% beside 'alert at 80%'",
        ),
        pytest.param(
            1000.0,
            1000.0,
            "the team has used 100% (1,000 GPU-hours) of its 1,000 GPU-hour monthly budget "
            "(alert at 100%, past 80% too)",
            id="exactly the budget reads 100%",
        ),
        pytest.param(
            29.0,
            100.0,
            None,
            id="29 of 100 is 29% (float reads 28.999...): no alert",
        ),
        pytest.param(
            850.0,
            1000.0,
            "the team has used 85% (850 GPU-hours) of its 1,000 GPU-hour monthly budget "
            "(alert at 80%)",
            id="85%",
        ),
    ],
)
def test_the_percentage_never_reaches_a_threshold_that_has_not_fired(
    used: float, budget: float, alert: str | None
) -> None:
    status = budget_status(used, budget)
    assert status.alerts == (() if alert is None else (alert,))
    assert status.over is (used > budget)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


@pytest.mark.parametrize("value", ["inf", "nan", "1e400", "-inf"])
def test_a_budget_that_is_no_number_of_gpu_hours_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    db = f"sqlite:///{tmp_path}/cli.db"
    assert run(capsys, "admin", "init", "--db", db)[0] == 0
    code, err = run(
        capsys, "admin", "team", "create", "vision", "--budget-gpu-h", value, "--db", db
    )
    assert code == 2
    assert "--budget-gpu-h: a monthly budget is a finite number of GPU-hours" in err
    assert "Traceback" not in err
    assert (
        run(capsys, "admin", "team", "create", "vision", "--budget-gpu-h", "10", "--db", db)[0] == 0
    )
    code, err = run(
        capsys, "admin", "team", "update", "vision", "--budget-gpu-h", value, "--db", db
    )
    assert code == 2
    assert "finite number of GPU-hours" in err
    with sessions(make_engine(db))() as s:
        assert s.scalars(select(Team.monthly_budget_gpu_h)).all() == [10.0]


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1.0])
def test_the_admin_functions_refuse_a_budget_that_is_not_gpu_hours(
    sqlite_engine: Engine, value: float
) -> None:
    """The rule is the store's, not only the CLI's: whatever calls `admin.create_team` or
    `update_team` cannot store an infinite, NaN or negative budget."""
    from gpufleet.control import admin

    maker = sessions(sqlite_engine)
    with maker.begin() as s:
        admin.init(s, 0.0)
        admin.create_team(s, admin.cli_principal(), "ok", 0.0)
    with pytest.raises(admin.AdminError, match="budget"), maker.begin() as s:
        admin.create_team(s, admin.cli_principal(), "vision", 0.0, monthly_budget_gpu_h=value)
    with pytest.raises(admin.AdminError, match="budget"), maker.begin() as s:
        admin.update_team(s, admin.cli_principal(), "ok", 0.0, monthly_budget_gpu_h=value)
    with maker() as s:
        assert s.scalars(select(Team.name)).all() == ["ok"]
        assert s.scalar(select(Team.monthly_budget_gpu_h)) is None
