"""A host LangGraph agent that uses memroute's retrieval graph as a subgraph.

The host has its own ``messages`` state. memroute's graph is added as one node: the host
shares only memroute's input keys (query, scope, k, strategy) and the output keys it reads
(results, route, stop_reason), so memroute's working state never collides with the host's.
memroute's dependencies travel in the host's runtime context, under the name ``memroute``.

    python examples/host_agent.py "Where do Priya and Jonah Reyes live?"

(stores the bundled sample in the default embedded memory first; ``MEMROUTE_HOME`` applies).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from memroute.graph import ResultRecord, RetrievalContext, build_retrieval_graph, from_record


class HostState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    # memroute's input ...
    query: str
    scope: dict[str, Any]
    k: int
    strategy: str
    # ... and the parts of its output this host reads.
    results: list[ResultRecord]  # plain data: the host's state checkpoints too
    route: str
    stop_reason: str


@dataclass
class HostContext:
    memroute: RetrievalContext  # memroute's nodes look for their dependencies here
    scope: dict[str, Any]
    llm: BaseChatModel | None = None  # answers from the evidence; None: list the evidence
    k: int = 5


async def prepare(state: HostState, runtime: Runtime[HostContext]) -> dict[str, Any]:
    """Turn the user's last message into a memroute request."""
    question = next(m for m in reversed(state["messages"]) if isinstance(m, HumanMessage))
    return {"query": question.text, "scope": runtime.context.scope, "k": runtime.context.k,
            "strategy": "auto"}


def evidence_text(results: list[ResultRecord]) -> str:
    """One numbered line per result: the matched turn with its neighbouring turns, each turn
    once (a neighbour another result shows is in its ``shown_elsewhere``)."""
    return "\n".join(f"{i}. " + " / ".join(f"{e.producer}: {e.content}"
                                           for e in from_record(r).episodes
                                           if e.uid not in r.get("shown_elsewhere", ()))
                     for i, r in enumerate(results, start=1))


async def respond(state: HostState, runtime: Runtime[HostContext]) -> dict[str, Any]:
    """Answer from the evidence memroute found (or show it, without a model)."""
    evidence = evidence_text(state.get("results") or [])
    if runtime.context.llm is None:
        return {"messages": [AIMessage(f"From memory (route {state.get('route')}):\n{evidence}")]}
    reply = await runtime.context.llm.ainvoke([
        SystemMessage("Answer the question using only the numbered evidence."),
        HumanMessage(f"Question: {state['query']}\n\nEvidence:\n{evidence}"),
    ])
    return {"messages": [reply]}


def build_host_graph():
    """prepare -> memroute (the retrieval graph as a subgraph) -> respond."""
    builder = StateGraph(HostState, context_schema=HostContext)
    builder.add_node("prepare", prepare)
    builder.add_node("memroute", build_retrieval_graph().compile(name="memroute"))
    builder.add_node("respond", respond)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "memroute")
    builder.add_edge("memroute", "respond")
    builder.add_edge("respond", END)
    return builder.compile(name="host")


async def stream_steps(graph: Any, question: str, context: HostContext
                       ) -> AsyncIterator[tuple[tuple[str, ...], str, Any]]:
    """The host's and memroute's steps as ``(namespace, mode, chunk)``, in order."""
    async for namespace, mode, chunk in graph.astream(
            {"messages": [HumanMessage(question)]}, context=context,
            stream_mode=["updates", "custom"], subgraphs=True):
        yield namespace, mode, chunk


async def main(question: str) -> None:
    from memroute.agent import RetrievalAgent
    from memroute.cli import configure_logging
    from memroute.demo import DEMO_SCOPE, ingest_sample
    from memroute.memory import Memory

    configure_logging(debug=False)  # warnings only (structlog prints everything by default)

    memory = await Memory.open()
    try:
        await ingest_sample(memory)
        context = HostContext(memroute=RetrievalAgent(memory=memory).context(),
                              scope=DEMO_SCOPE.as_dict())
        graph = build_host_graph()
        async for namespace, mode, chunk in stream_steps(graph, question, context):
            where = "/".join(part.split(":")[0] for part in namespace) or "host"
            if mode == "custom":
                print(f"  [{where}] event {chunk}")
            else:
                for node, update in chunk.items():
                    print(f"[{where}] {node}: {', '.join(sorted(update or {}))}")
                    if node == "respond":
                        print(update["messages"][-1].content)
    finally:
        await memory.close()


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "Where do Priya and Jonah Reyes live?"))
