"""``memroute search`` (direct search) and ``memroute ask`` (the retrieval agent)."""

# No `from __future__ import annotations`: typer reads every command's annotations at each
# start, and evaluating them from strings took it 0.1 s (issue 48).

from typing import Annotated, Any

import typer

from memroute import cli_output as out
from memroute.cli._app import (
    DebugOpt,
    JsonOpt,
    ScopeOpt,
    app,
    open_memory,
    parse_filters,
    parse_scope,
    run,
    scope_fields,
    setup_command,
    state,
)


def _check_k(k: int) -> int:
    """``k`` within the memory's limit (imported here: starting the CLI loads no memory code)."""
    from memroute.errors import InvalidInputError
    from memroute.memory.limits import MAX_K

    if k > MAX_K:
        raise InvalidInputError(f"--k must be at most {MAX_K}, got {k}")
    return k


AS_OF = ("When the question is asked: ISO-8601 with an offset (2025-01-15T09:00+01:00), "
         "without one (UTC), or a date (2025-01-15: the end of that day, UTC). Nothing "
         "produced after it is returned. Default: now.")
AsOfOpt = Annotated[str | None, typer.Option("--as-of", help=AS_OF)]
AskAsOfOpt = Annotated[str | None, typer.Option(
    "--as-of", help=AS_OF + " The agent reads 'last week' or 'yesterday' on its calendar.")]


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.", show_default=False)],
    k: Annotated[int, typer.Option("--k", "-k", min=1, help="How many results.")] = 10,
    filters: Annotated[str | None, typer.Option(
        help='A JSON filter, e.g. \'{"producer": "user"}\'.')] = None,
    as_of: AsOfOpt = None,
    scope: ScopeOpt = "default",
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Direct search of the memory (no agent): results with scores and stage timings. The
    query is searched as written: --as-of bounds what is returned, and 'last week' in the
    query is words to match (`memroute ask` reads it as time)."""
    setup_command(json_output, debug)
    from memroute.cli import served
    from memroute.time.as_of import as_of_text

    target = scope_fields(scope)
    where = parse_filters(filters)
    when = as_of_text(as_of)
    _check_k(k)
    answer = None
    if (url := served.server_url()) is not None:  # a running `memroute serve`, if it answers
        answer = served.search(url, target, query, k, where, when)
    results, hint = answer or run(_search(parse_scope(scope), query, k, where, when))
    if json_output:
        out.emit_json({
            "query": query, "scope": out.scope_label(target), "k": k, "filters": where,
            "as_of": when,
            "reranker": results.reranker, "timings_ms": results.timings,
            "results": [out.result_dict(i, r, w) for i, (r, w)
                        in enumerate(zip(results, out.shown_windows(results)), start=1)],
            "hint": hint,
        })
        return
    console = out.stdout_console()
    if not results:
        console.print(f"no results in scope {out.scope_label(target)}")
    else:
        console.print(out.results_table(results))
    console.print(out.timings_line(results.timings, results.reranker), style="dim")
    _print_hint(hint)


def _print_hint(hint: str | None) -> None:
    """The empty scope's hint: one line on stderr."""
    if hint:
        out.stderr_console().print(
            f"hint: {hint}; name the scope with --scope org[/project[/user[/agent]]] (or "
            "MEMROUTE_SCOPE)", markup=False, highlight=False, soft_wrap=True)


async def _search(scope: Any, query: str, k: int, filters: dict | None,
                  as_of: str | None) -> tuple[Any, str | None]:
    from memroute.hints import empty_scope_hint

    memory = await open_memory()
    try:
        results = await memory.search_scored(scope, query, k=k, filters=filters, as_of=as_of)
        return results, None if results else await empty_scope_hint(memory, scope)
    finally:
        await memory.close()


# -- ask -----------------------------------------------------------------------------------

@app.command()
def ask(
    query: Annotated[str, typer.Argument(help="The question.", show_default=False)],
    strategy: Annotated[str, typer.Option(help="auto | direct | split | chain")] = "auto",
    k: Annotated[int, typer.Option("--k", "-k", min=1, help="How many results.")] = 10,
    filters: Annotated[str | None, typer.Option(
        help='A JSON filter, e.g. \'{"producer": "user"}\'.')] = None,
    planner: Annotated[str | None, typer.Option(
        help="auto (an LLM when MEMROUTE_LLM_MODEL is set) | offline (never a model) | llm; "
             "default MEMROUTE_PLANNER, else auto")] = None,
    max_llm_calls: Annotated[int | None, typer.Option(min=0, help="Budget: LLM calls.")] = None,
    max_tokens: Annotated[int | None, typer.Option(
        min=0, help="Budget: input tokens (output is capped at the same number).")] = None,
    explain: Annotated[bool, typer.Option(
        "--explain", help="Show the route, sub-queries or hops, evidence and costs.")] = False,
    as_of: AskAsOfOpt = None,
    scope: ScopeOpt = "default",
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Retrieve with the agent: it routes the question (direct, split or chain) and searches."""
    setup_command(json_output, debug)
    from memroute.cli import served
    from memroute.errors import InvalidInputError
    from memroute.strategies.names import STRATEGIES

    if strategy not in STRATEGIES:
        raise InvalidInputError(f"unknown --strategy {strategy!r}: use {', '.join(STRATEGIES)}")
    url = served.server_url()
    if url is not None and planner is not None:
        raise InvalidInputError(
            f"--planner is not sent to memroute serve ({served.SERVER_URL_ENV} is set): the "
            f"server plans with its own MEMROUTE_PLANNER; unset {served.SERVER_URL_ENV} to "
            "choose the planner here")
    if planner is not None:
        from memroute.planners import PLANNER_CHOICES

        if planner not in PLANNER_CHOICES:
            raise InvalidInputError(
                f"unknown --planner {planner!r}: use {', '.join(PLANNER_CHOICES)}")
    _check_k(k)
    target = scope_fields(scope)
    budget = None
    if max_llm_calls is not None or max_tokens is not None:
        budget = {"max_llm_calls": max_llm_calls, "max_input_tokens": max_tokens,
                  "max_output_tokens": max_tokens}
    from memroute.time.as_of import as_of_text

    options = {"scope": target, "k": k, "filters": parse_filters(filters),
               "strategy": strategy, "budget": budget, "as_of": as_of_text(as_of)}
    answer = None
    if url is not None:  # a running `memroute serve`, if it answers
        answer = served.ask(url, query, options, _show_event)
    if answer is None:
        from memroute.nlp import reusing_query_pipeline

        options["scope"] = parse_scope(scope)
        with reusing_query_pipeline():  # the planner's parse gives the searches entity keys
            answer = run(_ask(query, planner, options))
    result, hint = answer
    if json_output:
        out.emit_json({**out.answer_dict(query, target, result), "hint": hint})
        return
    console = out.stdout_console()
    if explain:
        out.print_explanation(console, result)
    else:
        console.print(out.results_table(result.results))
        totals = result.costs.totals
        console.print(f"route {result.route} · {len(result.queries)} quer"
                      f"{'y' if len(result.queries) == 1 else 'ies'} · {totals['llm_calls']} "
                      f"LLM call(s) · {totals['wall_ms']:.0f} ms · stop {result.stop_reason}",
                      style="dim", markup=False)
    _print_hint(hint)


def make_agent(memory: Any, planner: str | None) -> Any:
    """The retrieval agent with the planner asked for on the command line (None: the
    settings' ``MEMROUTE_PLANNER``)."""
    from memroute.agent import RetrievalAgent

    return RetrievalAgent(memory=memory, planner=planner)


def _show_event(event: Any) -> None:
    """One agent step as a line on stderr (not with --json)."""
    if not state.json and (line := out.event_line(event)):
        out.stderr_console().print(f"· {line}", style="dim", markup=False, highlight=False)


async def _ask(query: str, planner: str | None,
               options: dict[str, Any]) -> tuple[Any, str | None]:
    from memroute.hints import empty_scope_hint

    memory = await open_memory()
    try:
        agent = make_agent(memory, planner)
        result = None
        async for event in agent.astream(query, **options):
            if getattr(event, "event", "") == "final":
                result = event.result
            else:
                _show_event(event)
        hint = None if result.results else await empty_scope_hint(memory, options["scope"])
        return result, hint
    finally:
        await memory.close()
