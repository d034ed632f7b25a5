"""The repository's langgraph.json, served by the real `langgraph dev` in-memory server and
driven through the `langgraph-sdk` client: threads, runs, custom stream events, output."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from memroute import sample_data
from memroute.memory import Memory, Scope
from memroute.settings import MemrouteSettings

ROOT = Path(__file__).resolve().parents[1]
LANGGRAPH = Path(sys.executable).with_name("langgraph")

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
async def served(settings: MemrouteSettings, embedder, tmp_path_factory):
    """A running `langgraph dev` on 127.0.0.1 whose memory is a fresh schema of the test
    server holding the sample conversation; yields (url, scope)."""
    assert LANGGRAPH.exists(), "langgraph-cli[inmem] is part of the dev extra"
    schema = f"srv_{uuid.uuid4().hex[:8]}"
    scope = Scope(org_id=f"srv-{uuid.uuid4().hex[:6]}", project_id="sample")
    seed = await Memory.open(settings=settings.model_copy(update={"db_schema": schema}),
                             embedder=embedder)
    try:
        await seed.add(scope, sample_data.episodes())
    finally:
        await seed.close()
    port = _free_port()
    workdir = tmp_path_factory.mktemp("served")
    shutil.copy(ROOT / "langgraph.json", workdir / "langgraph.json")
    env = {**os.environ, "MEMROUTE_DATABASE_URL": settings.database_url,
           "MEMROUTE_DB_SCHEMA": schema, "MEMROUTE_HOME": str(workdir / "home"),
           "MEMROUTE_EMBED_THREADS": "1", "LANGSMITH_TRACING": "false",
           "LANGCHAIN_TRACING_V2": "false", "PYTHONPATH": str(ROOT)}
    env.pop("MEMROUTE_LLM_MODEL", None)
    log = (workdir / "server.log").open("w")
    # The graph's path in langgraph.json is relative to the config file: serve the
    # repository's own file from a scratch directory (its .langgraph_api/ stays there).
    (workdir / "memroute").symlink_to(ROOT / "memroute")
    process = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--allow-blocking",
         "--host", "127.0.0.1", "--port", str(port), "--config", "langgraph.json"],
        cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        async with httpx.AsyncClient() as http:
            while True:
                assert process.poll() is None, (workdir / "server.log").read_text()[-3000:]
                try:
                    if (await http.get(f"{url}/ok")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, (workdir / "server.log").read_text()[-3000:]
                time.sleep(0.5)
        yield url, scope
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


async def test_served_graph_runs_streams_and_returns_plain_output(served) -> None:
    url, scope = served
    client = get_client(url=url)
    assistants = await client.assistants.search(graph_id="memroute")
    assert assistants, "langgraph.json's graph is registered"
    schemas = await client.assistants.get_schemas(assistants[0]["assistant_id"])
    served_input = schemas["input_schema"]["properties"]
    assert {"query", "scope", "k", "filters", "strategy", "budget", "as_of"} <= set(served_input)
    assert "as_of" in served_input and "description" in served_input["as_of"], served_input
    thread = await client.threads.create()

    run_input = {"query": "Who looks after Biscuit?", "scope": scope.as_dict(), "k": 3,
                 "strategy": "direct"}
    events, values = [], {}
    async for part in client.runs.stream(thread["thread_id"], "memroute", input=run_input,
                                         stream_mode=["custom", "values"]):
        if part.event == "custom":
            events.append(part.data)
        elif part.event == "values":
            values = part.data
        assert part.event != "error", part.data
    assert [e["event"] for e in events] == ["route", "search", "final"]
    assert events[0]["route"] == "direct" and events[0]["source"] == "override"
    assert values["route"] == "direct" and values["stop_reason"] == "done"
    assert len(values["results"]) == 3
    assert any("Jonah Reyes" in e["content"] for r in values["results"]
               for e in r["episodes"])
    assert all("sentence_embeddings" not in r and r["uid"] in {e["uid"] for e in r["episodes"]}
               for r in values["results"])

    # A second run on the same thread (the default strategy), read back as the thread's state.
    output = await client.runs.wait(thread["thread_id"], "memroute",
                                    input={"query": "Which airline do I prefer?",
                                           "scope": scope.as_dict(), "k": 2})
    assert len(output["results"]) == 2 and output["stop_reason"]
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["query"] == "Which airline do I prefer?"

    # Bad input is the caller's error: the run fails with memroute's typed error.
    bad = await client.runs.wait(thread["thread_id"], "memroute",
                                 input={"query": "x", "scope": {"org_id": "a/b"}},
                                 raise_error=False)
    assert "InvalidInputError" in str(bad)
