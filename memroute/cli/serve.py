"""``memroute serve`` (REST + MCP over HTTP), ``memroute mcp`` (MCP over stdio) and
``memroute keys`` (API keys). Needs the ``serve`` extra."""

# No `from __future__ import annotations`: typer reads every command's annotations at each
# start, and evaluating them from strings took it 0.1 s (issue 48).

import json
from typing import Annotated, Any

import typer

from memroute import cli_output as out
from memroute.cli._app import DebugOpt, JsonOpt, app, run, setup_command

keys_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                       help="API keys of the service: each bound to an org (and optionally "
                            "to projects and users).")
app.add_typer(keys_app, name="keys")

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@app.command("serve")
def serve(
    host: Annotated[str, typer.Option(help="Address to bind. Loopback only unless "
                                           "--allow-remote is given.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Allow binding a non-loopback address (put TLS in front: "
                               "see docs/serving.md).")] = False,
    allowed_host: Annotated[list[str] | None, typer.Option(
        "--allowed-host", help="Another host name clients reach the server by, e.g. behind "
                               "a reverse proxy (repeatable; MCP checks the Host header).")] = None,
    mcp: Annotated[bool, typer.Option(help="Serve MCP (streamable HTTP) at /mcp.")] = True,
    max_body_bytes: Annotated[int | None, typer.Option(
        help="Largest request body; larger ones get 413.")] = None,
    key_cache_seconds: Annotated[float, typer.Option(
        min=0, help="Trust a verified API key this long before looking it up again (a "
                    "revocation takes up to this long to reach a running server; 0: "
                    "look up every request).")] = 5.0,
    header_timeout_seconds: Annotated[float, typer.Option(
        min=0.1, help="Close a connection whose request headers have not all arrived this "
                      "long after it opened (or after its last response).")] = 10.0,
    body_timeout_seconds: Annotated[float, typer.Option(
        min=0.1, help="Answer 408 to a request whose body has not all arrived this long "
                      "after its headers.")] = 30.0,
    openapi: Annotated[bool, typer.Option(
        "--openapi", help="Print the REST API's OpenAPI schema and exit.")] = False,
    debug: DebugOpt = False,
) -> None:
    """Serve memory over HTTP: REST under /v1 and MCP at /mcp, keyed by API keys."""
    setup_command(False, debug)
    from memroute.errors import InvalidInputError
    from memroute.service.app import create_app, openapi_schema
    from memroute.service.models import MAX_REQUEST_BYTES

    if openapi:
        typer.echo(json.dumps(openapi_schema(), indent=2))
        return
    if host not in LOOPBACK and not allow_remote:
        raise InvalidInputError(
            f"refusing to bind {host!r}: memroute serves loopback only by default; pass "
            "--allow-remote to bind another address (behind a TLS proxy)")
    import uvicorn

    from memroute.service.protocol import H11_HEAD_LIMIT, AnnouncedServer, HeaderDeadlineH11

    application = create_app(host=host, allowed_hosts=allowed_host or [], mcp=mcp,
                             max_body_bytes=max_body_bytes or MAX_REQUEST_BYTES,
                             key_cache_seconds=key_cache_seconds,
                             body_timeout_s=body_timeout_seconds)
    # h11 with a deadline on request headers and JSON errors for what it refuses
    # (`HeaderDeadlineH11`); idle keep-alive connections close after uvicorn's 5 s
    config = uvicorn.Config(application, host=host, port=port, proxy_headers=False,
                            log_level="debug" if debug else "warning",
                            http=HeaderDeadlineH11.with_timeout(header_timeout_seconds),
                            h11_max_incomplete_event_size=H11_HEAD_LIMIT)
    server = AnnouncedServer(config, mcp=mcp, app=application)
    server.run()
    if server.failed is not None:
        raise server.failed  # the store or a model failed to open: its line and exit code
    if not server.started:
        raise typer.Exit(1)  # uvicorn logged why (the port is taken ...)


@app.command("mcp")
def mcp_stdio(
    api_key: Annotated[str | None, typer.Option(
        "--api-key", envvar="MEMROUTE_API_KEY", show_default=False,
        help="The API key every call is checked against (env MEMROUTE_API_KEY).")] = None,
    debug: DebugOpt = False,
) -> None:
    """Serve memory over MCP on stdin/stdout (for Claude Desktop, editors, agents)."""
    setup_command(False, debug)
    if not api_key:  # exit 6 with one line, like a wrong key (not a usage box, exit 2)
        from memroute.errors import NotAuthenticatedError

        raise NotAuthenticatedError("missing API key: set MEMROUTE_API_KEY or pass --api-key "
                                    "(create one with `memroute keys create`)")
    run(_mcp_stdio(api_key))


async def _mcp_stdio(token: str) -> None:
    """Serve at once and open the service in the background: ``initialize`` and
    ``tools/list`` are answered meanwhile, and a tool call waits for the opening (or gets
    its typed error). The opening begins once ``initialize`` is answered (with the client's
    next message, or a tool call): its imports in a worker thread would take the
    interpreter from the handshake. A wrong key or a failed opening is also this command's
    error when stdin closes (its one line on stderr, its exit code)."""
    from memroute.service.context import ServiceOpener
    from memroute.service.mcp_server import build_mcp_server, serve_stdio

    async def opening():
        from memroute.service.auth import authenticate
        from memroute.service.context import close_service, open_service
        from memroute.settings import get_settings

        service = await open_service(get_settings())
        try:
            await authenticate(service.keys, token)  # a wrong key: every call's error
        except BaseException:
            await close_service(service)
            raise
        return service

    opener = ServiceOpener(opening)
    try:
        await serve_stdio(build_mcp_server(opener.get, lambda ctx: token), opener.start)
        if await opener.wait() == "failed":
            raise opener.error  # type: ignore[misc]
    finally:
        await opener.close()


async def _with_keys(action: Any) -> Any:
    from memroute.service.context import close_service, open_service
    from memroute.settings import get_settings

    service = await open_service(get_settings())  # migrates the schema the keys live in
    try:
        return await action(service.keys)
    finally:
        await close_service(service)


def _record(record: Any) -> dict[str, Any]:
    return record.model_dump(mode="json")


@keys_app.command("create")
def keys_create(
    org: Annotated[str, typer.Option("--org", show_default=False, help="The key's org.")],
    project: Annotated[list[str] | None, typer.Option(
        "--project", help="Bind to this project (repeatable; default: all).")] = None,
    user: Annotated[list[str] | None, typer.Option(
        "--user", help="Bind to this user (repeatable; default: all).")] = None,
    name: Annotated[str, typer.Option(help="A label, e.g. who uses it.")] = "",
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Create a key; it is printed once (only a hash of it is stored)."""
    setup_command(json_output, debug)
    token, record = run(_with_keys(lambda keys: keys.create(
        org, project_ids=project or None, user_ids=user or None, name=name)))
    if json_output:
        out.emit_json({"key": token, **_record(record)})
        return
    typer.echo(token)
    typer.echo(f"key {record.key_id} for org {record.org_id}: store it now, it is not shown "
               "again", err=True)


@keys_app.command("list")
def keys_list(
    org: Annotated[str | None, typer.Option("--org", help="Only this org's keys.")] = None,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List keys (ids and bindings, never secrets), revoked ones included."""
    setup_command(json_output, debug)
    records = run(_with_keys(lambda keys: keys.list(org)))
    if json_output:
        out.emit_json([_record(r) for r in records])
        return
    console = out.stdout_console()
    for r in records:
        state = f"revoked {r.revoked_at:%Y-%m-%d %H:%M}" if r.revoked_at else "active"
        console.print(f"{r.key_id}  org={r.org_id}  projects={list(r.project_ids or ['*'])}  "
                      f"users={list(r.user_ids or ['*'])}  {state}  {r.name}", markup=False)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (or the whole key).")],
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Revoke a key: every later request with it gets 401."""
    setup_command(json_output, debug)
    from memroute.errors import InvalidInputError

    shown = key_id.split(".")[0]  # never echo a secret
    revoked = run(_with_keys(lambda keys: keys.revoke(key_id)))
    if not revoked:
        raise InvalidInputError(f"no active key {shown!r} (see `memroute keys list`)")
    if json_output:
        out.emit_json({"key_id": shown.removeprefix("mr_"), "revoked": True})
    else:
        typer.echo(f"revoked {shown.removeprefix('mr_')}")
