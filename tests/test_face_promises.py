"""Promises every face keeps: asked ``as_of`` a time, no face returns an episode produced
after it — not as a match, not in a context window, not as a reply put in a question's
place — whatever the strategy and whether context is on or off; and every face's results
come in the order of their ``score``.

The memory's sessions run past ``as_of``: the turns just after it answer the questions best
(a reply to a question asked just before, a move, a new job), so a face that leaks shows
them.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from typer.testing import CliRunner

from memroute import sample_data
from memroute.agent import RetrievalAgent
from memroute.cli import app
from memroute.memory import Memory, Scope
from memroute.retriever import MemrouteRetriever
from memroute.settings import get_settings
from memroute.tools import memory_search_tool

AS_OF = datetime(2025, 3, 10, 12, 0, tzinfo=timezone.utc)
STRATEGIES = ("direct", "split", "chain", "auto")
CONTEXTS = ((1, 2), (0, 0))


def at(day: int, hour: int, minute: int = 0) -> str:
    return datetime(2025, 3, day, hour, minute, tzinfo=timezone.utc).isoformat()


# (uid, session, producer, produced_at, content); "late" turns come after AS_OF
TURNS = [
    ("p1", "s1", "user", at(3, 9), "My sister Priya lives in Lisbon."),
    ("p2", "s1", "assistant", at(3, 9, 1), "Noted: Priya is in Lisbon."),
    ("p3", "s1", "user", at(3, 9, 2), "Priya works at Tidewave Labs as a chemist."),
    ("t1", "s3", "user", at(5, 18), "Tomas is Priya's husband; he teaches maths in Lisbon."),
    ("t2", "s3", "assistant", at(5, 18, 1), "Got it, Tomas teaches maths."),
    ("b1", "s2", "user", at(10, 11, 50), "Where did I leave the blue bike?"),
    ("late1", "s2", "assistant", at(10, 12, 5), "You left the blue bike at the Alfama garage."),
    ("late2", "s2", "user", at(10, 12, 10),
     "Priya moved to Porto and now works at Ferrobyte."),
    ("late3", "s2", "user", at(10, 12, 20),
     "My sister Priya's husband Tomas now teaches piano in Porto."),
    ("late4", "s4", "user", at(12, 9), "Priya lives in Porto now, near the river."),
    ("late5", "s4", "assistant", at(12, 9, 1), "Porto suits her; Ferrobyte is close by."),
]
LATE = {uid for uid, *_ in TURNS if uid.startswith("late")}
LATE_WORDS = re.compile(r"Alfama|Porto|Ferrobyte|piano|river")
BAD_AS_OF = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:30:00-01:00", 1741608000, True,
             "last Tuesday"]
QUESTIONS = ["Where does Priya live?", "Where does Priya live and where does she work?",
             "What does my sister's husband teach?", "Where did I leave the blue bike?"]


@pytest.fixture(scope="module")
async def tenant(memory: Memory) -> Scope:
    scope = Scope(org_id=f"asof-{uuid.uuid4().hex[:8]}", project_id="p")
    await memory.add(scope, [{"uid": uid, "session_id": session, "producer": producer,
                              "produced_at": when, "content": text}
                             for uid, session, producer, when, text in TURNS])
    return scope


def check_uids(face: str, uids: list[str]) -> None:
    assert uids, f"{face}: nothing found"
    assert not LATE & set(uids), f"{face}: returned {sorted(LATE & set(uids))}, after as_of"


def check_text(face: str, text: str) -> None:
    assert not LATE_WORDS.search(text), f"{face}: shows a turn after as_of: {text!r:.300}"


def check_order(face: str, scores: list[float]) -> None:
    assert scores == sorted(scores, reverse=True), f"{face}: the order is not the score {scores}"


def check_results(face: str, results) -> None:
    """`ScoredResult`s: matches, windows and scores."""
    check_uids(face, [e.uid for r in results for e in [r.nucleus, *r.episodes]])
    check_text(face, "\n".join(r.text for r in results))
    assert all(e.produced_at <= AS_OF for r in results for e in r.episodes), face
    check_order(face, [r.score for r in results])


@pytest.mark.parametrize("context", CONTEXTS, ids=["context", "no-context"])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_the_agent_and_its_faces_return_nothing_after_as_of(
        memory: Memory, tenant: Scope, strategy: str, context: tuple[int, int]) -> None:
    agent = RetrievalAgent(memory, planner="offline", context=context)
    for question in QUESTIONS:
        face = f"{strategy}/{context}/{question}"
        result = await agent.aretrieve(question, scope=tenant, k=5, strategy=strategy,
                                       as_of=AS_OF)
        check_results(f"aretrieve {face}", result.results)
        events = [e async for e in agent.astream(question, scope=tenant, k=5, strategy=strategy,
                                                 as_of=AS_OF.isoformat())]
        check_results(f"astream {face}", events[-1].result.results)
        retriever = MemrouteRetriever(memory=memory, scope=tenant, agent=agent, k=5,
                                      search_kwargs={"strategy": strategy, "as_of": AS_OF})
        docs = await retriever.ainvoke(question)
        check_uids(f"retriever {face}", [u for d in docs
                                         for u in [d.id, *d.metadata["context_uids"]]])
        check_text(f"retriever {face}", "\n".join(d.page_content for d in docs))
        check_order(f"retriever {face}", [d.metadata["score"] for d in docs])
        tool = memory_search_tool(memory, tenant, agent_mode=True, agent=agent,
                                  strategy=strategy, as_of=AS_OF, page_size=5, max_results=5)
        message = await tool.ainvoke({"type": "tool_call", "id": "1", "name": tool.name,
                                      "args": {"query": question}})
        check_uids(f"agent tool {face}", [u for a in message.artifact
                                          for u in [a["uid"], *a["context_uids"]]])
        check_text(f"agent tool {face}", message.content)
        check_order(f"agent tool {face}", [a["score"] for a in message.artifact])


@pytest.mark.parametrize("context", CONTEXTS, ids=["context", "no-context"])
async def test_a_plain_search_and_its_tool_return_nothing_after_as_of(
        memory: Memory, tenant: Scope, context: tuple[int, int]) -> None:
    for question in QUESTIONS:
        found = await memory.search_scored(tenant, question, k=5, context=context, as_of=AS_OF)
        check_results(f"search_scored {context} {question}", found)
        replies = await memory.replies(tenant, ["b1"], as_of=AS_OF)
        assert replies == {}, "the reply after as_of is no reply yet"
        got = await memory.get(tenant, ["p1", "late1"], as_of=AS_OF)
        assert [s.episode.uid for s in got] == ["p1"]
        recent = await memory.recent(tenant, as_of=AS_OF, limit=3)
        assert [s.episode.uid for s in recent] == ["b1", "t2", "t1"]
    tool = memory_search_tool(memory, tenant, as_of=AS_OF, page_size=3, max_results=9)
    for page in range(3):
        message = await tool.ainvoke({"type": "tool_call", "id": "1", "name": tool.name,
                                      "args": {"query": "Where does Priya live?", "page": page}})
        if not message.artifact:
            break
        check_uids(f"tool page {page}", [u for a in message.artifact
                                         for u in [a["uid"], *a["context_uids"]]])
        check_text(f"tool page {page}", message.content)


async def test_rest_and_mcp_return_nothing_after_as_of(memory: Memory, tenant: Scope, keys,
                                                       served) -> None:
    token, _ = await keys.create(tenant.org_id)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=served.url, timeout=60, headers=headers) as client:
        for question in QUESTIONS:
            body = {"scope": tenant.as_dict(), "query": question, "k": 5,
                    "as_of": AS_OF.isoformat()}
            searched = (await client.post("/v1/search", json=body)).json()
            check_rest(f"REST search {question}", searched["results"])
            for strategy in STRATEGIES:
                face = f"REST retrieve {strategy} {question}"
                got = await client.post("/v1/retrieve", json={**body, "strategy": strategy})
                assert got.status_code == 200, got.text
                check_rest(face, got.json()["results"])
                streamed = await client.post("/v1/retrieve/stream",
                                             json={**body, "strategy": strategy})
                final = [json.loads(block.split("data: ", 1)[1])
                         for block in streamed.text.strip().split("\n\n")
                         if block.startswith("event: final")]
                assert final, streamed.text
                check_rest(f"SSE {face}", final[0]["results"])
    http = create_mcp_http_client(headers=headers)
    async with Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as mcp:
        for question in QUESTIONS:
            common = {"query": question, "project_id": tenant.project_id,
                      "as_of": AS_OF.isoformat()}
            for strategy in STRATEGIES:
                got = await mcp.call_tool("memory_retrieve", {**common, "strategy": strategy,
                                                              "k": 5})
                assert not got.is_error, got.content
                check_mcp(f"MCP retrieve {strategy} {question}", got.structured_content)
            got = await mcp.call_tool("memory_search", common)
            assert not got.is_error, got.content
            check_mcp(f"MCP search {question}", got.structured_content)
        for bad in BAD_AS_OF:  # refused as every face refuses them
            for tool in ("memory_search", "memory_retrieve"):
                got = await mcp.call_tool(tool, {"query": "Priya", "as_of": bad})
                text = got.content[0].text
                assert got.is_error and text.startswith("[InvalidInputError]") \
                    and "as_of" in text, (tool, bad, text)
    async with httpx.AsyncClient(base_url=served.url, timeout=60, headers=headers) as client:
        for bad in BAD_AS_OF:
            for route in ("/v1/search", "/v1/retrieve"):
                refused = await client.post(route, json={"scope": tenant.as_dict(),
                                                         "query": "Priya", "as_of": bad})
                assert refused.status_code == 422 and "as_of" in refused.text, (route, bad)


def check_rest(face: str, hits: list[dict]) -> None:
    check_uids(face, [e["uid"] for h in hits for e in [h["nucleus"], *h["episodes"]]])
    check_text(face, json.dumps(hits))
    check_order(face, [h["score"] for h in hits])


def check_mcp(face: str, found: dict) -> None:
    check_uids(face, [u for r in found["results"] for u in [r["uid"], *r["context_uids"]]])
    check_text(face, found["text"])
    check_order(face, [r["score"] for r in found["results"]])


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, pg_url: str, pg_home: Path, memory: Memory):
    """`memroute ...` on the session memory's schema."""
    for name, value in {"MEMROUTE_DATABASE_URL": pg_url, "MEMROUTE_DB_SCHEMA": memory.schema,
                        "MEMROUTE_HOME": str(pg_home), "MEMROUTE_EMBED_THREADS": "1",
                        "MEMROUTE_POOL_MAX_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    for name in ("MEMROUTE_SCOPE", "MEMROUTE_LLM_MODEL", "MEMROUTE_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    yield lambda *args: CliRunner().invoke(app, list(args))
    get_settings.cache_clear()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_cli_returns_nothing_after_as_of(cli, tenant: Scope, strategy: str) -> None:
    where = f"{tenant.org_id}/{tenant.project_id}"
    for question in QUESTIONS:
        asked = cli("ask", question, "--scope", where, "--strategy", strategy, "-k", "5",
                    "--as-of", AS_OF.isoformat(), "--json")
        assert asked.exit_code == 0, asked.output
        check_cli(f"ask {strategy} {question}", json.loads(asked.stdout))
        table = cli("ask", question, "--scope", where, "--strategy", strategy, "-k", "5",
                    "--as-of", AS_OF.isoformat())
        check_text(f"ask table {strategy} {question}", table.stdout)
        if strategy == "direct":
            searched = cli("search", question, "--scope", where, "-k", "5", "--as-of",
                           AS_OF.isoformat(), "--json")
            assert searched.exit_code == 0, searched.output
            check_cli(f"search {question}", json.loads(searched.stdout))


@pytest.mark.parametrize("command", ["ask", "search"])
def test_the_cli_refuses_a_bad_as_of_as_input(cli, command: str) -> None:
    for bad in BAD_AS_OF:
        if not isinstance(bad, str):
            continue
        refused = cli(command, "Priya", "--as-of", bad)
        assert refused.exit_code == 2 and "as_of" in refused.output, (bad, refused.output)


def check_cli(face: str, answer: dict) -> None:
    results = answer["results"]
    check_uids(face, [u for r in results for u in [r["uid"], *r.get("context_uids", [])]])
    check_text(face, json.dumps(results))
    check_order(face, [r["score"] for r in results])


@pytest.mark.parametrize("as_of", ["2025-03-10T12:00:00+00:00", "2025-03-10T13:00:00+01:00",
                                   "2025-03-10T12:00:00", datetime(2025, 3, 10, 12)])
async def test_every_form_of_the_same_instant_bounds_alike(memory: Memory, tenant: Scope,
                                                           as_of) -> None:
    agent = RetrievalAgent(memory, planner="offline")
    found = await agent.aretrieve("Where does Priya live?", scope=tenant, k=5, as_of=as_of)
    check_results(f"as_of {as_of!r}", found.results)
    assert "p1" in {r.uid for r in found.results}


async def test_a_bare_date_is_the_end_of_that_day(memory: Memory, tenant: Scope) -> None:
    """``2025-03-10``: everything produced that day is visible (UTC), the next day's not."""
    found = await memory.search_scored(tenant, "Where does Priya live now?", k=20,
                                       as_of="2025-03-10")
    uids = {e.uid for r in found for e in r.episodes}
    assert {"late2", "b1"} <= uids and not {"late4", "late5"} & uids
    assert all(e.produced_at < AS_OF + timedelta(days=1) for r in found for e in r.episodes)


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_the_order_is_the_score(memory: Memory, strategy: str) -> None:
    """Where the final rerank places a result above better-scored ones (the chain's answer,
    a speaker's own turns, a reply), its ``score`` is raised to theirs: the score a caller
    sees is what the results are ordered by, and ``rerank_score`` keeps its own."""
    scope = Scope(org_id=f"order-{uuid.uuid4().hex[:8]}", project_id="sample")
    await memory.add(scope, sample_data.episodes())
    agent = RetrievalAgent(memory, planner="offline")
    raised = 0
    for question in sample_data.questions():
        found = await agent.aretrieve(question.question, scope=scope, k=5, strategy=strategy)
        check_order(f"{strategy} {question.question}", [r.score for r in found.results])
        assert all(r.score >= r.rerank_score for r in found.results)
        raised += sum(r.score > r.rerank_score for r in found.results)
    if strategy in ("chain", "auto"):
        assert raised, "no result was placed above a better-scored one: the test shows nothing"


async def test_the_stores_metadata_keys_are_its_own(memory: Memory) -> None:
    """No episode can pass for a store item, hide itself behind a made-up expiry or break its
    scope's reads: the store's metadata keys are refused on every other write, and a value
    already stored under one that is not a number breaks no read."""
    from memroute.errors import InvalidInputError

    scope = Scope(org_id=f"keys-{uuid.uuid4().hex[:8]}", project_id="p")
    for key in ("store_ns", "store_value", "store_expires_at"):
        with pytest.raises(InvalidInputError, match="reserved"):
            await memory.add(scope, [{"content": "A note.", "metadata": {key: 1}}])
    [uid] = await memory.add(scope, [{"content": "Priya lives in Lisbon.", "uid": "a"}])
    with pytest.raises(InvalidInputError, match="reserved"):
        await memory.merge_metadata(scope, {uid: {"store_expires_at": 1}})
    async with memory._pool.connection() as conn:  # as a store written before this version
        for table, column in (("episodes", "uid"), ("sentences", "episode_uid")):
            await conn.execute(
                f"UPDATE {memory.schema}.{table} SET metadata = "
                f"metadata || '{{\"store_expires_at\": \"soon\"}}' "
                f"WHERE scope_key = %s AND {column} = 'a'", [scope.key])
    found = await memory.search_scored(scope, "Where does Priya live?", k=3)
    assert [r.uid for r in found] == ["a"]
    assert [s.episode.uid for s in await memory.get(scope, ["a"])] == ["a"]


async def test_a_speaker_after_as_of_steers_nothing(memory: Memory, tenant: Scope) -> None:
    """A speaker whose turns all come after ``as_of`` is not known yet: no route reason, no
    query names them."""
    scope = Scope(org_id=f"spk-{uuid.uuid4().hex[:8]}", project_id="p")
    await memory.add(scope, [
        {"uid": "j0", "producer": "user", "session_id": "s1", "produced_at": at(3, 9),
         "content": "Jonah Reyes is my new lab partner."},
        {"uid": "j1", "producer": "Jonah Reyes", "session_id": "s2", "produced_at": at(12, 9),
         "content": "I researched coral bleaching all week."}])
    agent = RetrievalAgent(memory, planner="offline")
    for as_of, named in ((AS_OF, False), (None, True)):
        found = await agent.aretrieve("What did Jonah Reyes research?", scope=scope, k=3,
                                      as_of=as_of)
        said = " ".join([found.route_reason, *found.queries])
        assert ("own turns" in said) is named, (as_of, said)
