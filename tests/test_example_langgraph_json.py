"""langgraph.json exposes a compiled retrieval graph that opens memory from settings."""

from __future__ import annotations

import importlib.util
import json
import sys
import uuid
from pathlib import Path

from langgraph.graph.state import CompiledStateGraph

from memroute import sample_data
from memroute.graph.state import record_text
from memroute.memory import Memory, Scope
from memroute.server_graph import LazyRetrievalContext, make_graph
from memroute.settings import MemrouteSettings

ROOT = Path(__file__).resolve().parents[1]


def test_langgraph_json_points_at_a_compiled_graph() -> None:
    config = json.loads((ROOT / "langgraph.json").read_text())
    assert config["dependencies"] == ["."]
    path, _, attribute = config["graphs"]["memroute"].partition(":")
    spec = importlib.util.spec_from_file_location("lg_server_graph", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    graph = getattr(module, attribute)
    assert isinstance(graph, CompiledStateGraph) and graph.name == "memroute"
    inputs = graph.get_input_jsonschema()["properties"]
    assert {"query", "scope", "k", "filters", "strategy", "budget"} <= set(inputs)
    outputs = graph.get_output_jsonschema()["properties"]
    assert {"results", "route", "queries", "costs", "stop_reason"} <= set(outputs)
    assert "pool" not in outputs and "pool" not in inputs  # working state stays inside


async def test_graph_opens_memory_from_settings(settings: MemrouteSettings, embedder) -> None:
    schema = f"lg_{uuid.uuid4().hex[:8]}"
    scoped = settings.model_copy(update={"db_schema": schema})
    scope = Scope(org_id=f"lg-{uuid.uuid4().hex[:6]}")
    seed = await Memory.open(settings=scoped, embedder=embedder)
    try:
        await seed.add(scope, sample_data.episodes())
    finally:
        await seed.close()

    context = LazyRetrievalContext(scoped)
    graph = make_graph(context)
    try:
        first = await graph.ainvoke({"query": "Who looks after Biscuit?",
                                     "scope": scope.as_dict(), "k": 3, "strategy": "direct"})
        opened = context.context
        second = await graph.ainvoke({"query": "Which airline do I prefer?",
                                      "scope": scope.as_dict(), "k": 2})
        assert context.context is opened  # opened once, shared by later runs
        assert opened.memory.schema == schema
    finally:
        await context.aclose()
    assert first["route"] == "direct" and len(first["results"]) == 3
    assert any("Jonah Reyes" in record_text(r) for r in first["results"])
    assert len(second["results"]) == 2 and second["stop_reason"]
