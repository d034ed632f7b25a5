"""The REST routes under ``/v1``: thin calls on the service's `Memory` and `RetrievalAgent`.

Every route that touches memory needs a valid key (checked by the app's `KeyRequired` from
the headers, before the body is read; the dependency here takes its grant) and authorizes the
scope before the call.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from psycopg import OperationalError

from memroute._log import get_logger
from memroute.errors import InvalidInputError, MemrouteError, StoreUnavailableError
from memroute.graph.events import Final, as_payload
from memroute.hints import empty_scope_hint
from memroute.memory.models import Scope
from memroute.service.auth import authenticate, authorize
from memroute.service.context import Service
from memroute.service.keys import KeyGrant
from memroute.service.models import (
    AddEpisodes,
    Deleted,
    DeleteQuery,
    ErrorBody,
    Health,
    Hit,
    Retrieve,
    RetrieveResponse,
    ScopeStats,
    ScopeQuery,
    Search,
    SearchResponse,
    Status,
    Uids,
)


log = get_logger(__name__)


async def service(request: Request) -> Service:
    """The service, once open (a request while it opens waits for it)."""
    return await request.app.state.opener.get()


_bearer = HTTPBearer(auto_error=False, description="An API key from `memroute keys create`.")


async def key_grant(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    svc: Annotated[Service, Depends(service)],
) -> KeyGrant:
    checked = getattr(request.state, "key_grant", None)  # by `KeyRequired`, before the body
    if checked is not None:
        return checked
    return await authenticate(svc.keys, credentials.credentials if credentials else None)


Grant = Annotated[KeyGrant, Depends(key_grant)]
Svc = Annotated[Service, Depends(service)]
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text} for code, text in (
        (401, "No API key, or an invalid or revoked one"),
        (403, "The scope lies outside the API key"),
        (413, "The request body is too large"),
        (422, "Invalid input"),
        (503, "The database is unavailable"))}


LIST_PARAMETERS = frozenset({"uid"})  # query parameters a route takes repeated


async def query_string_checked(request: Request) -> None:
    """The query string carries only what the route reads, each once: a POST route takes
    its arguments in its body, so any query parameter there is refused (it would be read as
    nothing, never as the scope meant); a parameter given twice is refused (which one would
    count is not the caller's to guess), but for the lists (``uid``)."""
    names = [name for name, _ in request.query_params.multi_items()]
    if request.method == "POST" and names:
        raise InvalidInputError(f"unknown query parameter(s) {sorted(set(names))}: this route "
                                "takes its arguments in the JSON body")
    if repeated := sorted({n for n in names if names.count(n) > 1} - LIST_PARAMETERS):
        raise InvalidInputError(f"query parameter(s) {repeated} given more than once")


router = APIRouter(prefix="/v1", responses=_ERRORS,
                   dependencies=[Depends(query_string_checked)])


@router.post("/episodes", response_model=Uids, tags=["memory"])
async def add_episodes(body: AddEpisodes, grant: Grant, svc: Svc) -> Uids:
    """Store episodes in one scope, atomically; idempotent by uid (a uid stored before is
    left as it is). Returns the uids in input order; an episode without one gets a uid
    derived from its scope, session, producer, time and content, so a retry stores it once."""
    return Uids(uids=await svc.memory.add(authorize(grant, body.scope), body.episodes))


@router.delete("/episodes", response_model=Deleted, response_model_exclude_none=True,
               tags=["memory"])
async def delete_episodes(params: Annotated[DeleteQuery, Query()], grant: Grant,
                          svc: Svc) -> Deleted:
    """Delete episodes by uid, by session, or (with ``all=true``) the whole scope, with
    ``sub_scopes=true`` every scope under it too (``by_scope`` counts each)."""
    scope = authorize(grant, params.scope)
    deleted = await svc.memory.delete(scope, session_id=params.session_id, uids=params.uid,
                                      all=params.all, sub_scopes=params.sub_scopes)
    return Deleted(deleted=deleted, by_scope=deleted.by_scope if params.all else None)


@router.get("/scopes/stats", response_model=ScopeStats, tags=["memory"])
async def scope_stats(params: Annotated[ScopeQuery, Query()], grant: Grant,
                      svc: Svc) -> ScopeStats:
    """How many episodes and sentences a scope holds."""
    scope = authorize(grant, params.scope)
    return ScopeStats(scope=scope, **await svc.memory.count(scope))


async def _hint(svc: Service, scope: Scope, results: list) -> str | None:
    """`empty_scope_hint`, asked only when nothing was found."""
    return None if results else await empty_scope_hint(svc.memory, scope)


@router.post("/search", response_model=SearchResponse, tags=["retrieval"])
async def search(body: Search, grant: Grant, svc: Svc) -> SearchResponse:
    """Direct search: one query, the top ``k`` results with their context, best first. The
    query is matched as written: ``as_of`` bounds what is returned (the agent,
    /v1/retrieve, also reads 'last week' against it)."""
    scope = authorize(grant, body.scope)
    found = await svc.memory.search_scored(scope, body.query, k=body.k, filters=body.filters,
                                           as_of=body.as_of)
    return SearchResponse(results=[Hit.of(r) for r in found], timings=found.timings,
                          reranker=found.reranker, hint=await _hint(svc, scope, found))


@router.post("/retrieve", response_model=RetrieveResponse, tags=["retrieval"])
async def retrieve(body: Retrieve, grant: Grant, svc: Svc) -> RetrieveResponse:
    """The retrieval agent: routes the query (direct, split or chain, or the ``strategy``
    given), searches within the ``budget``, and reranks the pooled evidence; 'last week'
    in the query is read against ``as_of``."""
    scope = authorize(grant, body.scope)
    result = await svc.agent.aretrieve(body.query, scope=scope, k=body.k,
                                       filters=body.filters, strategy=body.strategy,
                                       budget=body.budget, as_of=body.as_of)
    return RetrieveResponse.of(result, await _hint(svc, scope, result.results))


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


@router.post("/retrieve/stream", tags=["retrieval"], response_class=StreamingResponse,
             responses={200: {"description": "Server-sent events: route, sub_queries, "
                              "search, hop, then final (data: a RetrieveResponse), or error.",
                              "content": {"text/event-stream": {}}}})
async def retrieve_stream(body: Retrieve, grant: Grant, svc: Svc) -> StreamingResponse:
    """The agent's steps as server-sent events, as they happen; the last event is ``final``
    with the full result (or ``error``)."""
    scope = authorize(grant, body.scope)

    async def events() -> AsyncIterator[str]:
        # the stream has begun (200 is sent): whatever fails, the error is its last event,
        # typed as the JSON routes' bodies are
        try:
            async for event in svc.agent.astream(body.query, scope=scope, k=body.k,
                                                 filters=body.filters, strategy=body.strategy,
                                                 budget=body.budget, as_of=body.as_of):
                if isinstance(event, Final):
                    final = RetrieveResponse.of(event.result,
                                                await _hint(svc, scope, event.result.results))
                    yield _sse("final", final.model_dump(mode="json"))
                else:
                    yield _sse(event.event, as_payload(event))
        except MemrouteError as exc:
            yield _sse("error", {"error": " ".join(str(exc).split()),
                                 "kind": type(exc).__name__})
        except OperationalError as exc:
            yield _sse("error", {"error": f"database unavailable: {' '.join(str(exc).split())}",
                                 "kind": StoreUnavailableError.__name__})
        except Exception as exc:  # its text stays in the server's log, as for the JSON routes
            log.error("rest.stream_failed", path="/v1/retrieve/stream", exc_info=exc)
            yield _sse("error", {"error": "internal error (see the server log)",
                                 "kind": "InternalError"})

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


@router.get("/health", response_model=Health, tags=["service"])
async def health(request: Request) -> Health:
    """Liveness: the process answers (``status`` ok), with the ``state`` of its memory:
    ``starting`` while the models load and the store opens, then ``ready`` (or ``failed``,
    with the reason in ``detail``)."""
    opener = request.app.state.opener
    error = opener.error
    return Health(status="ok", state=opener.state,
                  detail=" ".join(str(error).split()) if error else "")


@router.get("/ready", response_model=Status, tags=["service"],
            responses={503: {"model": Status, "description": "Not ready"}})
async def ready(request: Request) -> Any:
    """Readiness: the memory is open (else 503 ``starting`` or ``unavailable``) and the
    database answers a query."""
    opener = request.app.state.opener
    if opener.state == "starting":
        return JSONResponse(Status(status="starting", detail="the memory is opening (models, "
                                   "store)").model_dump(), status_code=503)
    if (error := opener.error) is not None:
        return JSONResponse(Status(status="unavailable", detail=str(error)).model_dump(),
                            status_code=503)
    try:
        svc = await opener.get()
        await svc.memory.count(Scope(org_id="_readiness"))
    except StoreUnavailableError as exc:
        return JSONResponse(Status(status="unavailable", detail=str(exc)).model_dump(),
                            status_code=503)
    return Status(status="ready")
