"""The API's route class: a handler gives its store connection back before its response leaves
the worker thread, and serialises its answer in that same thread.

Why: FastAPI runs a sync handler in a worker thread, then validates and serialises its
return value in *another* worker-thread hop, and closes a request-scoped session only
after the response is sent. So a request held a pooled connection while it waited for a
second worker thread; under load every worker thread ended up waiting for a connection
held by a request that waited for a worker thread: the deadlock the API benchmark found
(docs/benchmarks.md, issue 8). Closing the session when the handler returns, and
turning a returned model into JSON bytes right there, removes both the wait and the
extra hop; every route gets it by construction, not by each handler remembering to.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel
from sqlalchemy.orm import Session

JSON = "application/json"


class ReleasingRoute(APIRoute):
    """An `APIRoute` whose sync endpoint closes its `Session` arguments before returning and
    returns a model of exactly its `response_model` type as ready JSON."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if not inspect.iscoroutinefunction(endpoint):
            endpoint = _releasing(endpoint, kwargs.get("response_model"), kwargs)
        super().__init__(path, endpoint, **kwargs)


def _releasing(
    endpoint: Callable[..., Any], response_model: Any, route: dict[str, Any]
) -> Callable[..., Any]:
    status_code = route.get("status_code") or 200
    serialise = isinstance(response_model, type) and issubclass(response_model, BaseModel)

    @functools.wraps(endpoint)  # FastAPI reads the wrapped signature for its dependencies
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            result = endpoint(*args, **kwargs)
        finally:
            for value in kwargs.values():
                if isinstance(value, Session):
                    value.close()  # the connection goes back to the pool now
        if serialise and type(result) is response_model:
            return Response(result.model_dump_json(), status_code=status_code, media_type=JSON)
        return result

    return run
