"""The strategies' `CostProfile` token figures match what the LLM planner sends: the prompts
as rendered and the ``json_schema`` response format, counted with o200k_base from the scripted
model's recorded requests (docs/evaluation.md, "Cost profiles")."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import agent as bench_agent
from memroute.evals.datasets import load_dataset
from memroute.evals.store import pooled_episodes
from memroute.strategies import chain_of_query, split_query, tool_select

FIXTURE = Path(__file__).parent / "fixtures" / "evals" / "hotpotqa_5.jsonl"


async def test_token_costs_are_those_of_the_requests_sent(memory, scope):
    dataset = load_dataset("hotpotqa", FIXTURE)
    await memory.add(scope, pooled_episodes(dataset, seed=0))
    tokens = await bench_agent.measure_tokens(memory, scope,
                                              [q.question for q in dataset.questions])
    measured = {"router": tokens["strategies"]["auto"]["by_node"]["tool_select"],
                "split": tokens["strategies"]["split"],
                "chain": tokens["strategies"]["chain"]}
    profiles = {"router": tool_select.COST_PROFILE, "split": split_query.COST_PROFILE,
                "chain": chain_of_query.COST_PROFILE}
    for name, figures in measured.items():
        per_call = (figures["input_tokens"] + figures["output_tokens"]) / figures["llm_calls"]
        profile = profiles[name]
        # the profiles are means over 100 questions; these 5 differ only in their texts
        assert per_call == pytest.approx(profile.token_cost / profile.llm_calls, rel=0.1), name
