"""Arbitrary JSON and text fed to every public entry point (Memory, the
agent, the retriever, the agent tool, the CLI) either works or raises one of memroute's typed
errors; nothing else escapes (5,000-digit integers, which hypothesis cannot print, are in
tests/test_input_validation.py). Bounded examples, so the module runs in about half a minute."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
from typer.testing import CliRunner

from memroute import RetrievalAgent
from memroute.memory.sync import memory_and_loop
from memroute.errors import MemrouteError
from memroute.memory import SyncMemory
from memroute.retriever import MemrouteRetriever
from memroute.tools import MemorySearch

# Any code point, lone surrogates and NUL included, plus the values that broke things before.
_chars = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
text = st.one_of(st.text(_chars, max_size=40),
                 st.sampled_from(["\x00", "a\ud800b", "\udfff", " ", "", "user", "pg_catalog"]))
numbers = st.one_of(st.integers(min_value=-(10**40), max_value=10**40),
                    st.sampled_from([10**300, -(10**300), 2**63, 0, 1, -1, 1001]),
                    st.floats(allow_nan=True, allow_infinity=True))
scalars = st.one_of(st.none(), st.booleans(), numbers, text)
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)), max_leaves=8)
filters = st.one_of(st.none(), json_values,
                    st.dictionaries(st.sampled_from(["producer", "session_id", "produced_at",
                                                     "topic", "$or", "$and", "a.b"]),
                                    st.one_of(json_values, st.dictionaries(
                                        st.sampled_from(["$eq", "$in", "$gte", "$exists",
                                                         "$ne", "$lt"]), json_values,
                                        max_size=2)), max_size=2))
ks = st.one_of(st.integers(min_value=-2, max_value=1002), json_values)

FUZZ = hsettings(max_examples=25, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])


def scopes(valid: dict[str, Any]):
    return st.one_of(st.just(valid), json_values,
                     st.fixed_dictionaries({"org_id": text}, optional={"project_id": text,
                                                                       "userid": text}))


def only_typed_errors(call) -> Any:
    try:
        return call()
    except MemrouteError:
        return None


@pytest.fixture(scope="module")
def valid_scope(sync_memory: SyncMemory) -> dict[str, Any]:
    scope = {"org_id": f"fuzz-{uuid.uuid4().hex[:6]}", "project_id": "p"}
    sync_memory.add(scope, [{"content": "The lighthouse keeper fed the cat at dawn."}])
    return scope


@FUZZ
@given(data=st.data())
def test_memory_entry_points_raise_only_typed_errors(sync_memory: SyncMemory, data) -> None:
    scope = data.draw(scopes({"org_id": "fuzz-writes", "project_id": "p"}))  # deletes too
    memory, loop = memory_and_loop(sync_memory)
    episodes = data.draw(st.one_of(json_values, st.lists(st.one_of(
        json_values, st.fixed_dictionaries({"content": text}, optional={
            "session_id": text, "producer": text, "uid": text, "metadata": json_values,
            "produced_at": st.one_of(text, st.sampled_from(["0001-01-01T00:00:00+01:00",
                                                            "9999-12-31T23:00:00-14:00"]))})),
        max_size=3)))

    query, k, where = data.draw(text), data.draw(ks), data.draw(filters)
    session_id = data.draw(st.one_of(st.none(), json_values))
    uids = data.draw(st.one_of(st.none(), st.lists(text, max_size=3), json_values))

    async def calls() -> None:
        for call in (lambda: memory.add(scope, episodes),
                     lambda: memory.search_scored(scope, query, k=k, filters=where),
                     lambda: memory.count(scope),
                     lambda: memory.delete(scope, session_id=session_id, uids=uids)):
            try:
                await call()
            except MemrouteError:
                pass

    loop.run_as_sync(calls())


@FUZZ
@given(data=st.data())
def test_agent_retriever_and_tool_raise_only_typed_errors(sync_memory: SyncMemory, valid_scope,
                                                          data) -> None:
    agent = RetrievalAgent(sync_memory, planner="offline")
    query, scope = data.draw(text), data.draw(scopes(valid_scope))
    k, where = data.draw(ks), data.draw(filters)
    strategy = data.draw(st.one_of(st.sampled_from(["auto", "direct", "split", "chain"]), text))
    budget = data.draw(st.one_of(st.none(), json_values))

    async def calls() -> None:
        try:
            await agent.aretrieve(query, scope=scope, k=k, filters=where, strategy=strategy,
                                  budget=budget)
        except MemrouteError:
            pass
        retriever = MemrouteRetriever(memory=sync_memory, scope=valid_scope, agent=agent)
        try:
            await retriever.ainvoke(query, k=k, filters=where, scope=scope)
        except MemrouteError:
            pass
        tool = MemorySearch(sync_memory, valid_scope, filters=None).as_tool()
        page = data.draw(st.integers(min_value=0, max_value=3))
        reply = await tool.ainvoke({"query": query, "page": page})
        assert isinstance(reply, str)

    asyncio.run(calls())


@hsettings(max_examples=8, deadline=None, derandomize=True,
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(query=text, scope=text, k=st.integers(min_value=-1, max_value=1001),
       where=st.one_of(st.none(), json_values.map(json.dumps), text))
def test_cli_search_exits_with_typed_codes_only(monkeypatch: pytest.MonkeyPatch, pg_url: str,
                                                pg_home, query, scope, k, where) -> None:
    from memroute.cli import app
    from memroute.settings import get_settings

    for name, value in {"MEMROUTE_DATABASE_URL": pg_url, "MEMROUTE_DB_SCHEMA": "cli_fuzz",
                        "MEMROUTE_HOME": str(pg_home), "MEMROUTE_EMBED_THREADS": "1",
                        "MEMROUTE_POOL_MAX_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    args = ["search", query, "--scope", scope, "-k", str(k)]
    if where is not None:
        args += ["--filters", where]
    result = CliRunner().invoke(app, args)
    get_settings.cache_clear()
    assert result.exit_code != 1, (args, result.output, result.exception)
