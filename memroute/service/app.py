"""The ASGI app of ``memroute serve``: REST under ``/v1`` and MCP (streamable HTTP) at
``/mcp``, over one `Memory`, one `RetrievalAgent` and the key store, opened at startup."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from mcp.server.transport_security import TransportSecuritySettings
from psycopg import OperationalError
from starlette.exceptions import HTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memroute import __version__
from memroute.errors import (
    MemrouteError,
    NotAuthenticatedError,
    StoreUnavailableError,
    http_status_for,
)
from memroute.service.auth import authenticate, bearer_token
from memroute.service.context import Service, ServiceOpener, open_service
from memroute.service.jsonrpc import JsonRpcRefusals
from memroute.service.mcp_server import build_mcp_server, http_token
from memroute.service.models import MAX_REQUEST_BYTES, invalid_fields
from memroute.service.routes import router
from memroute.settings import MemrouteSettings, get_settings

LOOPBACK = ("127.0.0.1", "localhost", "::1")
BODY_TIMEOUT_S = 30.0  # for a request's whole body, after its headers (408 beyond)


def error_response(status: int, message: str, kind: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message, "kind": kind}, status_code=status,
                        headers=headers or None)


OPEN_PATHS = frozenset({"/v1/health", "/v1/ready"})  # answered without a key


def needs_key(path: str) -> bool:
    """Whether a request to ``path`` must carry a valid API key: every ``/v1`` route but
    liveness and readiness, and ``/mcp``."""
    return (path.startswith("/v1/") and path not in OPEN_PATHS) or path == "/mcp"


class KeyRequired:
    """ASGI wrapper: a request to a path that `needs_key` without a valid API key gets its
    401 (503 if the keys cannot be read) from the headers alone; its body is never read
    (uvicorn discards what still comes, and `HeaderDeadlineH11` closes a connection that
    keeps sending it). The verified grant is left in the request's state (``key_grant``)
    for the routes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and needs_key(scope["path"]):
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            try:
                service = await scope["app"].state.opener.get()  # waits while it opens
                grant = await authenticate(service.keys, bearer_token(headers))
            except MemrouteError as exc:
                extra = {"WWW-Authenticate": "Bearer"} if isinstance(
                    exc, NotAuthenticatedError) else {}
                response = error_response(http_status_for(exc), " ".join(str(exc).split()),
                                          type(exc).__name__, **extra)
                await response(scope, receive, send)
                return
            scope.setdefault("state", {})["key_grant"] = grant
        await self.app(scope, receive, send)


def mcp_host_checks(host: str, allowed_hosts: list[str]) -> TransportSecuritySettings:
    """MCP's DNS-rebinding protection: the Host (and any Origin) header must name loopback,
    the bound ``host`` or one of ``allowed_hosts`` (e.g. the name a reverse proxy serves)."""
    names = ["127.0.0.1", "localhost", "[::1]", *allowed_hosts]
    if host not in LOOPBACK:
        names.append(f"[{host}]" if ":" in host else host)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[form for name in names for form in (name, f"{name}:*")],
        allowed_origins=[f"{scheme}://{form}" for name in names for scheme in ("http", "https")
                         for form in (name, f"{name}:*")])


class BodyLimit:
    """413 with a JSON error for a body over ``max_bytes``: at once when Content-Length says
    so, else when the streamed body crosses the limit (before the route has parsed it); 408
    when the whole body has not arrived ``timeout_s`` after the request's headers. (Starlette's
    own limit answers in plain text, and nothing times a slow body out.)"""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float = BODY_TIMEOUT_S) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"request body over {self.max_bytes} bytes"
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await error_response(413, too_large, "RequestTooLarge")(scope, receive, send)
            return
        seen, complete = 0, False
        deadline = asyncio.get_running_loop().time() + self.timeout_s

        async def limited() -> Message:
            nonlocal seen, complete
            if complete:  # later receives wait for a disconnect (streamed responses)
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise HTTPException(408, f"request body not received within "
                                         f"{self.timeout_s:g}s", {"Connection": "close"}) from None
            seen += len(message.get("body", b""))
            complete = message["type"] != "http.request" or not message.get("more_body")
            if seen > self.max_bytes:
                raise HTTPException(413, too_large)
            return message

        await self.app(scope, limited, send)


def create_app(settings: MemrouteSettings | None = None, *, service: Service | None = None,
               host: str = "127.0.0.1", allowed_hosts: list[str] | None = None,
               mcp: bool = True, max_body_bytes: int = MAX_REQUEST_BYTES,
               key_cache_seconds: float = 0.0, body_timeout_s: float = BODY_TIMEOUT_S
               ) -> FastAPI:
    """The app. It opens the service in the background at startup from ``settings`` (or
    uses ``service``): it answers at once, `/v1/health` says ``starting`` or ``ready``, and a
    request that needs the service waits for it; ``host`` is where it is bound and
    ``allowed_hosts`` other names it is reached by (MCP checks Host/Origin headers against
    both); a verified key is trusted for ``key_cache_seconds`` before it is looked up again;
    a body must have arrived ``body_timeout_s`` after its request's headers."""
    holder: dict[str, ServiceOpener] = {}

    async def current() -> Service:
        return await holder["opener"].get()

    mcp_server = build_mcp_server(current, http_token) if mcp else None

    async def given() -> Service:
        assert service is not None
        return service

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        opener = ServiceOpener(given if service is not None else lambda: open_service(
            settings or get_settings(), key_cache_seconds=key_cache_seconds))
        app.state.opener = holder["opener"] = opener
        opener.start()
        try:
            async with contextlib.AsyncExitStack() as stack:
                if mcp_server is not None:
                    await stack.enter_async_context(mcp_server.session_manager.run())
                yield
        finally:
            if service is None:
                await opener.close()

    # /docs and /redoc load Swagger UI and ReDoc from this server (fastapi-offline), not a CDN
    app = FastAPIOffline(title="memroute", version=__version__, lifespan=lifespan,
                         description="Episodic memory and a retrieval agent, keyed to tenants. "
                                     "Send an API key as 'Authorization: Bearer <key>'.")
    app.include_router(router)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes, timeout_s=body_timeout_s)
    app.add_middleware(KeyRequired)  # outermost: no key, no body read
    _install_error_handlers(app)
    if mcp_server is not None:
        endpoint = mcp_server.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True, host=host,
            transport_security=mcp_host_checks(host, list(allowed_hosts or [])),
            max_request_body_size=max_body_bytes).routes[0]
        # a body that is not one JSON-RPC message gets its JSON-RPC error before the SDK
        app.router.routes.append(Route("/mcp", endpoint=JsonRpcRefusals(endpoint.endpoint),
                                       include_in_schema=False))
    return app


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(MemrouteError)
    async def _memroute_error(request: Request, exc: MemrouteError) -> JSONResponse:
        extra = {"WWW-Authenticate": "Bearer"} if isinstance(exc, NotAuthenticatedError) else {}
        return error_response(http_status_for(exc), " ".join(str(exc).split()),
                              type(exc).__name__, **extra)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # a field named as a client sent it: "userid", not FastAPI's "query.userid"
        errors = [{**err, "loc": tuple(err["loc"][1:])} if err["loc"][:1] == ("query",)
                  else err for err in exc.errors()]
        return error_response(422, f"invalid request: {invalid_fields(errors)}",
                              "InvalidInputError")

    @app.exception_handler(OperationalError)
    async def _store_unavailable(request: Request, exc: OperationalError) -> JSONResponse:
        # a connection failure that reached a route unmapped is still the database's
        return error_response(503, f"database unavailable: {' '.join(str(exc).split())}"[:500],
                              StoreUnavailableError.__name__)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return error_response(500, "internal error (see the server log)", "InternalError")

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI's answer to a body json.loads cannot read
            return error_response(
                422, "invalid request: the body is not JSON memroute can read (invalid "
                     "UTF-8, nested too deep, or a number too long)", "InvalidInputError")
        kinds: dict[int, str] = {404: "NotFound", 405: "MethodNotAllowed",
                                 408: "RequestTimeout", 413: "RequestTooLarge"}
        return error_response(exc.status_code, str(exc.detail),
                              kinds.get(exc.status_code, "HTTPError"), **(exc.headers or {}))


def openapi_schema() -> dict[str, Any]:
    """The REST API's OpenAPI schema (what ``/openapi.json`` serves)."""
    return create_app(mcp=False).openapi()
