"""An API worker of `gpufleet serve`: the FastAPI app on the server's listening socket.

The supervisor (`control.service`) starts it by name, `gpufleet.server.worker:api_main`, in a
fresh interpreter that has already asked for its parent's death signal, so this module may
import what it needs at its top. It lives above `control`, `api` and `portal`, so that the
supervisor below names it without importing it (design 0015, layers).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import uvicorn

from gpufleet.api.context import AppContext
from gpufleet.cluster import Cluster
from gpufleet.control.auth import PrincipalCache
from gpufleet.control.db import make_engine, sessions
from gpufleet.control.server import api_view
from gpufleet.control.service import ChildConfig, child_setup, holds_lease, tune_gc_for_serving
from gpufleet.control.shared import SharedState
from gpufleet.server.app import create_app
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.load import load


def api_main(config: ChildConfig, ready: Callable[[], None]) -> None:
    """An API worker: the FastAPI app on the server's listening socket until SIGTERM (then
    uvicorn finishes the requests in flight). It starts nothing on the executor."""
    child_setup(config, "api")

    assert config.listen_fd is not None
    assert config.shared_fd is not None
    options = config.options
    cluster = Cluster.from_spec(load(ClusterSpec, config.cluster_path))
    maker = sessions(make_engine(config.db_url, pre_ping=False))  # no round trip per checkout
    shared = SharedState(config.shared_fd)
    ctx = AppContext(
        maker,
        cluster,
        executor=api_view(options, maker),
        principals=PrincipalCache(shared=shared),
        profile=options.profile,
        leader=lambda: holds_lease(maker, options.holder, time.time()),
        reconciler_running=lambda: shared.reconciler_running,
    )
    app = with_thread_limit(create_app(ctx), API_THREADS)
    server = uvicorn.Server(uvicorn.Config(app, access_log=options.access_log))
    sock = socket.socket(fileno=config.listen_fd)
    tune_gc_for_serving()
    ready()  # the socket listens already: connections queue until the loop accepts them
    server.run(sockets=[sock])


# Threads per API worker for sync handlers (anyio's default is 40). Under load, the threads of
# one process convoy on its GIL: each gives it up at every database round trip and waits for
# it again behind the others, so every request slows together and an overload feeds on itself.
# Measured, 200 submits/s + 200 reads/s, alternating runs (docs/benchmarks.md): on SQLite p99
# 269-383 ms with 40 threads, 112-162 ms with 8; on PostgreSQL, submit/read p99 39-59/32-55 ms
# with 3 threads against 63-174/52-171 ms with 8, the same CPU. Requests beyond the limit
# wait in the event loop instead, in arrival order. Nothing slow may hold one: the portal's
# planner and what-if wait for their runs on threads of their own (`portal.heavy`).
API_THREADS = 3


def with_thread_limit(app: Any, threads: int) -> Any:
    """`app` with anyio's thread limiter set to `threads` when the server starts (the
    limiter belongs to the event loop, so it is set in the lifespan's first call)."""

    async def limited(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        await app(scope, receive, send)

    return limited
