"""``memroute search`` through a running ``memroute serve`` (``MEMROUTE_SERVER_URL``).

A new process that only sends a request skips loading the embedder, spaCy and the store.
The server's answer is turned back into the objects the in-process path prints, so the
output is the same; its typed errors become the same `MemrouteError` (and exit code). A
server that cannot be reached means the in-process path, with a note on stderr; one that
answers with an error is that error (never another scope, never a second try).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from memroute import errors

SERVER_URL_ENV = "MEMROUTE_SERVER_URL"
API_KEY_ENV = "MEMROUTE_API_KEY"
CONNECT_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 120.0


def server_url() -> str | None:
    """The served base URL from ``MEMROUTE_SERVER_URL``, or None (in process)."""
    return (os.environ.get(SERVER_URL_ENV) or "").strip().rstrip("/") or None


class ServedResults(list):
    """The served search's results, with its stage timings and reranker (as `SearchResults`)."""

    def __init__(self, items: list, timings: dict[str, float], reranker: str) -> None:
        super().__init__(items)
        self.timings, self.reranker, self.entities = timings, reranker, {}


def error_of(status: int, body: Any) -> errors.MemrouteError:
    """The `MemrouteError` a server's error answer names (its ``kind``); an unknown kind is a
    plain `MemrouteError` (exit 1)."""
    body = body if isinstance(body, dict) else {}
    message = str(body.get("error") or f"HTTP {status}")
    kind = str(body.get("kind") or "")
    if kind == "InvalidNamespaceError":
        kind = "InvalidInputError"  # its class needs LangGraph; the same exit code
    cls = vars(errors).get(kind)
    if isinstance(cls, type) and issubclass(cls, errors.MemrouteError):
        return cls(message)
    return errors.MemrouteError(f"memroute serve answered {status} {kind}: {message}".strip())


async def post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """``body`` posted to ``url + path``: the answer's JSON, None if the server cannot be
    reached (a note on stderr), or the typed error it answered with (raised)."""
    import httpx

    key = os.environ.get(API_KEY_ENV)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.post(url + path, json=body, headers=headers)
    except httpx.TransportError as exc:  # refused, timed out, cut: searching reads nothing twice
        sys.stderr.write(f"note: memroute serve at {url} not reachable "
                         f"({type(exc).__name__}); searching in process\n")
        return None
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if response.status_code >= 400 or not isinstance(payload, dict):
        raise error_of(response.status_code, payload)
    return payload


def scored_result(hit: dict[str, Any], reranker: str, query: str | None) -> Any:
    """A `ScoredResult` from a REST hit."""
    from memroute.memory.models import Episode, ScoredResult

    return ScoredResult(
        nucleus=Episode.model_validate(hit["nucleus"]),
        episodes=[Episode.model_validate(e) for e in hit["episodes"]],
        matched_sentence=hit["matched_sentence"], vector_score=hit["vector_score"],
        rerank_score=hit["rerank_score"], lexical_score=hit.get("lexical_score"),
        reranker=reranker, query=query, score=hit["score"])


async def search(url: str, scope: Any, query: str, k: int, filters: dict | None,
                 as_of: str | None) -> tuple[ServedResults, str | None] | None:
    """``POST /v1/search``: (results, hint) as `memroute search` prints them, or None if the
    server cannot be reached."""
    body = {"scope": scope.model_dump(exclude_none=True), "query": query, "k": k,
            "filters": filters, "as_of": as_of}
    payload = await post(url, "/v1/search", body)
    if payload is None:
        return None
    reranker = payload.get("reranker", "none")
    results = [scored_result(hit, reranker, query) for hit in payload["results"]]
    return ServedResults(results, payload.get("timings") or {}, reranker), payload.get("hint")


class ServedCosts:
    """The agent's costs as the server reported them (``Costs.as_dict``), read as `Costs`."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.nodes: list[dict[str, Any]] = data.get("nodes") or []
        self.by_node: dict[str, dict[str, Any]] = data.get("by_node") or {}
        self.totals: dict[str, Any] = data.get("totals") or {}

    def as_dict(self) -> dict[str, Any]:
        return self.data


_TRACE_KEYS = ("route", "queries", "stop_reason", "prompt_versions", "sub_queries", "hops",
               "notes", "route_reason", "planner", "search_rounds")


class ServedAnswer:
    """A `RetrievalResult` rebuilt from the server's ``final`` answer (`RetrieveResponse`)."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload
        for name in _TRACE_KEYS:
            setattr(self, name, payload.get(name))
        self.costs = ServedCosts(payload.get("costs") or {})
        self.results = []
        for hit in payload.get("results") or []:
            result = scored_result(hit, hit.get("reranker", "none"), hit.get("query"))
            if hit.get("role") is not None:
                result.extra.update(hop=hit.get("hop", 0), role=hit["role"])
            self.results.append(result)

    def trace(self) -> dict[str, Any]:
        """As `RetrievalResult.trace`."""
        data = {name: self.payload.get(name) for name in _TRACE_KEYS}
        data["costs"] = self.costs.as_dict()
        data["result_uids"] = [r.uid for r in self.results]
        return data


async def ask(url: str, query: str, options: dict[str, Any],
              on_event: Any) -> tuple[ServedAnswer, str | None] | None:
    """``POST /v1/retrieve/stream``: each step to ``on_event`` (an object with the streamed
    event's fields), then (answer, hint); None if the server cannot be reached."""
    import json
    from types import SimpleNamespace

    import httpx

    budget = {k: v for k, v in (options["budget"] or {}).items() if v is not None} or None
    body = {"scope": options["scope"].model_dump(exclude_none=True), "query": query,
            "k": options["k"], "filters": options["filters"], "as_of": options["as_of"],
            "strategy": options["strategy"], "budget": budget}
    key = os.environ.get(API_KEY_ENV)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    final: dict[str, Any] | None = None
    started = False
    try:
        async with httpx.AsyncClient(timeout=timeout) as client, client.stream(
                "POST", url + "/v1/retrieve/stream", json=body, headers=headers) as response:
            if response.status_code >= 400:
                await response.aread()
                try:
                    error_body = response.json()
                except ValueError:
                    error_body = None
                raise error_of(response.status_code, error_body)
            started = True
            name = ""
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                    if name == "final":
                        final = data
                    elif name == "error":
                        raise error_of(500, data)
                    else:
                        on_event(SimpleNamespace(**data))
    except httpx.TransportError as exc:
        if started:  # the server was reached: its steps were shown, so this is the error
            raise errors.MemrouteError(f"memroute serve at {url} stopped answering "
                                       f"({type(exc).__name__})") from exc
        sys.stderr.write(f"note: memroute serve at {url} not reachable "
                         f"({type(exc).__name__}); asking in process\n")
        return None
    if final is None:
        raise errors.MemrouteError(f"memroute serve at {url} ended the answer without a result")
    return ServedAnswer(final), final.get("hint")
