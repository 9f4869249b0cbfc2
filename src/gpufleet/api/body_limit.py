"""A cap on request bodies, checked before anything reads them.

Without it a 50 MB body was read and parsed as JSON before the token was even looked at. The
cap is enforced twice: a declared `Content-Length` over it is answered 413 at once, and a
body sent without one (chunked) is read here as it streams, refused once it passes the cap,
and otherwise handed to the app whole. The
largest body the API accepts legitimately is a submit with a 64 KiB command and a 64 KiB
environment (`control.jobs`), which JSON escaping can at most multiply by six."""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 1024 * 1024


class BodyLimit:
    """ASGI middleware: 413 for an HTTP request body over `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        if declared is None:  # chunked: read it here, up to the cap, then replay it
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    break  # a disconnect: the app sees an empty body and the client is gone
                chunks.append(message.get("body", b""))
                size += len(chunks[-1])
                if size > self.max_bytes:
                    await self._refuse(scope, receive, send)
                    return
                if not message.get("more_body", False):
                    break
            receive = _replay(b"".join(chunks), receive)
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = {"detail": f"the request body is larger than {self.max_bytes // 1024} KiB"}
        headers = {"Connection": "close"}  # the rest of the body is not read
        await JSONResponse(body, 413, headers=headers)(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()  # after the body: the app waits for a disconnect
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
