"""memroute's MCP server (the official ``mcp`` SDK): memory_search, memory_retrieve,
memory_add and memory_delete over the service's `Memory` and `RetrievalAgent`.

The org comes from the API key; a tool's ``project_id``/``user_id``/``agent_id`` pick the
scope inside it (left out: the key's only project or user, if it is bound to one, else the
project ``default`` and no user). Every call authenticates the key and authorizes the scope
before it reads or writes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp import types as mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.stdio import stdio_server
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memroute import __version__
from memroute.errors import InvalidInputError, MemrouteError
from memroute.hints import HINT_HELP, empty_scope_hint
from memroute.memory.limits import MAX_ID_CHARS, MAX_K, MAX_LIST, MAX_QUERY_CHARS
from memroute.memory.models import SCOPE_PART_PATTERN, Scope
from memroute.service.bodies import MAX_EPISODES_PER_REQUEST, StrictEpisode, invalid_fields
from memroute.service.jsonrpc import CheckedLines, claimed_stdin
from memroute.strategies.base import Strategy
from memroute.strategies.budget import Budget
from memroute.time.as_of import AS_OF_HELP, AsOf
from memroute.tool_input import DESCRIPTION as SEARCH_DESCRIPTION
from memroute.tool_input import MemorySearchInput

if TYPE_CHECKING:
    from memroute.service.context import Service

INSTRUCTIONS = (
    "Long-term episodic memory (conversation turns, notes). Use memory_search to look facts "
    "up page by page, memory_retrieve for questions that need several hops or parts, "
    "memory_add to remember new turns, memory_delete to forget them.")

_SEARCH_ARGS = MemorySearchInput.model_fields  # the agent tool's arguments, described once
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS,
                             description=_SEARCH_ARGS["query"].description)]
PAGE_SIZE = 10
Page = Annotated[int, Field(ge=0, description=_SEARCH_ARGS["page"].description)]
ScopePart = Annotated[str, Field(pattern=SCOPE_PART_PATTERN)]
ProjectId = Annotated[ScopePart | None, Field(
    description="Project inside your org (default: your key's only project, else 'default').")]
UserId = Annotated[ScopePart | None, Field(
    description="User whose memory this is (default: your key's only user, else none).")]
AgentId = Annotated[ScopePart | None, Field(
    description="Agent whose memory this is (default: none).")]
Uid = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
Filters = Annotated[dict[str, Any] | None, Field(
    description="memroute's filter dialect over metadata and the columns session_id, producer "
                "and produced_at, e.g. {\"producer\": \"user\"}: nothing outside it is "
                "returned.")]
AsOfArg = Annotated[AsOf, Field(description=AS_OF_HELP + " memory_retrieve also reads 'last "
                                            "week' or 'yesterday' against it.")]
TokenSource = Callable[[Context], str | None]
ServiceSource = Callable[[], Awaitable["Service"]]


class SearchPage(BaseModel):
    """One page of memory_search: the numbered lines to read, and the same results as data."""

    text: str = Field(description="'Showing 10 of 42 results (page 1/5):' and the numbered "
                                  "results, best first, or why there are none.")
    results: list[dict[str, Any]]
    hint: str | None = Field(default=None, description=HINT_HELP)


class Retrieved(BaseModel):
    """What memory_retrieve found, and how: the route, the queries run, why it stopped."""

    route: str
    route_reason: str
    queries: list[str]
    stop_reason: str
    results: list[dict[str, Any]]
    text: str = Field(description="The results as numbered lines, best first.")
    hint: str | None = Field(default=None, description=HINT_HELP)


class Added(BaseModel):
    uids: list[str]


class Deleted(BaseModel):
    deleted: int
    by_scope: dict[str, int] | None = Field(
        default=None, description="With all: episodes deleted per scope path.")


def error_result(exc: MemrouteError, tool: str | None = None) -> mcp_types.CallToolResult:
    """A tool error a client can tell apart by kind, as the REST body's ``kind``:
    ``"[StoreUnavailableError] memory_search failed: ..."`` (with no ``tool``:
    ``"[InvalidInputError] unknown tool ..."``)."""
    failed = f"{tool} failed: " if tool else ""
    text = f"[{type(exc).__name__}] {failed}{' '.join(str(exc).split())}"
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)],
                                    is_error=True)


class MemrouteTool(Tool):
    """An MCP tool whose arguments are strict, as the REST bodies are: an unknown one is
    refused (the input schema says so with ``additionalProperties: false``) and a value of
    another JSON type too (``"k": "5"``, ``"k": true``, ``"all": "yes"``; the SDK would
    read them as 5, 1 and true). Every failure is a tool result whose text starts with the
    memroute error kind: ``[InvalidInputError] ...`` for arguments the schema refuses, the
    raised `MemrouteError`'s kind, ``[InternalError]`` for a crash (logged here; its text
    never reaches the client)."""

    @classmethod
    def strict(cls, fn: Callable[..., Any], description: str) -> MemrouteTool:
        tool = cls.from_function(fn, description=description)
        loose = tool.fn_metadata.arg_model
        strict = type(loose.__name__, (loose,), {
            "__module__": __name__,
            "model_config": ConfigDict(extra="forbid", strict=True,
                                       arbitrary_types_allowed=True)})
        tool.fn_metadata.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)
        return tool

    async def run(self, arguments: dict[str, Any], context: Any,
                  convert_result: bool = False) -> Any:
        try:  # the arguments as sent: not first parsed from JSON text as the SDK does
            self.fn_metadata.arg_model.model_validate(arguments)
        except ValidationError as exc:
            return error_result(InvalidInputError(f"invalid arguments: {invalid_fields(exc)}"),
                                self.name)
        try:
            return await super().run(arguments, context, convert_result=convert_result)
        except ToolError as exc:
            cause = exc.__cause__
            while cause is not None and not isinstance(cause, MemrouteError):
                cause = cause.__cause__
            if cause is not None:
                return error_result(cause, self.name)
            from memroute._log import get_logger  # structlog (and rich) load on a crash only

            get_logger(__name__).error("mcp.tool_crashed", tool=self.name,
                                       exc_info=exc.__cause__ or exc)
            return mcp_types.CallToolResult(is_error=True, content=[mcp_types.TextContent(
                type="text", text=f"[InternalError] {self.name} failed (see the server log)")])


def http_token(ctx: Context) -> str | None:
    """The bearer token of the HTTP request behind a tool call."""
    from memroute.service.auth import bearer_token

    return bearer_token(ctx.headers)


def build_mcp_server(get_service: ServiceSource, token_for: TokenSource,
                     *, lifespan: Callable[..., Any] | None = None) -> MCPServer:
    """The MCP server; ``get_service`` gives the service a call works on (waiting while it
    opens: the server lists its tools before), ``token_for`` the API key of a call (the HTTP
    header, or the key a stdio server was started with)."""

    async def scoped(ctx: Context, project_id: str | None, user_id: str | None,
                     agent_id: str | None) -> tuple[Service, Scope]:
        from memroute.service.auth import authenticate, authorize

        service = await get_service()
        grant = await authenticate(service.keys, token_for(ctx))
        try:
            scope = grant.default_scope(project_id, user_id, agent_id)
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from exc
        return service, authorize(grant, scope)

    async def memory_search(ctx: Context, query: Query, page: Page = 0, as_of: AsOfArg = None,
                            filters: Filters = None, project_id: ProjectId = None,
                            user_id: UserId = None, agent_id: AgentId = None) -> SearchPage:
        from memroute.tools import MemorySearch

        service, scope = await scoped(ctx, project_id, user_id, agent_id)
        # a fresh search per call (each page reads the store again): a kept result list
        # would serve an episode deleted since, by this process or another
        search = MemorySearch(service.memory, scope, page_size=PAGE_SIZE, as_of=as_of,
                              filters=filters)
        text, results = await search.apage(query, page)  # a failure: the memory's error
        hint = None if results else await empty_scope_hint(service.memory, scope)
        return SearchPage(text=f"{text} ({hint})" if hint else text, results=results,
                          hint=hint)

    async def memory_retrieve(ctx: Context, query: Query,
                              k: Annotated[int, Field(ge=1, le=MAX_K,
                                                      description="Results to return.")] = 10,
                              strategy: Annotated[Strategy, Field(
                                  description="auto lets the agent choose the route.")] = "auto",
                              budget: Annotated[Budget | None, Field(
                                  description="Ceilings on LLM calls, tokens and seconds.")] = None,
                              as_of: AsOfArg = None, filters: Filters = None,
                              project_id: ProjectId = None, user_id: UserId = None,
                              agent_id: AgentId = None) -> Retrieved:
        from memroute.tools import artifact, format_result

        service, scope = await scoped(ctx, project_id, user_id, agent_id)
        found = await service.agent.aretrieve(query, scope=scope, k=k, strategy=strategy,
                                              budget=budget, as_of=as_of, filters=filters)
        text = "\n".join(format_result(i, r) for i, r in enumerate(found.results, 1))
        hint = None if found.results else await empty_scope_hint(service.memory, scope)
        return Retrieved(route=found.route, route_reason=found.route_reason,
                         queries=found.queries, stop_reason=found.stop_reason,
                         results=[artifact(i, r) for i, r in enumerate(found.results, 1)],
                         text=text or f"No results found for {query!r}." + (
                             f" ({hint})" if hint else ""), hint=hint)

    async def memory_add(ctx: Context,
                         episodes: Annotated[list[StrictEpisode], Field(
                             min_length=1, max_length=MAX_EPISODES_PER_REQUEST)],
                         project_id: ProjectId = None, user_id: UserId = None,
                         agent_id: AgentId = None) -> Added:
        service, scope = await scoped(ctx, project_id, user_id, agent_id)
        return Added(uids=await service.memory.add(scope, episodes))

    async def memory_delete(ctx: Context,
                            uids: Annotated[list[Uid] | None, Field(
                                max_length=MAX_LIST, description="The uids to delete.")] = None,
                            session_id: Annotated[Uid | None, Field(
                                description="Delete every episode of this session.")] = None,
                            all: Annotated[bool, Field(  # noqa: A002
                                description="Delete the whole scope (must be explicit).")] = False,
                            sub_scopes: Annotated[bool, Field(
                                description="With all: the scopes under this one too.")] = False,
                            project_id: ProjectId = None, user_id: UserId = None,
                            agent_id: AgentId = None) -> Deleted:
        if not uids and not session_id and not all:
            raise InvalidInputError("give uids, a session_id, or all=true to forget the "
                                    "whole scope")
        service, scope = await scoped(ctx, project_id, user_id, agent_id)
        deleted = await service.memory.delete(
            scope, session_id=session_id, uids=uids, all=all, sub_scopes=sub_scopes)
        return Deleted(deleted=deleted, by_scope=deleted.by_scope if all else None)

    tools = [
        MemrouteTool.strict(memory_search, SEARCH_DESCRIPTION.format(page_size=PAGE_SIZE)),
        MemrouteTool.strict(memory_retrieve, (
            "Answer-oriented retrieval: memroute's agent decides whether the question needs "
            "one search, several parts searched separately (split) or a chain of searches "
            "where each hop uses what the last found (chain), then reranks all evidence. "
            "Returns the top k results plus the route taken, the queries it ran and why it "
            "stopped.")),
        MemrouteTool.strict(memory_add, (
            "Remember episodes (conversation turns or notes). Each needs 'content'; "
            "'producer' (who said it), 'session_id', 'produced_at' (ISO 8601) and 'uid' are "
            "optional. Adding a uid that is already stored changes nothing. Returns the "
            "uids.")),
        MemrouteTool.strict(memory_delete, (
            "Forget episodes: give their uids, or a session_id to forget a whole session, or "
            "all=true to forget the whole scope (with sub_scopes=true, its agents' scopes "
            "too). Returns how many episodes were deleted.")),
    ]
    return MemrouteMCPServer("memroute", version=__version__, instructions=INSTRUCTIONS,
                             lifespan=lifespan, log_level="WARNING", tools=tools)


class MemrouteMCPServer(MCPServer):
    """`MCPServer` whose answer to a tool it does not have is a tool error like every other:
    ``[InvalidInputError] unknown tool 'x': the tools are ...``."""

    def __init__(self, *args: Any, tools: list[Tool], **kwargs: Any) -> None:
        super().__init__(*args, tools=tools, **kwargs)
        self.tool_names = sorted(tool.name for tool in tools)

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context | None = None) -> Any:
        if name not in self.tool_names:
            return error_result(InvalidInputError(
                f"unknown tool {name[:MAX_ID_CHARS]!r}: the tools are "
                f"{', '.join(self.tool_names)}"))
        return await super().call_tool(name, arguments, context)


async def serve_stdio(server: MCPServer,
                      after_first_message: Callable[[], None] | None = None) -> None:
    """Serve ``server`` on stdin/stdout as `MCPServer.run_stdio_async` does, but answer every
    line that is not one JSON-RPC message the server can take with its JSON-RPC error
    (`memroute.service.jsonrpc.refusal`), as the HTTP endpoint answers such a body; the
    session goes on. ``after_first_message`` runs when a second message arrives (a client
    sends ``notifications/initialized`` once ``initialize`` is answered)."""
    lowlevel = server._lowlevel_server  # what run_stdio_async runs
    with claimed_stdin() as wire:
        lines = CheckedLines(wire, after_first_message)
        async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore
            lines.answer_on(write_stream)
            await lowlevel.run(read_stream, write_stream,
                               lowlevel.create_initialization_options())
