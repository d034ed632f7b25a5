"""The agent benchmark's scripted planner model and its measures, end to end on a tiny store.

No timing assertions: the figures' meaning is checked (counts, shares, which intervals are
subtracted), not their speed.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from benchmarks import agent as bench_agent
from memroute.evals.datasets import load_dataset
from memroute.evals.scripted_llm import ScriptedPlannerChat, padded_split, planner_reply
from memroute.evals.store import pooled_episodes
from memroute.prompts import load_prompt
from memroute.planners.offline.bridging import judge_evidence
from memroute.planners.offline.question_syntax import route_by_syntax, subject_sub_queries
from memroute.planners.llm.prompting import QUESTION_CHARS, as_data, format_asked
from memroute.planners.llm.replies import RouteReply, SplitReply
from memroute.planners.llm.structured import format_tokens
from memroute.strategies import split_query
from memroute.planners.llm.planner import LLMPlanner
from memroute.planners.llm.tokens import count_messages
from memroute.reading.question import read

DATA = (Path(__file__).resolve().parents[2]
        / "shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl")
BRIDGE = "Where was the director of the film Harbor Lights born?"
COMPARISON = "Which was founded first, Oakridge College or Pinecrest University?"
EVIDENCE = ["Harbor Lights: Harbor Lights is a 1998 drama film directed by Mara Quinlan.",
            "Harbor Lights: The film was shot on the rocky coast of Maine in one winter."]


async def test_route_reply_is_the_offline_route_and_tokens_are_counted_from_the_prompt():
    planner = LLMPlanner(ScriptedPlannerChat())
    as_of = datetime(2025, 6, 4, 9, tzinfo=timezone.utc)
    for question in (BRIDGE, COMPARISON, "What year did the bridge open?"):
        result = await planner.route(question, as_of=as_of)
        assert result.error is None
        assert result.value.route == route_by_syntax(question)[0]
        sent = load_prompt("tool_select").render(query=as_data(question, QUESTION_CHARS),
                                                 asked=format_asked(read(question, as_of)))
        assert result.usage.llm_calls == 1 and result.usage.estimated
        # the prompt and the json_schema response format a real model would be sent
        assert result.usage.input_tokens == count_messages(sent) + format_tokens(RouteReply)
        assert result.usage.output_tokens > 0


async def test_split_reply_is_the_offline_split_or_exactly_n_sub_queries():
    result = await LLMPlanner(ScriptedPlannerChat()).split(COMPARISON)
    assert result.error is None
    assert result.value.sub_queries == subject_sub_queries(COMPARISON)
    assert len(result.value.sub_queries) == 2
    for question in (BRIDGE, COMPARISON):
        padded = await LLMPlanner(ScriptedPlannerChat(split_into=4)).split(question)
        assert padded.error is None and len(padded.value.sub_queries) == 4
        assert padded.value.sub_queries == padded_split(question, 4)
        # every one survives the graph's cleaning
        assert split_query.clean_sub_queries(question, padded.value.sub_queries) \
            == padded.value.sub_queries


async def test_judge_reply_reads_the_evidence_and_previous_queries_of_the_prompt():
    planner = LLMPlanner(ScriptedPlannerChat())
    first = await planner.judge(BRIDGE, EVIDENCE, [BRIDGE], hop=1)
    assert first.error is None
    expected = judge_evidence(BRIDGE, EVIDENCE, [BRIDGE])
    assert first.value.is_sufficient is expected.is_sufficient is False
    assert first.value.new_query == expected.new_query
    assert "Mara Quinlan" in first.value.new_query
    # with no evidence and nothing before, the prompt says "(none)": nothing to bridge from
    empty = await planner.judge(BRIDGE, [], [], hop=1)
    assert empty.error is None and empty.value.is_sufficient


async def test_the_judge_prompt_names_the_question_once_and_earlier_rewrites_in_full():
    chat = ScriptedPlannerChat()
    sent: list[str] = []
    complete = chat.complete

    async def recording(messages, schema, max_tokens):
        sent.append(messages[-1]["content"])
        return await complete(messages, schema, max_tokens)

    chat.complete = recording
    planner = LLMPlanner(chat)
    first = await planner.judge(BRIDGE, EVIDENCE, [f" {BRIDGE.upper()} "], hop=1)
    assert sent[-1].count("Harbor Lights born") == 1  # in <question> only
    assert "- (the question)" in sent[-1]
    # the scripted model reads "(the question)" back: the same decisions as before
    # (the offline judgment also says why, in ``reason``; the model's says nothing)
    assert first.value == judge_evidence(BRIDGE, EVIDENCE, [BRIDGE]).model_copy(
        update={"reason": ""})
    second = await planner.judge(BRIDGE, EVIDENCE, [BRIDGE, "Mara Quinlan born"], hop=2)
    assert "- (the question)\n- Mara Quinlan born" in sent[-1]
    assert second.value == judge_evidence(BRIDGE, EVIDENCE, [BRIDGE, "Mara Quinlan born"]
                                          ).model_copy(update={"reason": ""})


def test_an_unknown_schema_is_refused():
    from pydantic import BaseModel

    class Other(BaseModel):
        x: int

    with pytest.raises(ValueError, match="Other"):
        planner_reply([{"role": "user", "content": "<question>q</question>"}], Other)


async def test_replies_are_cut_to_max_tokens_as_a_server_would():
    chat = ScriptedPlannerChat()
    messages = load_prompt("split_query").render(query=COMPARISON, asked="(unknown)")
    full = await chat.complete(messages, SplitReply, None)
    cut = await chat.complete(messages, SplitReply, 3)
    assert json.loads(full.text)["sub_queries"]
    assert full.text.startswith(cut.text) and len(cut.text) < len(full.text)
    assert full.input_tokens is None and full.output_tokens is None  # it counts nothing


def test_interval_union_counts_overlapping_searches_once():
    records = [{"started_at": 10.0, "ended_at": 10.1}, {"started_at": 10.05, "ended_at": 10.2},
               {"started_at": 10.5, "ended_at": 10.6}, {"started_at": 10.52, "ended_at": 10.55}]
    assert bench_agent.interval_union_ms(records) == pytest.approx(300.0)
    assert bench_agent.interval_union_ms([]) == 0.0


@pytest.mark.skipif(not DATA.exists(), reason="the shared HotpotQA file is not beside the repo")
async def test_bench_measures_run_end_to_end_on_a_tiny_pooled_store(memory, scope, capsys):
    dataset = load_dataset("hotpotqa", DATA, limit=4)
    await memory.add(scope, pooled_episodes(dataset, seed=0))
    questions = [q.question for q in dataset.questions]

    tokens = await bench_agent.measure_tokens(memory, scope, questions)
    split, chain = tokens["strategies"]["split"], tokens["strategies"]["chain"]
    assert split["llm_calls"] == 1 and split["routes"] == {"split": 4}
    assert 1 <= chain["llm_calls"] <= 2 and chain["estimated"]
    versus = tokens["vs_memmachine"]
    router = tokens["strategies"]["auto"]["by_node"]["tool_select"]
    assert router["llm_calls"] == 1 and versus["router"]["input_tokens"] == router["input_tokens"]
    assert versus["chain"]["input_share"] == pytest.approx(chain["input_tokens"] / 2874)
    assert versus["split"]["output_share"] == pytest.approx(split["output_tokens"] / 435)

    overhead = await bench_agent.measure_overhead(memory, scope, questions, 0.01, warmup=1)
    direct = overhead["strategies"]["direct"]
    assert direct["llm_calls"] == 0 and direct["searches"] == 1
    for name, fig in overhead["strategies"].items():
        assert fig["search_in_flight_ms"]["p50"] > 0
        # in-flight time never exceeds the summed search times (overlap counted once)
        assert fig["search_in_flight_ms"]["mean"] <= fig["search_sum_ms"]["mean"] + 1e-6
        assert fig["wall_ms"]["p95"] >= fig["wall_ms"]["p50"] > 0
    assert overhead["strategies"]["chain"]["llm_calls"] >= 1

    ratio = await bench_agent.measure_split_ratio(memory, scope, questions, 4, warmup=1,
                                                  breakdown_sets=2)
    assert ratio["sub_queries_mean"] == 4 and ratio["searches_per_split_run"] == 5
    assert ratio["ratio_p50"] == pytest.approx(ratio["split_wall_ms"]["p50"]
                                               / ratio["direct_wall_ms"]["p50"])
    assert ratio["breakdown"]["sets"] == 2 and ratio["breakdown"]["queries_per_set"] == 5
    assert {"embed_one", "search_set_concurrently", "search_sub_queries_only"} \
        <= set(ratio["breakdown"]["p50_ms"])

    delayed = await bench_agent.measure_split_ratio(memory, scope, questions, 4, warmup=1,
                                                    breakdown_sets=0, planner_latency_s=0.05)
    assert delayed["planner_latency_ms"] == 50 and delayed["breakdown"] is None
    assert 0 < delayed["split_wall_ms"]["p50"]  # the planner's 50 ms are taken off

    bench_agent.print_report({"store": {"episodes": 1, "questions": 4, "reused": True},
                              "tokens": tokens, "overhead": overhead, "split_ratio": ratio,
                              "split_ratio_planner_latency": delayed})
    printed = capsys.readouterr().out
    assert "vs MemMachine" in printed and "ratio p50" in printed
