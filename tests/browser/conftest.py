"""Browser tests: Playwright for Python drives Debian's Chromium against a live portal.

The server is uvicorn in a thread of the test process, serving `create_app(ctx)` of the
control plane `tests/control/conftest.build_plane` builds (SQLite in the test's tmp dir,
the emulated executor, a manual clock, tokens for admin and vision/nlp lead/member/viewer).
Nothing cycles the reconciler in the background: a test calls `live.cycle()`, so queue
positions, reasons and GPU-hours are the same on every run.

Each test gets a fresh store and server and a fresh browser context (its own cookies);
Chromium itself is launched once per worker. Full-page screenshots go to `artifacts/`
(gitignored), one per page a test visits, plus one for any test that fails.

Every test module here is skipped, with the reason, where Playwright (a dev dependency) or the
browser (Debian's `chromium`, which `.ci/run` installs) is missing; Playwright's own
browser downloads are never used (`playwright install` is not needed).
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import pytest
import uvicorn
from sqlalchemy import Engine

from control.conftest import CLUSTER, Plane, build_plane
from gpufleet.cluster import Cluster
from gpufleet.control.db import make_engine, upgrade
from gpufleet.specs.cluster import ClusterSpec

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, ViewportSize

CHROMIUM = Path(os.environ.get("GPUFLEET_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).parent / "artifacts"
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}  # a laptop screen
TIMEOUT_MS = 15_000  # generous for a loaded 2-core CI machine; passing tests never wait it
# planning is compute: the 70B form plans on every whole-server GPU count (~6 s alone), which
# a 2-core machine running the rest of the suite beside it stretched past 15 s
PLAN_TIMEOUT_MS = 60_000


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        return f"Playwright for Python cannot be imported ({exc}; a dev dependency: `uv sync`)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (Debian's `chromium` package; .ci/run installs it)"
    return None


REAL_TIMERS = "real_timers"  # a test whose page keeps the browser's own clock


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{REAL_TIMERS}: the page keeps the browser's own clock")


MISSING = _missing()


class _Unrunnable(pytest.Module):
    """A test module of this directory where the browser is missing: reported skipped,
    with the reason, and never imported (it imports Playwright)."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        pytest.skip(f"the browser tests need Playwright and Chromium: {MISSING}")


def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    if MISSING and module_path.name.startswith("test_"):
        return _Unrunnable.from_parent(parent, path=module_path)
    return None


@dataclass
class Live:
    """A running portal: its URL, and the control plane behind it for seeding and cycling."""

    url: str
    plane: Plane

    def token(self, who: str) -> str:
        return self.plane.tokens[who]

    def cycle(self, advance_s: float = 0.0) -> None:
        """Move the clock, then run one scheduler cycle (the browser is idle meanwhile)."""
        self.plane.cycle(advance_s)

    def api(self, method: str, path: str, who: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(
            method,
            f"{self.url}{path}",
            headers={"Authorization": f"Bearer {self.token(who)}"},
            timeout=30,
            **kwargs,
        )

    def submit(self, who: str, **body: Any) -> int:
        """Submit a job through the API as `who`; its id."""
        body.setdefault("name", "job")
        r = self.api("POST", "/api/v1/jobs", who, json=body)
        assert r.status_code == 201, r.text
        return int(r.json()["id"])


def read_gpus(live: Live, seconds: float, *, idle_after_s: float = 300.0) -> None:
    """Cycle for `seconds` in 15-second steps, reading the GPUs through the emulated source
    and the telemetry loop at each step, as `gpufleet serve` does."""
    from gpufleet.control.telemetry_sources import TelemetryLoop, TelemetryOptions, make_collector
    from gpufleet.control.telemetry_store import TelemetryConfig

    plane = live.plane
    collector = make_collector(
        TelemetryOptions(), "emulated", plane.sessions, plane.reconciler.cluster
    )
    assert collector is not None
    config = TelemetryConfig(interval_s=15, idle_after_s=idle_after_s, max_gap_s=60)
    loop = TelemetryLoop(plane.sessions, collector, config, lambda: True, clock=plane.clock)
    for _ in range(round(seconds / 15)):
        live.cycle(15)
        loop.tick()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path}/portal.db")
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def live(store: Engine) -> Iterator[Live]:
    """The control plane's app served by uvicorn on a free loopback port, in a thread."""
    plane = build_plane(store, Cluster.from_spec(ClusterSpec.model_validate(CLUSTER)))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue from now on, before uvicorn accepts them
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        plane.client.app,
        log_level="warning",
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        # the socket already listens, so this waits for uvicorn rather than failing early
        assert httpx.get(f"{url}/healthz", timeout=20).status_code == 200
    except httpx.HTTPError as exc:
        raise RuntimeError(
            f"the portal did not start (uvicorn alive: {thread.is_alive()})"
        ) from exc
    try:
        yield Live(url, plane)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    """Debian's Chromium, headless. As root (containers, CI) Chromium refuses to start
    without --no-sandbox; a small /dev/shm there also needs --disable-dev-shm-usage."""
    args = ["--no-sandbox", "--disable-dev-shm-usage"] if os.geteuid() == 0 else []
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=args)
    yield browser
    browser.close()


@dataclass
class Problems:
    """What went wrong inside the page: script errors and console errors."""

    errors: list[str] = field(default_factory=list)

    def console(self, msg: ConsoleMessage) -> None:
        if msg.type == "error" and not _expected_console_error(msg.text):
            self.errors.append(f"console: {msg.text} ({msg.location.get('url', '')})")

    def page_error(self, exc: Exception) -> None:
        self.errors.append(f"script error: {exc}")


def _expected_console_error(text: str) -> bool:
    # Chromium logs every non-2xx page load; the tests that cause them check the status.
    return bool(re.match(r"Failed to load resource: the server responded with a status of", text))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def page(browser: Browser, live: Live, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page in a fresh browser context (no cookies) with the portal as its base URL and
    a paused clock. Fails the test if a script error or console error happened in it."""
    from playwright.sync_api import expect

    context = browser.new_context(
        base_url=live.url, viewport=VIEWPORT, accept_downloads=True, locale="en-GB"
    )
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    # The page's timers are the test's: htmx's polling (`every 10s`) never swaps a part of
    # the page while a test reads it; a test that needs a timer to fire calls
    # `page.clock.run_for(ms)`. (Playwright's clock is a script in every frame: a test of a
    # page with a sandboxed frame, where Chromium refuses and logs it, opts out.)
    if request.node.get_closest_marker(REAL_TIMERS) is None:
        page.clock.install()
    failed_shot = ARTIFACTS / f"FAILED-{request.node.name}.png"
    failed_shot.unlink(missing_ok=True)  # from an earlier run
    problems = Problems()
    page.on("console", problems.console)
    page.on("pageerror", problems.page_error)
    try:
        yield page
        if request.node.stash.get(_FAILED, False):
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=failed_shot, full_page=True)
    finally:
        context.close()
    assert not problems.errors, "\n".join(problems.errors)


class Shots:
    """Full-page screenshots into `artifacts/`, named by the page they show."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def __call__(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=path, full_page=True, animations="disabled")
        return path


@pytest.fixture
def shot(page: Page) -> Shots:
    return Shots(page)


def log_in(page: Page, live: Live, who: str, next_path: str = "/portal/") -> None:
    """Log in through the form as `who`, as a person would: paste the token, press Log in."""
    from playwright.sync_api import expect

    page.goto(f"/portal/login?next={quote(next_path, safe='')}")
    page.get_by_label("API token").fill(live.token(who))
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#whoami")).to_be_visible()


H100 = "h100-sxm5-80gb"


@pytest.fixture
def queued(live: Live) -> list[int]:
    """vision holds all 16 H100s with a job that may not be preempted, and two 8-GPU jobs
    of vision wait behind it (positions 1 and 2 in the team and the cluster)."""
    live.submit(
        "vision-member",
        name="hog",
        gpus=8,
        workers=2,
        accelerator=H100,
        preemptible=False,
        runtime_estimate_s=36_000,
    )
    live.cycle()
    live.cycle(1)
    ids = [
        live.submit("vision-member", name=n, gpus=8, accelerator=H100, runtime_estimate_s=3600)
        for n in ("a", "b")
    ]
    live.cycle(60)
    return ids
