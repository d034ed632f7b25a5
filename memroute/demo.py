"""``make demo``: the bundled sample in the default embedded store, searched and asked.

Opens the default `Memory` (``MEMROUTE_HOME``), stores the sample into the
``demo/sample/maya`` scope (idempotent: fixed uids), shows direct search results with scores
and stage timings, then runs the retrieval agent (offline planner, no LLM) on questions of
each kind (direct, split, chain) with ``memroute ask --explain``'s output, and what auto spent
(searches, time, evidence found) against one direct search per question.
"""

from __future__ import annotations

import asyncio
import time

from rich.console import Console
from rich.table import Table
from rich.text import Text

from memroute import cli_output as out
from memroute import sample_data
from memroute.memory import Memory, Scope

DEMO_SCOPE = Scope(org_id="demo", project_id="sample", user_id="maya")


async def ingest_sample(memory: Memory, scope: Scope = DEMO_SCOPE) -> int:
    """Store the sample in ``scope`` (a no-op when it is there already); returns its size."""
    episodes = sample_data.episodes()
    await memory.add(scope, episodes)
    return len(episodes)


def evidence_found(results: list, evidence: tuple[str, ...]) -> int:
    """How many of the answer's turns the results hold (as matches or as context)."""
    found = {e.uid for r in results for e in r.episodes}
    return sum(uid in found for uid in evidence)


async def show_searches(memory: Memory, console: Console, scope: Scope = DEMO_SCOPE) -> None:
    """Direct search (no agent) on the first question of each kind."""
    firsts: dict[str, sample_data.SampleQuestion] = {}
    for question in sample_data.questions():
        firsts.setdefault(question.kind, question)
    for question in firsts.values():
        results = await memory.search_scored(scope, question.question, k=3)
        console.rule(f"direct search · a {question.kind} question", style="cyan")
        console.print(Text.assemble(("$ memroute search ", "dim"), (question.question, "bold")))
        console.print(out.results_table(results))
        console.print(f"evidence found {evidence_found(results, question.evidence)}/"
                      f"{len(question.evidence)} · "
                      + out.timings_line(results.timings, results.reranker), style="dim")


async def show_agent(memory: Memory, console: Console, scope: Scope = DEMO_SCOPE,
                     k: int = 5) -> dict[str, str]:
    """The agent on every sample question, explained, then what it spent against one direct
    search per question; returns the route taken per question."""
    from memroute.agent import RetrievalAgent
    from memroute.planners.offline.planner import OfflinePlanner

    agent = RetrievalAgent(memory=memory, planner=OfflinePlanner())
    routes = {}
    spend = Table(title="what auto spent against one direct search (found: the answer's turns)",
                  title_justify="left")
    spend.add_column("question", ratio=1)
    spend.add_column("route", no_wrap=True)
    for name in ("searches", "ms", "direct ms", "found", "direct found"):
        spend.add_column(name, justify="right", no_wrap=True)
    for question in sample_data.questions():
        console.rule(f"the agent · a {question.kind} question", style="magenta")
        console.print(Text.assemble(("$ memroute ask --explain ", "dim"),
                                    (question.question, "bold")))
        result = None
        async for event in agent.astream(question.question, scope=scope, k=k):
            if event.event == "final":
                result = event.result
            elif line := out.event_line(event):
                console.print(f"· {line}", style="dim", markup=False)
        out.print_explanation(console, result)
        console.print(f"evidence found {evidence_found(result.results, question.evidence)}/"
                      f"{len(question.evidence)}", style="dim")
        routes[question.question] = result.route
        started = time.perf_counter()
        auto = await agent.aretrieve(question.question, scope=scope, k=k)
        auto_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        direct = await agent.aretrieve(question.question, scope=scope, k=k, strategy="direct")
        direct_ms = (time.perf_counter() - started) * 1000
        total = len(question.evidence)
        spend.add_row(question.question, auto.route, str(len(auto.queries)), f"{auto_ms:.0f}",
                      f"{direct_ms:.0f}", f"{evidence_found(auto.results, question.evidence)}"
                      f"/{total}", f"{evidence_found(direct.results, question.evidence)}/{total}")
    console.rule("spend", style="magenta")
    console.print(spend)
    return routes


async def main() -> None:
    from memroute.cli import configure_logging

    configure_logging(debug=False)
    console = Console(highlight=False)
    start = time.perf_counter()
    memory = await Memory.open()
    try:
        stored = await ingest_sample(memory)
        counts = await memory.count(DEMO_SCOPE)
        ready = time.perf_counter() - start
        console.print(f"sample: {stored} turns in scope {out.scope_label(DEMO_SCOPE)} "
                      f"({counts['episodes']} stored) · ready in {ready:.1f}s")
        await show_searches(memory, console)
        routes = await show_agent(memory, console)
        kinds = {q.question: q.kind for q in sample_data.questions()}
        matched = sum(routes[q] == kinds[q] for q in routes)
        console.rule()
        console.print(f"the offline planner routed {matched}/{len(routes)} questions as "
                      f"labelled · total {time.perf_counter() - start:.1f}s")
    finally:
        await memory.close()


if __name__ == "__main__":
    asyncio.run(main())
