"""How the CLI shows things: JSON-ready dicts and rich tables for results, timings and costs."""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Any

# rich loads inside the functions that draw (`--json` and `--help` never import it).
if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from memroute.memory.models import Episode, Scope, ScoredResult, ShownWindow


def stdout_console() -> Console:
    """A console on the current stdout (created per command, so test runners capture it)."""
    from rich.console import Console

    return Console(file=sys.stdout, soft_wrap=False, highlight=False)


def stderr_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr, highlight=False)


def emit_json(payload: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def redact_url(url: str) -> str:
    """A connection URL with its password hidden."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def scope_label(scope: Scope | dict[str, str]) -> str:
    """``org/project[/user[/agent]]`` of a `Scope` or of its fields (`scope_fields`)."""
    if isinstance(scope, dict):
        from memroute.memory.limits import DEFAULT_PROJECT

        fields = [scope["org_id"], scope.get("project_id") or DEFAULT_PROJECT,
                  scope.get("user_id") or "", scope.get("agent_id") or ""]
    else:
        fields = [scope.org_id, scope.project_id, scope.user_id or "", scope.agent_id or ""]
    return "/".join(fields).rstrip("/")


def episode_dict(episode: Episode) -> dict[str, Any]:
    return {
        "uid": episode.uid,
        "session_id": episode.session_id,
        "producer": episode.producer,
        "produced_at": episode.produced_at.isoformat(),
        "content": episode.content,
        "metadata": episode.metadata,
    }


def shown_windows(results: list[ScoredResult]) -> list[ShownWindow]:
    """What each result of one response shows: `disjoint_windows`, the rule the retriever and
    the agent tool follow (no episode in two results)."""
    from memroute.memory.results import disjoint_windows

    return disjoint_windows(results)


def result_dict(rank: int, result: ScoredResult, window: ShownWindow | None = None
                ) -> dict[str, Any]:
    """A search hit as plain JSON: the matched episode, its scores and the neighbours of its
    context window that ``window`` shows (by default all of them); ``context_uids`` names the
    whole window, ``shown_elsewhere`` the neighbours another result of the response shows."""
    neighbours = [e for e in (window.episodes if window else result.episodes)
                  if e.uid != result.uid]
    return {
        "rank": rank,
        **episode_dict(result.nucleus),
        "score": round(result.score, 6),
        "rerank_score": round(result.rerank_score, 6),
        "vector_score": round(result.vector_score, 6),
        "lexical_score": result.lexical_score,
        "reranker": result.reranker,
        "query": result.query,
        "matched_sentence": result.matched_sentence,
        "context": [episode_dict(e) for e in neighbours],
        "context_uids": [e.uid for e in result.episodes if e.uid != result.uid],
        "shown_elsewhere": window.shown_elsewhere if window else [],
    }


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def results_table(results: list[ScoredResult], title: str | None = None) -> Table:
    """Ranked results: both scores, the session and time, who said what, and the context
    turns no better result shows already (`shown_windows`)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, expand=False)
    table.add_column("#", justify="right", style="dim")
    table.add_column("score", justify="right")
    table.add_column("vector", justify="right", style="dim")
    table.add_column("session", no_wrap=True)
    table.add_column("content", overflow="fold", min_width=36)
    for rank, (result, window) in enumerate(zip(results, shown_windows(results)), start=1):
        episode = result.nucleus
        session = Text(episode.session_id)
        session.append("\n" + episode.produced_at.strftime("%Y-%m-%d %H:%M"), style="dim")
        content = Text()
        for turn in window.episodes:
            if turn.uid == result.uid:
                content.append(f"{turn.producer}: ", style="bold")
                content.append(_short(turn.content))
            else:
                content.append(f"{turn.producer}: {_short(turn.content, 80)}", style="dim")
            content.append("\n")
        if window.shown_elsewhere:
            content.append(f"(+{len(window.shown_elsewhere)} context shown in other results)",
                           style="dim")
        content.rstrip()
        table.add_row(str(rank), f"{result.score:.3f}", f"{result.vector_score:.3f}",
                      session, content)
    return table


def timings_line(timings: dict[str, float], reranker: str) -> str:
    parts = [f"{name.removesuffix('_ms')} {ms:.1f} ms" for name, ms in timings.items()]
    total = sum(timings.values())
    return " · ".join(parts + [f"total {total:.1f} ms", f"reranker {reranker}"])


# -- the agent -----------------------------------------------------------------------------

def event_line(event: Any) -> str | None:
    """A one-line account of a streamed agent event (None for the final one)."""
    kind = getattr(event, "event", "")
    if kind == "route":
        return f"route: {event.route} ({event.source}{': ' + event.reason if event.reason else ''})"
    if kind == "sub_queries":
        return "sub-queries: " + " | ".join(event.queries)
    if kind == "search":
        where = f" hop {event.hop}" if event.role == "chain" else ""
        return f"search{where} [{event.role}]: {event.query!r} → {event.hits} hits"
    if kind == "hop":
        verdict = "?" if event.is_sufficient is None else ("yes" if event.is_sufficient else "no")
        confidence = "-" if event.confidence is None else f"{event.confidence:.2f}"
        then = f"next {event.new_query!r}" if event.decision == "continue" else event.decision
        why = f" · {event.reason}" if getattr(event, "reason", "") else ""
        return f"hop {event.hop}: sufficient {verdict} (confidence {confidence}) → {then}{why}"
    return None


def hops_table(hops: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(title="ChainOfQuery hops", title_justify="left")
    for name, justify in (("hop", "right"), ("query", "left"), ("sufficient", "center"),
                          ("confidence", "right"), ("evidence", "left"), ("then", "left")):
        table.add_column(name, justify=justify, overflow="fold")
    for hop in hops:
        sufficient = hop.get("is_sufficient")
        confidence = hop.get("confidence")
        # a hop's concurrent searches, one per line
        queries = "\n".join([hop.get("query", ""), *(hop.get("concurrent_queries") or [])])
        following = "\n".join([hop.get("new_query", ""),
                               *(hop.get("new_concurrent_queries") or [])])
        then = (f"next: {following}" if hop.get("decision") == "continue"
                else f"stop: {hop.get('decision')}")
        if hop.get("reason"):
            then += f"\n({hop['reason']})"
        table.add_row(str(hop.get("hop")), queries,
                      "-" if sufficient is None else ("yes" if sufficient else "no"),
                      "-" if confidence is None else f"{confidence:.2f}",
                      ",".join(str(i) for i in hop.get("evidence_indices") or []) or "-", then)
    return table


def costs_table(costs: Any) -> Table:
    """Per node and in total: LLM calls, input and output tokens, wall time."""
    from rich.table import Table

    table = Table(title="Cost", title_justify="left")
    table.add_column("node")
    for name in ("runs", "llm calls", "input tokens", "output tokens", "wall ms"):
        table.add_column(name, justify="right")
    for node, total in costs.by_node.items():
        runs = sum(1 for record in costs.nodes if record["node"] == node)
        table.add_row(node, str(runs), str(total["llm_calls"]), str(total["input_tokens"]),
                      str(total["output_tokens"]), f"{total['wall_ms']:.1f}")
    totals = costs.totals
    mark = " (estimated)" if totals["estimated"] else ""
    table.add_row("total", str(len(costs.nodes)), str(totals["llm_calls"]),
                  f"{totals['input_tokens']}{mark}", f"{totals['output_tokens']}{mark}",
                  f"{totals['wall_ms']:.1f}", style="bold")
    return table


def print_explanation(console: Console, result: Any) -> None:
    """``ask --explain``: route, sub-queries or hops, the evidence, the cost table."""
    from rich.text import Text

    head = Text.assemble(("route ", "bold"), result.route)
    if result.route_reason:
        head.append(f" — {result.route_reason}")
    head.append(f"  (planner {result.planner or '-'})", style="dim")
    console.print(head)
    if result.sub_queries:
        console.print(Text("sub-queries", style="bold"))
        for number, query in enumerate(result.sub_queries, start=1):
            console.print(Text(f"  {number}. {query}"))
    if result.hops:
        console.print(hops_table(result.hops))
    console.print(Text.assemble(("queries used ", "bold"), " | ".join(result.queries)))
    for note in result.notes:
        console.print(Text(f"note: {note}", style="dim"))
    console.print(results_table(result.results, title="Evidence"))
    console.print(costs_table(result.costs))
    console.print(Text.assemble(("stop reason ", "bold"), result.stop_reason))


def answer_dict(query: str, scope: Scope, result: Any) -> dict[str, Any]:
    """``ask --json``: the agent's trace and its results."""
    trace = result.trace()
    trace.pop("result_uids", None)
    results = []
    for rank, (item, window) in enumerate(zip(result.results, shown_windows(result.results)),
                                          start=1):
        row = result_dict(rank, item, window)
        row["hop"] = item.extra.get("hop", 0)
        row["role"] = item.extra.get("role")
        results.append(row)
    return {"query": query, "scope": scope_label(scope), **trace, "results": results}
