"""``make demo``: the bundled sample in the default embedded store, searched directly.

Opens the default `Memory` (``MEMROUTE_HOME``), stores the sample into the ``demo/sample``
scope (idempotent: fixed uids), and shows search results with scores and stage timings.
"""

from __future__ import annotations

import asyncio
import time

from rich.console import Console

from memroute import cli_output as out
from memroute import sample_data
from memroute.memory import Memory, Scope

DEMO_SCOPE = Scope(org_id="demo", project_id="sample", user_id="maya")


async def ingest_sample(memory: Memory, scope: Scope = DEMO_SCOPE) -> int:
    """Store the sample in ``scope`` (a no-op when it is there already); returns its size."""
    episodes = sample_data.episodes()
    await memory.add(scope, episodes)
    return len(episodes)


async def show_searches(memory: Memory, console: Console, scope: Scope = DEMO_SCOPE) -> None:
    for question in sample_data.questions():
        results = await memory.search_scored(scope, question.question, k=3)
        found = {r.uid for r in results} | {e.uid for r in results for e in r.episodes}
        hit = sum(uid in found for uid in question.evidence)
        console.rule(f"[bold]{question.question}[/bold]  [dim]({question.kind})[/dim]")
        console.print(out.results_table(results))
        console.print(f"evidence found {hit}/{len(question.evidence)} · "
                      + out.timings_line(results.timings, results.reranker), style="dim")


async def main() -> None:
    from memroute.cli import configure_logging

    configure_logging(debug=False)
    console = Console(highlight=False)
    start = time.perf_counter()
    memory = await Memory.open()
    try:
        stored = await ingest_sample(memory)
        counts = await memory.count(DEMO_SCOPE)
        console.print(f"sample: {stored} turns in scope {out.scope_label(DEMO_SCOPE)} "
                      f"({counts['episodes']} stored) · ready in {time.perf_counter() - start:.1f}s")
        await show_searches(memory, console)
    finally:
        await memory.close()


if __name__ == "__main__":
    asyncio.run(main())
