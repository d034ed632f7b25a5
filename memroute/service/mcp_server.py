"""memroute's MCP server (the official ``mcp`` SDK): memory_search, memory_retrieve,
memory_add and memory_delete over the service's `Memory` and `RetrievalAgent`.

The org comes from the API key; a tool's ``project_id``/``user_id``/``agent_id`` pick the
scope inside it (left out: the key's only project or user, if it is bound to one, else the
project ``default`` and no user). Every call authenticates the key and authorizes the scope
before it reads or writes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from langchain_core.tools import ToolException
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from memroute import __version__
from memroute.errors import InvalidInputError, MemrouteError
from memroute.memory.limits import MAX_K, MAX_QUERY_CHARS
from memroute.memory.models import Episode, Scope
from memroute.service.auth import authenticate, authorize, bearer_token
from memroute.service.models import MAX_EPISODES_PER_REQUEST
from memroute.service.context import Service
from memroute.strategies.base import Strategy
from memroute.strategies.budget import Budget
from memroute.tools import DESCRIPTION as SEARCH_DESCRIPTION
from memroute.tools import MemorySearch, MemorySearchInput, artifact, format_result

INSTRUCTIONS = (
    "Long-term episodic memory (conversation turns, notes). Use memory_search to look facts "
    "up page by page, memory_retrieve for questions that need several hops or parts, "
    "memory_add to remember new turns, memory_delete to forget them.")

_SEARCH_ARGS = MemorySearchInput.model_fields  # the agent tool's arguments, described once
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS,
                             description=_SEARCH_ARGS["query"].description)]
PAGE_SIZE = 10
Page = Annotated[int, Field(ge=0, description=_SEARCH_ARGS["page"].description)]
ProjectId = Annotated[str | None, Field(
    description="Project inside your org (default: your key's only project, else 'default').")]
UserId = Annotated[str | None, Field(
    description="User whose memory this is (default: your key's only user, else none).")]
AgentId = Annotated[str | None, Field(description="Agent whose memory this is (default: none).")]
TokenSource = Callable[[Context], str | None]


class Retrieved(BaseModel):
    """What memory_retrieve found, and how: the route, the queries run, why it stopped."""

    route: str
    route_reason: str
    queries: list[str]
    stop_reason: str
    results: list[dict[str, Any]]
    text: str = Field(description="The results as numbered lines, best first.")


class Added(BaseModel):
    uids: list[str]


class Deleted(BaseModel):
    deleted: int
    by_scope: dict[str, int] | None = Field(
        default=None, description="With all: episodes deleted per scope path.")


def tool_error(exc: MemrouteError, tool: str | None = None) -> ToolError:
    """A tool error a client can tell apart by kind, as the REST body's ``kind``:
    ``"[StoreUnavailableError] memory_search failed: ..."``."""
    return ToolError(f"[{type(exc).__name__}] {f'{tool} failed: ' if tool else ''}{exc}")


def http_token(ctx: Context) -> str | None:
    """The bearer token of the HTTP request behind a tool call."""
    return bearer_token(ctx.headers)


def build_mcp_server(get_service: Callable[[], Service], token_for: TokenSource,
                     *, lifespan: Callable[..., Any] | None = None) -> MCPServer:
    """The MCP server; ``token_for`` gives the API key of a call (the HTTP header, or the
    key a stdio server was started with)."""
    server = MCPServer("memroute", version=__version__, instructions=INSTRUCTIONS,
                       lifespan=lifespan, log_level="WARNING")

    async def scoped(ctx: Context, project_id: str | None, user_id: str | None,
                     agent_id: str | None) -> Scope:
        try:
            grant = await authenticate(get_service().keys, token_for(ctx))
            return authorize(grant, grant.default_scope(project_id, user_id, agent_id))
        except MemrouteError as exc:
            raise tool_error(exc) from exc
        except ValueError as exc:
            raise tool_error(InvalidInputError(str(exc))) from exc

    async def call(coro: Awaitable[Any], tool: str) -> Any:
        try:
            return await coro
        except MemrouteError as exc:
            raise tool_error(exc, tool) from exc

    @server.tool(description=SEARCH_DESCRIPTION.format(page_size=PAGE_SIZE))
    async def memory_search(ctx: Context, query: Query, page: Page = 0,
                            project_id: ProjectId = None, user_id: UserId = None,
                            agent_id: AgentId = None) -> str:
        scope = await scoped(ctx, project_id, user_id, agent_id)
        # a fresh search per call (each page reads the store again): a kept result list
        # would serve an episode deleted since, by this process or another
        search = MemorySearch(get_service().memory, scope, page_size=PAGE_SIZE)
        try:
            text, _ = await search.apage(query, page)
        except ToolException as exc:  # the agent tool's, around the memory's error
            cause = exc.__cause__
            raise (tool_error(cause, "memory_search") if isinstance(cause, MemrouteError)
                   else ToolError(str(exc))) from exc
        return text

    @server.tool(description=(
        "Answer-oriented retrieval: memroute's agent decides whether the question needs one "
        "search, several parts searched separately (split) or a chain of searches where each "
        "hop uses what the last found (chain), then reranks all evidence. Returns the top k "
        "results plus the route taken, the queries it ran and why it stopped."))
    async def memory_retrieve(ctx: Context, query: Query,
                              k: Annotated[int, Field(ge=1, le=MAX_K,
                                                      description="Results to return.")] = 10,
                              strategy: Annotated[Strategy, Field(
                                  description="auto lets the agent choose the route.")] = "auto",
                              budget: Annotated[Budget | None, Field(
                                  description="Ceilings on LLM calls, tokens and seconds.")] = None,
                              project_id: ProjectId = None, user_id: UserId = None,
                              agent_id: AgentId = None) -> Retrieved:
        scope = await scoped(ctx, project_id, user_id, agent_id)
        found = await call(get_service().agent.aretrieve(query, scope=scope, k=k,
                                                         strategy=strategy, budget=budget),
                           "memory_retrieve")
        return Retrieved(route=found.route, route_reason=found.route_reason,
                         queries=found.queries, stop_reason=found.stop_reason,
                         results=[artifact(i, r) for i, r in enumerate(found.results, 1)],
                         text="\n".join(format_result(i, r)
                                        for i, r in enumerate(found.results, 1)))

    @server.tool(description=(
        "Remember episodes (conversation turns or notes). Each needs 'content'; 'producer' "
        "(who said it), 'session_id', 'produced_at' (ISO 8601) and 'uid' are optional. "
        "Adding a uid that is already stored changes nothing. Returns the uids."))
    async def memory_add(ctx: Context,
                         episodes: Annotated[list[Episode], Field(
                             min_length=1, max_length=MAX_EPISODES_PER_REQUEST)],
                         project_id: ProjectId = None, user_id: UserId = None,
                         agent_id: AgentId = None) -> Added:
        scope = await scoped(ctx, project_id, user_id, agent_id)
        uids = await call(get_service().memory.add(scope, episodes), "memory_add")
        return Added(uids=uids)

    @server.tool(description=(
        "Forget episodes: give their uids, or a session_id to forget a whole session, or "
        "all=true to forget the whole scope (with sub_scopes=true, its agents' scopes too). "
        "Returns how many episodes were deleted."))
    async def memory_delete(ctx: Context,
                            uids: Annotated[list[str] | None, Field(
                                description="The uids to delete.")] = None,
                            session_id: Annotated[str | None, Field(
                                description="Delete every episode of this session.")] = None,
                            all: Annotated[bool, Field(  # noqa: A002
                                description="Delete the whole scope (must be explicit).")] = False,
                            sub_scopes: Annotated[bool, Field(
                                description="With all: the scopes under this one too.")] = False,
                            project_id: ProjectId = None, user_id: UserId = None,
                            agent_id: AgentId = None) -> Deleted:
        if not uids and not session_id and not all:
            raise ToolError("give uids, a session_id, or all=true to forget the whole scope")
        scope = await scoped(ctx, project_id, user_id, agent_id)
        deleted = await call(get_service().memory.delete(
            scope, session_id=session_id, uids=uids, all=all, sub_scopes=sub_scopes),
            "memory_delete")
        return Deleted(deleted=deleted, by_scope=deleted.by_scope if all else None)

    return server
