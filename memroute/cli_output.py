"""How the CLI shows things: JSON-ready dicts and rich tables for results, timings and costs."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from memroute.memory.models import Episode, Scope, ScoredResult


def stdout_console() -> Console:
    """A console on the current stdout (created per command, so test runners capture it)."""
    return Console(file=sys.stdout, soft_wrap=False, highlight=False)


def stderr_console() -> Console:
    return Console(file=sys.stderr, highlight=False)


def emit_json(payload: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def redact_url(url: str) -> str:
    """A connection URL with its password hidden."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def scope_label(scope: Scope) -> str:
    parts = [scope.org_id, scope.project_id, scope.user_id or "", scope.agent_id or ""]
    return "/".join(parts).rstrip("/")


def episode_dict(episode: Episode) -> dict[str, Any]:
    return {
        "uid": episode.uid,
        "session_id": episode.session_id,
        "producer": episode.producer,
        "produced_at": episode.produced_at.isoformat(),
        "content": episode.content,
        "metadata": episode.metadata,
    }


def result_dict(rank: int, result: ScoredResult) -> dict[str, Any]:
    """A search hit as plain JSON: the matched episode, its scores and its context cluster."""
    return {
        "rank": rank,
        **episode_dict(result.nucleus),
        "rerank_score": round(result.rerank_score, 6),
        "vector_score": round(result.vector_score, 6),
        "lexical_score": result.lexical_score,
        "reranker": result.reranker,
        "query": result.query,
        "matched_sentence": result.matched_sentence,
        "context": [episode_dict(e) for e in result.episodes if e.uid != result.uid],
    }


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def results_table(results: list[ScoredResult], title: str | None = None) -> Table:
    """Ranked results: both scores, the session and time, and who said what."""
    table = Table(title=title, expand=False)
    table.add_column("#", justify="right", style="dim")
    table.add_column("score", justify="right")
    table.add_column("vector", justify="right", style="dim")
    table.add_column("session", no_wrap=True)
    table.add_column("content", overflow="fold", min_width=36)
    for rank, result in enumerate(results, start=1):
        episode = result.nucleus
        session = Text(episode.session_id)
        session.append("\n" + episode.produced_at.strftime("%Y-%m-%d %H:%M"), style="dim")
        content = Text(f"{episode.producer}: ", style="bold")
        content.append(_short(episode.content))
        if len(result.episodes) > 1:
            content.append(f"  (+{len(result.episodes) - 1} context)", style="dim")
        table.add_row(str(rank), f"{result.rerank_score:.3f}", f"{result.vector_score:.3f}",
                      session, content)
    return table


def timings_line(timings: dict[str, float], reranker: str) -> str:
    parts = [f"{name.removesuffix('_ms')} {ms:.1f} ms" for name, ms in timings.items()]
    total = sum(timings.values())
    return " · ".join(parts + [f"total {total:.1f} ms", f"reranker {reranker}"])
