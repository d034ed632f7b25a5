"""Prompt files: loaded by name, versioned by hash, rendered with data kept as data."""

from __future__ import annotations

import hashlib
from importlib.resources import files

import pytest

from memroute.errors import InvalidInputError
from memroute.prompts import load_prompt
from memroute.planners.llm.tokens import count_messages

NAMES = ["tool_select", "split_query", "chain_of_query", "repair"]


@pytest.mark.parametrize("name", NAMES)
def test_prompt_hash_is_the_sha256_of_its_file(name):
    raw = files("memroute.prompts").joinpath(f"{name}.md").read_bytes()
    assert load_prompt(name).sha256 == hashlib.sha256(raw).hexdigest()


def test_router_prompt_has_calibration_examples_and_the_tie_breaker():
    system = load_prompt("tool_select").system
    assert system.count('{"route": "chain"') >= 2 and system.count('{"route": "split"') >= 2
    assert system.count('{"route": "direct"') >= 2
    assert "any explicit dependency chain -> \"chain\"" in system


def test_render_fills_every_placeholder_and_rejects_missing_ones():
    messages = load_prompt("chain_of_query").render(query="Q?", asked="Wednesday 2025-06-04",
                                                    previous="- Q?", evidence="[0] e")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "$" not in messages[1]["content"] and "<evidence>\n[0] e\n</evidence>" in \
        messages[1]["content"]
    with pytest.raises(InvalidInputError):
        load_prompt("chain_of_query").render(query="Q?")
    with pytest.raises(InvalidInputError):
        load_prompt("no_such_prompt")


def test_repair_prompt_is_a_single_user_message():
    messages = load_prompt("repair").render(reply="x", error="y")
    assert [m["role"] for m in messages] == ["user"]


@pytest.mark.parametrize("name, limit", [("tool_select", 734), ("split_query", 860)])
def test_prompts_stay_within_70_percent_of_memmachines_token_counts(name, limit):
    query = "Which was founded first, Oakridge College or Pinecrest University?"
    asked = "Wednesday 2025-06-04; 'last week' = 2025-05-26..06-01"
    assert count_messages(load_prompt(name).render(query=query, asked=asked)) <= limit
