"""`gpufleet demo`: a living portal on a laptop, for a newcomer to click through.

It sets up a fresh store (the schema, an admin, two teams with quotas, chargeback rates,
tokens for a lead and a member of each team), starts `gpufleet serve --executor emulated`
on the example cluster as a child process, and keeps a seeded stream of jobs arriving
through the API, as people would submit them, so the portal has queues, borrowing,
preemptions, restarts and GPU-hours to show. Ctrl-C (or SIGTERM) stops the stream and
the server and removes the temporary store.

The server is the real `gpufleet serve` in its own process (and its own session, so a
terminal's Ctrl-C reaches only the demo, which stops the server once and waits for it).
The stream is in this process, over HTTP with the demo users' bearer tokens: the demo
exercises the same path as any client and needs nothing the API does not offer.

Emulated jobs "run" for their runtime estimate in emulated seconds; at `--speed 1` those
are real seconds, so the queue's start-time estimates are right (they ignore `--speed`,
see the control-plane guide's limits).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from gpufleet.cluster import Cluster
from gpufleet.control import admin
from gpufleet.control.db import make_engine, sessions, upgrade
from gpufleet.control.telemetry_sources import BUSY_PROFILE_ENV
from gpufleet.errors import UserError, os_reason
from gpufleet.portal.fmt import request_text
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.load import load
from gpufleet.specs.teams import TeamsSpec

DEFAULT_CLUSTER = Path("examples/sched-cluster.yaml")
STORE_NAME = "gpufleet.db"
LOG_NAME = "server.log"
PENDING_CAP = 10  # per team: the stream pauses for a team with this many jobs waiting
START_TIMEOUT_S = 180.0  # a loaded 2-core machine takes a while to import and migrate
STOP_TIMEOUT_S = 30.0

# The demo's teams: both in one cohort, so research borrows prod's idle H100s and prod's
# production jobs reclaim them (quota-reclaim preemptions); A100s cut into MIG slices for
# small jobs. (The example cluster's L4s are spot capacity, which an API request cannot
# opt into, so the demo leaves them idle.)
DEMO_TEAMS: dict[str, Any] = {
    "kind": "teams",
    "teams": [
        {
            "name": "research",
            "cohort": "ml",
            "quota": {"h100-sxm5-80gb": 64, "a100-sxm4-80gb": 16},
            "borrowing_limit": {"h100-sxm5-80gb": 32},
            "default_priority": "standard",
            "projects": ["llm", "vision"],
        },
        {
            "name": "prod",
            "cohort": "ml",
            "quota": {"h100-sxm5-80gb": 64, "a100-sxm4-80gb": 48},
            "lending_limit": {"h100-sxm5-80gb": 32},
            "default_priority": "production",
            "projects": ["chat", "search"],
        },
    ],
}
# Demo prices in USD per GPU-hour (round numbers, not quotes).
DEMO_RATES_USD = {"h100-sxm5-80gb": 2.50, "a100-sxm4-80gb": 1.50}


@dataclass(frozen=True, slots=True)
class Person:
    """Someone to log in as: the key names them in the demo's output and tests."""

    key: str
    user: str
    role: str
    team: str | None


PEOPLE = (
    Person("admin", "admin", "admin", None),
    Person("research-lead", "lena", "lead", "research"),
    Person("research-member", "milo", "member", "research"),
    Person("prod-lead", "petra", "lead", "prod"),
    Person("prod-member", "omar", "member", "prod"),
)


@dataclass(frozen=True, slots=True)
class Submission:
    """One job of the stream: who submits it, and the `POST /api/v1/jobs` body."""

    who: str  # a Person key
    team: str
    body: dict[str, Any]


H100 = "h100-sxm5-80gb"
Body = Callable[[random.Random, int], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Template:
    """A kind of demo job: how often it comes, whose it is, how long it runs (emulated
    seconds, `randrange(*runtime_s)`), and its request body (job number -> fields)."""

    weight: float
    team: str
    runtime_s: tuple[int, int, int]
    body: Body


TEMPLATES: dict[str, Template] = {
    "pretrain": Template(
        3.0,
        "research",
        (120, 481, 30),
        lambda rng, n: {
            "kind": "training",
            "project": "llm",
            "gpus": 8,
            "workers": rng.choice([1, 2, 2, 4]),
            "accelerator": H100,
            "checkpoint_interval_s": 60,
            "command": ["python", "pretrain.py", "--config", f"run-{n}.yaml"],
        },
    ),
    "finetune": Template(
        3.0,
        "research",
        (60, 241, 15),
        lambda rng, n: {
            "kind": "training",
            "project": rng.choice(["llm", "vision"]),
            "gpus": rng.choice([1, 2, 4, 8]),
            "accelerator": H100,
            "checkpoint_interval_s": 120,
            "priority_class": rng.choice(["standard", "standard", "opportunistic"]),
            "command": ["python", "finetune.py", "--lr", str(rng.choice([1e-5, 3e-5]))],
        },
    ),
    "sweep": Template(
        1.5,
        "research",
        (60, 301, 15),
        lambda rng, n: {
            "kind": "batch",
            "project": "vision",
            "mig_profile": "1g.10gb",
            "priority_class": "opportunistic",
            "command": ["python", "sweep.py", "--trial", str(n)],
        },
    ),
    "notebook": Template(
        1.0,
        "research",
        (300, 901, 60),
        lambda rng, n: {
            "kind": "interactive",
            "project": "vision",
            "mig_profile": rng.choice(["1g.10gb", "2g.20gb"]),
        },
    ),
    "dev-box": Template(  # a GPU held for a debugging session that nobody uses: idle
        0.5,
        "research",
        (600, 1801, 60),
        lambda rng, n: {
            "kind": "interactive",
            "project": "llm",
            "gpus": 1,
            "accelerator": H100,
            "env": {BUSY_PROFILE_ENV: "idle"},
        },
    ),
    "serve": Template(
        2.5,
        "prod",
        (300, 1201, 60),
        lambda rng, n: {
            "kind": "inference",
            "project": rng.choice(["chat", "search"]),
            "mig_profile": rng.choice(["1g.10gb", "2g.20gb", "3g.40gb"]),
            "command": ["vllm", "serve", "model"],
        },
    ),
    "eval": Template(
        2.0,
        "prod",
        (120, 301, 15),
        lambda rng, n: {
            "kind": "batch",
            "project": "chat",
            "gpus": 8,
            "workers": rng.choice([1, 1, 2]),
            "accelerator": H100,
            "command": ["python", "eval.py"],
        },
    ),
    "batch-infer": Template(  # prod at standard priority: preemptible
        1.0,
        "prod",
        (60, 241, 15),
        lambda rng, n: {
            "kind": "batch",
            "project": "search",
            "gpus": 4,
            "accelerator": H100,
            "priority_class": "standard",
            "command": ["python", "embed.py"],
        },
    ),
}
# who submits a team's jobs: mostly the member, sometimes the lead
SUBMITTERS = {
    "research": ("research-member", "research-member", "research-lead"),
    "prod": ("prod-member", "prod-member", "prod-lead"),
}
FAILING_ONE_IN = 15  # about one job in 15 crashes a third of the way in (restarts, then fails)


def workload(seed: int) -> Iterator[Submission]:
    """An endless, seeded stream of jobs for the demo's teams: research trains on H100s
    (often more than its guarantee, so it borrows) and runs sweeps and notebooks on MIG
    slices; prod serves on MIG slices and evaluates on H100s with production priority
    (reclaiming what it lent). Runtimes are minutes, so at speed 1 something starts or
    ends every few seconds."""
    rng = random.Random(seed)
    names = list(TEMPLATES)
    weights = [t.weight for t in TEMPLATES.values()]
    n = 0
    while True:
        n += 1
        # the first job is an idle dev box, so the idle-GPU detector has something to flag
        # within the demo's first minutes
        name = "dev-box" if n == 1 else rng.choices(names, weights=weights)[0]
        template = TEMPLATES[name]
        runtime = rng.randrange(*template.runtime_s)
        body = {"name": f"{name}-{n}", **template.body(rng, n)}
        body["runtime_estimate_s"] = float(runtime)
        if rng.randrange(FAILING_ONE_IN) == 0:
            body["env"] = {
                **body.get("env", {}),
                "GPUFLEET_EMULATE_FAIL_AFTER_S": str(runtime // 3),
            }
        yield Submission(rng.choice(SUBMITTERS[template.team]), template.team, body)


def setup_store(db_url: str, now_s: float) -> dict[str, str]:
    """A fresh store for the demo: schema, admin, teams and quotas, rates and tokens.
    Returns each `PEOPLE` key's token (printed once, as `gpufleet admin` prints them)."""

    engine = make_engine(db_url)
    try:
        upgrade(engine)
        tokens: dict[str, str] = {}
        with sessions(engine).begin() as s:
            issued = admin.init(s, now_s, user="admin")
            tokens["admin"] = issued.token
            actor = admin.cli_principal()
            admin.import_teams(s, actor, TeamsSpec.model_validate(DEMO_TEAMS), now_s)
            for flavor, usd in DEMO_RATES_USD.items():
                admin.set_rate(s, actor, flavor, usd, now_s)
            for p in PEOPLE:
                if p.role == "admin":
                    continue
                made = admin.create_token(
                    s, actor, now_s, role=p.role, team=p.team, user=p.user, expires_s=None
                )
                tokens[p.key] = made.token
    finally:
        engine.dispose()
    return tokens


class Stream:
    """Submits `workload(seed)` through the API, one job every `interval_s`, skipping
    a team while `PENDING_CAP` of its jobs wait (so the queue stays readable)."""

    def __init__(
        self,
        api: str,
        tokens: dict[str, str],
        *,
        seed: int,
        interval_s: float,
        say: Callable[[str], None],
        burst: int = 12,
    ) -> None:
        self._api = api
        self._tokens = tokens
        self._jobs = workload(seed)
        self._interval_s = interval_s
        self._say = say
        self._burst = burst
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-stream", daemon=True)
        self.submitted = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self, *, wait: bool = True) -> None:
        self._stop.set()
        if wait and self._thread.is_alive():
            self._thread.join(timeout=20)

    def _run(self) -> None:
        with httpx.Client(base_url=self._api, timeout=15) as client:
            for _ in range(self._burst):  # a queue to look at from the first page on
                if self._stop.is_set():
                    return
                self._submit(client, next(self._jobs))
            while not self._stop.wait(self._interval_s):
                waiting = self._pending(client)
                for _ in range(len(DEMO_TEAMS["teams"]) * 2):  # skip teams at the cap
                    job = next(self._jobs)
                    if waiting.get(job.team, 0) < PENDING_CAP:
                        self._submit(client, job)
                        break

    def _pending(self, client: httpx.Client) -> dict[str, int]:
        try:
            r = client.get("/queues", headers=self._auth("admin"))
            r.raise_for_status()
            return {q["team"]: int(q["pending"]) for q in r.json()}
        except (httpx.HTTPError, ValueError, KeyError):
            return {}

    def _auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._tokens[who]}"}

    def _submit(self, client: httpx.Client, job: Submission) -> None:
        try:
            r = client.post("/jobs", json=job.body, headers=self._auth(job.who))
        except httpx.HTTPError as exc:
            if not self._stop.is_set():  # not the server going away as the demo stops
                self._say(f"could not submit {job.body['name']}: {exc}")
            return
        if r.status_code != 201:
            self._say(f"{job.body['name']} refused ({r.status_code}): {r.text[:200]}")
            return
        out = r.json()
        self.submitted += 1
        self._say(
            f"{time.strftime('%H:%M:%S')} submitted #{out['id']} {out['name']} "
            f"({out['team']}, {out['user']}, {out['priority_class']}): "
            f"{request_text(out['request'])}"
        )


@dataclass(frozen=True)
class DemoOptions:
    cluster_path: Path = DEFAULT_CLUSTER
    host: str = "127.0.0.1"
    port: int = 8080
    speed: float = 1.0
    interval_s: float = 4.0
    seed: int = 7
    work_dir: Path | None = None  # None: a temporary directory, removed at the end


def _work_dir(options: DemoOptions) -> tuple[Path, bool]:
    """The directory for the store and the server's log, and whether to remove it."""
    if options.work_dir is None:
        return Path(tempfile.mkdtemp(prefix="gpufleet-demo-")), True
    path = options.work_dir
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--dir {path}: cannot create it ({os_reason(exc)})") from None
    if (path / STORE_NAME).exists():
        raise UserError(
            f"{path / STORE_NAME} exists: the demo starts from a fresh store; "
            "remove it or give another --dir"
        )
    return path, False


def _banner(url: str, cluster: Cluster, tokens: dict[str, str], work: Path, temp: bool) -> str:
    gpus = ", ".join(f"{n} {a}" for a, n in cluster.gpus_by_accelerator.items())
    lines = [
        f"gpufleet demo: cluster {cluster.name} ({gpus}), emulated",
        f"  portal  {url}/portal/",
        f"  API     {url}/docs",
        f"  store   {work / STORE_NAME}{' (removed when the demo stops)' if temp else ''}",
        f"  log     {work / LOG_NAME}",
        "Log in to the portal with one of these tokens:",
    ]
    for p in PEOPLE:
        who = f"{p.user} ({p.role}{', ' + p.team if p.team else ''})"
        lines.append(f"  {who:<24} {tokens[p.key]}")
    return "\n".join(lines)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _wait_ready(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise UserError(
                f"the server stopped at start (exit {server.returncode}):\n{_tail(log)}"
            )
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise UserError(f"the server did not answer within {START_TIMEOUT_S:g} s:\n{_tail(log)}")


def _stop_server(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM: the server finishes its cycle and gives up the lease; kill if it hangs.
    Another Ctrl-C meanwhile kills it at once (rather than leaving it running: it is in
    its own session, so nothing else would stop it)."""
    if server.poll() is not None:
        return
    previous = signal.signal(signal.SIGINT, lambda _n, _f: server.kill())
    try:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
    finally:
        signal.signal(signal.SIGINT, previous)


def run_demo(options: DemoOptions, say: Callable[[str], None]) -> None:
    """Run the demo until Ctrl-C or SIGTERM (or until the server stops by itself)."""

    if not options.cluster_path.is_file():
        raise UserError(
            f"no cluster spec at {options.cluster_path}: run the demo from the checkout's "
            "root, or give --cluster"
        )
    if not (options.speed > 0 and options.interval_s > 0):
        raise UserError("--speed and --interval must be > 0")
    cluster = Cluster.from_spec(load(ClusterSpec, options.cluster_path))
    work, temp = _work_dir(options)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda _n, _f: stop.set())
    # Ctrl-C stops the demo even when it was started with SIGINT ignored (a script's
    # background job, `nohup sh -c '... &'`: an ignored signal is inherited through exec, and
    # Python then installs no KeyboardInterrupt), as `gpufleet serve` takes it explicitly
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    server: subprocess.Popen[bytes] | None = None
    stream: Stream | None = None
    try:
        db = f"sqlite:///{work / STORE_NAME}"
        tokens = setup_store(db, time.time())
        log = work / LOG_NAME
        url = f"http://{options.host}:{options.port}"
        with log.open("wb") as log_file:
            server = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gpufleet.cli.main",
                    "serve",
                    "--cluster",
                    str(options.cluster_path),
                    "--db",
                    db,
                    "--executor",
                    "emulated",
                    "--speed",
                    repr(options.speed),
                    "--host",
                    options.host,
                    "--port",
                    str(options.port),
                    # read GPUs often and flag idle jobs after a minute, so a visitor sees
                    # both within the demo's first minutes (a site's defaults: 15 s, 30 min)
                    "--telemetry-interval",
                    "5",
                    "--idle-after",
                    "60",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,  # Ctrl-C reaches the demo only; it stops the server
            )
        _wait_ready(url, server, log)
        say(_banner(url, cluster, tokens, work, temp))
        stream = Stream(
            f"{url}/api/v1", tokens, seed=options.seed, interval_s=options.interval_s, say=say
        )
        stream.start()
        say(
            f"Jobs arrive every {options.interval_s:g} s (seed {options.seed}, speed "
            f"{options.speed:g}); Ctrl-C stops the demo."
        )
        while not stop.wait(0.5):
            if server.poll() is not None:
                raise UserError(f"the server stopped (exit {server.returncode}):\n{_tail(log)}")
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        if stream is not None:
            stream.stop(wait=False)  # the server first: a second Ctrl-C must not orphan it
        if server is not None:
            _stop_server(server)
        if stream is not None:
            stream.stop()
        if temp:
            shutil.rmtree(work, ignore_errors=True)
        signal.signal(signal.SIGINT, previous_int)
    say(f"demo stopped ({stream.submitted if stream else 0} jobs submitted)")
