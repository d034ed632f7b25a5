"""What MCP's transports are sent before the SDK reads it: one JSON-RPC message, or a
JSON-RPC error answering it.

`refusal` is the one rule, for a line over stdio and a body over HTTP: -32700 for text
that is not JSON the SDK can parse (a lone surrogate escape, nesting past its limit),
-32600 for a batch (a JSON array: MCP sends one message at a time), for an ``id`` that is
neither a string nor an integer (``null``, ``true``, ``1.5``: MCP forbids them, and the
SDK reads such a request as a notification and never answers it) and for JSON that is not
a JSON-RPC message. The reply carries the request's id when it can be read, and never a
pydantic dump.

The SDK's stdio transport hands an unparsable line on as an exception its dispatcher only
logs, and its HTTP transport answers a notification with an empty 202 and a bad body with
pydantic's whole report; neither offers a hook, so `CheckedLines` (stdio) and
`JsonRpcRefusals` (HTTP) apply `refusal` before the SDK reads a message.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from http import HTTPStatus
from io import TextIOWrapper
from typing import Any, BinaryIO

import anyio
import pydantic_core
from mcp import types as mcp_types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def _usable_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _error(code: int, message: str, request_id: Any = None) -> mcp_types.JSONRPCError:
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id if _usable_id(request_id) else None,
                                  error=mcp_types.ErrorData(code=code, message=message))


def refusal(text: str | bytes) -> mcp_types.JSONRPCError | None:
    """The JSON-RPC error answering ``text`` (one stdio line, one HTTP body), or ``None``
    when it is one JSON-RPC message the SDK can take."""
    try:
        message = pydantic_core.from_json(text)
    except ValueError as exc:
        try:  # Python's parser still reads some text the SDK's refuses: the id, if it can
            readable = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            readable = None
        request_id = readable.get("id") if isinstance(readable, dict) else None
        return _error(mcp_types.PARSE_ERROR, f"Parse error: {exc}", request_id)
    if isinstance(message, list):
        return _error(mcp_types.INVALID_REQUEST, "Invalid Request: a batch (JSON array) is not "
                      "supported: send one JSON-RPC message at a time")
    if isinstance(message, dict) and "id" in message and not _usable_id(message["id"]):
        return _error(mcp_types.INVALID_REQUEST, "Invalid Request: id must be a string or an "
                      f"integer, not {json.dumps(message['id'])[:20]}")
    try:
        mcp_types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        request_id = message.get("id") if isinstance(message, dict) else None
        return _error(mcp_types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message",
                      request_id)
    return None


# -- stdio ---------------------------------------------------------------------------------

@contextlib.contextmanager
def claimed_stdin() -> Iterator[BinaryIO]:
    """fd 0 claimed as the SDK's stdio transport claims it when it opens stdin itself: the
    channel is read through a private duplicate while fd 0 points at the null device (a
    child process, such as a restarted embedded server, reads EOF, never the client's
    messages); fd 0 is the channel again on exit. The duplicate is never closed: a thread
    blocked reading it may outlive the transport."""
    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield os.fdopen(wire, "rb", closefd=False)
    finally:
        os.dup2(wire, 0)


class CheckedLines:
    """The lines of a stdio channel as the SDK's transport iterates them (its ``stdin``):
    each line `refusal` refuses is answered on the transport's write stream (given by
    `answer_on` once the transport is open) and never reaches the SDK. ``after_first``
    runs once, when a message arrives after the first one."""

    def __init__(self, wire: BinaryIO, after_first: Callable[[], None] | None = None) -> None:
        self._lines = anyio.wrap_file(TextIOWrapper(wire, encoding="utf-8", errors="replace"))
        self._write: Any = None
        self._open = anyio.Event()
        self._passed = 0
        self._after_first = after_first

    def answer_on(self, write_stream: Any) -> None:
        self._write = write_stream
        self._open.set()

    def __aiter__(self) -> CheckedLines:
        return self

    async def __anext__(self) -> str:
        while line := await self._lines.readline():
            reply = refusal(line)
            if reply is None:
                self._passed += 1
                if self._passed == 2 and self._after_first is not None:
                    self._after_first()
                return line
            await self._open.wait()
            await self._write.send(SessionMessage(reply))
        raise StopAsyncIteration


# -- HTTP ----------------------------------------------------------------------------------

class JsonRpcRefusals:
    """ASGI wrapper of the MCP endpoint: a POST body `refusal` refuses gets its JSON-RPC
    error (400) here; any other request goes on to the SDK, its body replayed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        reply = refusal(body)
        if reply is not None:
            response = Response(reply.model_dump_json(by_alias=True, exclude_unset=True),
                                status_code=HTTPStatus.BAD_REQUEST,
                                media_type="application/json")
            await response(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
