"""A request whose budget sets no deadline gets the agent's default one, so a model that
hangs cannot make one retrieval take a timeout per attempt."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, hang

from memroute import RetrievalAgent
from memroute.agent import DEFAULT_MAX_LATENCY_S
from memroute.errors import InvalidInputError
from memroute.graph import GraphPolicies
from memroute.memory import Memory, Scope

# a model call times out after 1 s and is tried 3 times: 3 s of waiting without a deadline
POLICIES = GraphPolicies(llm_timeout_s=1.0, llm_max_attempts=3, retry_initial_interval_s=0.01,
                         retry_max_interval_s=0.02)
QUESTION = "Where was the director of Harbor Lights born?"


@pytest.fixture
def slow_llm() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    fake.script = [hang(5.0) for _ in range(3)]
    yield fake
    fake.close()


@pytest.fixture
async def stored(memory: Memory) -> Scope:
    scope = Scope(org_id=f"org-{uuid.uuid4().hex[:8]}", project_id="deadline")
    await memory.add(scope, [{"content": "Harbor Lights was directed by Ana Ruiz."},
                             {"content": "Ana Ruiz was born in Valparaíso."}])
    return scope


async def timed(agent: RetrievalAgent, scope: Scope, **options) -> tuple[float, object]:
    started = time.perf_counter()
    result = await agent.aretrieve(QUESTION, scope=scope, k=2, **options)
    return time.perf_counter() - started, result


async def test_the_default_deadline_bounds_a_hanging_model(memory, stored, slow_llm) -> None:
    assert RetrievalAgent(memory, planner="offline").max_latency_s == DEFAULT_MAX_LATENCY_S == 30
    agent = RetrievalAgent(memory, llm=slow_llm.client(), model="m", policies=POLICIES,
                           max_latency_s=1.5)
    took, result = await timed(agent, stored)
    assert result.results and "latency" in result.stop_reason, result.stop_reason
    assert took < 2.9  # the deadline, not three 1 s timeouts
    assert len(slow_llm.requests) <= 2

    slow_llm.script = [hang(5.0) for _ in range(3)]
    unbounded = RetrievalAgent(memory, llm=slow_llm.client(), model="m", policies=POLICIES,
                               max_latency_s=None)
    took_without, result = await timed(unbounded, stored)
    assert took_without >= 3.0 and result.stop_reason.startswith("router_failed: timeout")


async def test_a_request_budget_overrides_the_default(memory, stored, slow_llm) -> None:
    agent = RetrievalAgent(memory, llm=slow_llm.client(), model="m", policies=POLICIES,
                           max_latency_s=60)
    took, result = await timed(agent, stored, budget={"max_latency_s": 0.5})
    assert took < 2.0 and "latency" in result.stop_reason
    with pytest.raises(InvalidInputError):
        RetrievalAgent(memory, planner="offline", max_latency_s=-1)
