"""Model output is untrusted input, and a bad query is refused before any model is paid:
checked against the scripted OpenAI-compatible server on 127.0.0.1, through the library and
through a real `memroute serve` whose planner is that server."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from fake_chat import FAST, corpus_episodes, judge, route
from fake_openai import FakeOpenAI, error, reply

from benchmarks.served import ServedProcess, service_env
from memroute import RetrievalAgent, Scope
from memroute.errors import InvalidInputError
from memroute.memory import Memory
from memroute.memory.limits import MAX_QUERY_CHARS
from memroute.planners.llm.backends import OpenAIChat
from memroute.planners.llm.replies import RouteReply
from memroute.planners.llm.structured import StructuredLLM
from memroute.service.keys import KeyStore
from memroute.strategies.budget import CallLimits

QUESTION = "Where was the director of Harbor Lights born?"
BAD_QUERIES = {"NUL": "Where was Mara born?\x00", "lone surrogate": "Where was \ud800 born?",
               "too long": "x " * (MAX_QUERY_CHARS // 2 + 2)}



@pytest.fixture(scope="module")
async def corpus(memory: Memory) -> Scope:
    scope = Scope(org_id=f"org-{uuid.uuid4().hex[:8]}", project_id="model-output")
    await memory.add(scope, corpus_episodes())
    return scope


def agent_on(fake_openai: FakeOpenAI, memory: Memory) -> RetrievalAgent:
    return RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=FAST)


# -- bad model output degrades --------------------------------------------------------------

@pytest.mark.parametrize("rewrite, searched", [
    ("Mara Quinlan birthplace\u0000", "Mara Quinlan birthplace"),
    ("Mara \ud83d Quinlan birthplace", "Mara Quinlan birthplace"),
    ("Mara Quinlan birthplace " + "very " * 3000, None),
], ids=["NUL", "lone surrogate", "12,000 characters"])
async def test_a_judge_rewrite_the_store_cannot_take_is_cleaned(fake_openai, memory, corpus,
                                                                rewrite, searched) -> None:
    fake_openai.script = [reply(route("chain")), reply(judge(False, rewrite, 0.3, [0])),
                     reply(judge(True, "", 0.9, [0]))]
    result = await agent_on(fake_openai, memory).aretrieve(QUESTION, scope=corpus, k=5)
    assert result.route == "chain" and result.results and len(fake_openai.requests) == 3
    second_hop = result.queries[1]
    assert "\x00" not in second_hop and second_hop.isprintable()
    assert second_hop == searched if searched else len(second_hop) <= 500
    assert "Tallinn" in " ".join(r.nucleus.content for r in result.results)


async def test_split_sub_queries_the_store_cannot_take_are_cleaned(fake_openai, memory,
                                                                   corpus) -> None:
    fake_openai.script = [reply(route("split")), reply(json.dumps({"sub_queries": [
        "When was Oakridge College founded?\ud800", "When was Pinecrest\x00 University founded?",
        "\ud800\x00"]}))]
    result = await agent_on(fake_openai, memory).aretrieve(
        "Which was founded first, Oakridge College or Pinecrest University?", scope=corpus, k=4)
    assert result.route == "split" and result.sub_queries == [
        "When was Oakridge College founded?", "When was Pinecrest University founded?"]
    assert {"doc-05", "doc-07"} <= {r.uid for r in result.results}


# -- a bad query costs no model call --------------------------------------------------------

@pytest.mark.parametrize("strategy", ["auto", "split", "chain"])
async def test_a_bad_query_is_refused_before_any_model_request(fake_openai, memory, corpus,
                                                               strategy) -> None:
    fake_openai.script = [reply(route("chain"))] * 3
    agent = agent_on(fake_openai, memory)
    for what, query in BAD_QUERIES.items():
        with pytest.raises(InvalidInputError, match="query"):
            await agent.aretrieve(query, scope=corpus, k=5, strategy=strategy)
        assert fake_openai.requests == [], (what, strategy)


# -- structured output is downgraded only when the format is refused ------------------------

async def ask(backend: OpenAIChat):
    messages = [{"role": "system", "content": "Route it."}, {"role": "user", "content": "Q?"}]
    return await StructuredLLM(backend).call(messages, RouteReply, limits=CallLimits(),
                                             max_tokens=64)


def formats_sent(fake_openai: FakeOpenAI) -> list[str]:
    return [r.get("response_format", {}).get("type", "none") for r in fake_openai.requests]


async def test_an_unrelated_400_keeps_the_structured_output_format(fake_openai, memory,
                                                                   corpus) -> None:
    too_long = ("This model's maximum context length is 8192 tokens. However, your messages "
                "resulted in 9000 tokens. Please reduce the length of the messages.")
    fake_openai.script = [error(400, too_long), reply(route("split")), reply(route("direct"))]
    backend = OpenAIChat(fake_openai.client(), "m")
    with pytest.raises(openai.BadRequestError):
        await ask(backend)
    assert (await ask(backend)).value.route == "split"
    assert (await ask(backend)).value.route == "direct"
    assert formats_sent(fake_openai) == ["json_schema"] * 3
    # through the agent: the 400 fails that request's router, the next one asks the same way
    fake_openai.script = [error(400, too_long), reply(route("direct"))]  # a 400 is not retried
    agent = agent_on(fake_openai, memory)
    failed = await agent.aretrieve(QUESTION, scope=corpus, k=3)
    assert failed.route == "direct" and failed.stop_reason.startswith("router_failed")
    assert (await agent.aretrieve(QUESTION, scope=corpus, k=3)).route_reason == "scripted"
    assert formats_sent(fake_openai) == ["json_schema"] * 5
    # a refusal that names the format still moves a new model on, and only that model
    fake_openai.script = [error(400, "response_format 'json_schema' is not supported with this "
                                "model")] + [reply(route("split"))] * 3
    fresh = OpenAIChat(fake_openai.client(), "m2")
    assert (await ask(fresh)).value.route == "split"
    assert (await ask(fresh)).value.route == "split"
    assert (await ask(OpenAIChat(fake_openai.client(), "other"))).value.route == "split"
    assert formats_sent(fake_openai)[5:] == ["json_schema", "json_object", "json_object",
                                        "json_schema"]


# -- the same through `memroute serve` ------------------------------------------------------

@pytest.fixture(scope="module")
def llm_server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def served_llm(memory: Memory, pg_url: str, pg_home: Path, llm_server: FakeOpenAI,
               tmp_path_factory) -> Iterator[ServedProcess]:
    env = service_env(pg_url, memory.schema, pg_home, MEMROUTE_LLM_BASE_URL=llm_server.url,
                      MEMROUTE_LLM_MODEL="scripted", MEMROUTE_LLM_API_KEY="k",
                      MEMROUTE_PLANNER="llm")
    served = ServedProcess(env, tmp_path_factory.mktemp("llm") / "serve.log").start()
    yield served
    served.stop()


async def test_served_retrieve_degrades_on_bad_model_output_and_refuses_bad_queries(
        served_llm: ServedProcess, llm_server: FakeOpenAI, memory: Memory,
        corpus: Scope) -> None:
    keys = await KeyStore.open(memory.url, memory.schema)
    token, _ = await keys.create(corpus.org_id)
    await keys.close()
    async with httpx.AsyncClient(base_url=served_llm.url, timeout=60, headers={
            "Authorization": f"Bearer {token}"}) as client:
        body = {"scope": corpus.as_dict(), "query": QUESTION, "k": 5}
        llm_server.script = [reply(route("chain")),
                             reply(judge(False, "Nadia employer\u0000", 0.3, [0])),
                             reply(judge(True, "", 0.9, [0]))]
        answered = await client.post("/v1/retrieve/stream", json=body)
        events = [block.split("\n")[0] for block in answered.text.strip().split("\n\n")]
        assert answered.status_code == 200 and events[-1] == "event: final", answered.text
        final = json.loads(answered.text.strip().split("\n\n")[-1].split("data: ", 1)[1])
        assert final["queries"][1] == "Nadia employer" and final["results"]
        sent = len(llm_server.requests)
        assert sent == 3
        for what, query in BAD_QUERIES.items():
            if what == "too long":
                continue  # the request model refuses it before the agent
            refused = await client.post(
                "/v1/retrieve", content=json.dumps({**body, "query": query}),
                headers={"Content-Type": "application/json"})
            assert refused.status_code == 422, (what, refused.text)
            assert refused.json()["kind"] == "InvalidInputError"
        assert len(llm_server.requests) == sent  # not one router request for them
