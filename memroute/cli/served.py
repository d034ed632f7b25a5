"""``memroute search`` through a running ``memroute serve`` (``MEMROUTE_SERVER_URL``).

A new process that only sends a request skips loading the embedder, spaCy and the store.
The server's answer is turned back into the objects the in-process path prints, so the
output is the same; its typed errors become the same `MemrouteError` (and exit code). A
server that cannot be reached means the in-process path, with a note on stderr; one that
answers with an error is that error (never another scope, never a second try).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from datetime import datetime
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


@dataclass(frozen=True)
class ServedEpisode:
    """An episode of a served answer: `Episode`'s fields as read (the server validated them;
    no pydantic in this process)."""

    content: str
    session_id: str
    producer: str
    produced_at: datetime
    metadata: dict[str, Any]
    uid: str | None

    @classmethod
    def of(cls, data: dict[str, Any]) -> ServedEpisode:
        return cls(content=data["content"], session_id=data["session_id"],
                   producer=data["producer"],
                   produced_at=datetime.fromisoformat(data["produced_at"]),
                   metadata=data.get("metadata") or {}, uid=data.get("uid"))


class _Request:
    """One request to the server (`http.client`: a new process sends one, and httpx costs as
    much to import as the rest of the served command). Connecting is allowed
    ``CONNECT_TIMEOUT_S``, each read ``READ_TIMEOUT_S``; the connection is direct (no proxy)."""

    def __init__(self, url: str, path: str, body: dict[str, Any]) -> None:
        import http.client
        from urllib.parse import urlsplit

        parts = urlsplit(url + path)
        kind = (http.client.HTTPSConnection if parts.scheme == "https"
                else http.client.HTTPConnection)
        self.connection = kind(parts.hostname or "127.0.0.1", parts.port,
                               timeout=CONNECT_TIMEOUT_S)
        self.target = parts.path + (f"?{parts.query}" if parts.query else "")
        self.payload = json.dumps(body).encode()
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key := os.environ.get(API_KEY_ENV):
            self.headers["Authorization"] = f"Bearer {key}"

    def send(self) -> Any:
        """The response (status and headers read), or OSError / HTTPException."""
        self.connection.connect()
        self.connection.sock.settimeout(READ_TIMEOUT_S)
        self.connection.request("POST", self.target, body=self.payload, headers=self.headers)
        return self.connection.getresponse()

    def close(self) -> None:
        self.connection.close()


def _unreachable(url: str, exc: BaseException, doing: str) -> None:
    sys.stderr.write(f"note: memroute serve at {url} not reachable "
                     f"({type(exc).__name__}); {doing} in process\n")


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """``body`` posted to ``url + path``: the answer's JSON, None if the server cannot be
    reached (a note on stderr), or the typed error it answered with (raised)."""
    import http.client

    request = _Request(url, path, body)
    try:
        response = request.send()
        raw = response.read()
    except (OSError, http.client.HTTPException) as exc:  # refused, timed out, cut: searching
        _unreachable(url, exc, "searching")              # reads nothing twice
        return None
    finally:
        request.close()
    payload = _json(raw)
    if response.status >= 400 or not isinstance(payload, dict):
        raise error_of(response.status, payload)
    return payload


def scored_result(hit: dict[str, Any], reranker: str, query: str | None) -> Any:
    """A `ScoredResult` from a REST hit."""
    from memroute.memory.results import ScoredResult

    return ScoredResult(
        nucleus=ServedEpisode.of(hit["nucleus"]),
        episodes=[ServedEpisode.of(e) for e in hit["episodes"]],
        matched_sentence=hit["matched_sentence"], vector_score=hit["vector_score"],
        rerank_score=hit["rerank_score"], lexical_score=hit.get("lexical_score"),
        reranker=reranker, query=query, score=hit["score"])


def search(url: str, scope: dict[str, str], query: str, k: int, filters: dict | None,
           as_of: str | None) -> tuple[ServedResults, str | None] | None:
    """``POST /v1/search``: (results, hint) as `memroute search` prints them, or None if the
    server cannot be reached."""
    body = {"scope": scope, "query": query, "k": k, "filters": filters, "as_of": as_of}
    payload = post(url, "/v1/search", body)
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


def ask(url: str, query: str, options: dict[str, Any],
        on_event: Any) -> tuple[ServedAnswer, str | None] | None:
    """``POST /v1/retrieve/stream``: each step to ``on_event`` (an object with the streamed
    event's fields), then (answer, hint); None if the server cannot be reached."""
    import http.client
    from types import SimpleNamespace

    budget = {k: v for k, v in (options["budget"] or {}).items() if v is not None} or None
    body = {"scope": options["scope"], "query": query, "k": options["k"],
            "filters": options["filters"], "as_of": options["as_of"],
            "strategy": options["strategy"], "budget": budget}
    request = _Request(url, "/v1/retrieve/stream", body)
    final: dict[str, Any] | None = None
    try:
        try:
            response = request.send()
        except (OSError, http.client.HTTPException) as exc:
            _unreachable(url, exc, "asking")
            return None
        if response.status >= 400:
            raise error_of(response.status, _json(response.read()))
        name = ""
        try:
            for raw in response:  # the server was reached: its steps are shown as they come
                line = raw.decode("utf-8").rstrip("\r\n")
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
        except (OSError, http.client.HTTPException) as exc:
            raise errors.MemrouteError(f"memroute serve at {url} stopped answering "
                                       f"({type(exc).__name__})") from exc
    finally:
        request.close()
    if final is None:
        raise errors.MemrouteError(f"memroute serve at {url} ended the answer without a result")
    return ServedAnswer(final), final.get("hint")
