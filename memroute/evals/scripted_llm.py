"""A scripted planner model: the offline planner's decisions served through the LLM planner.

`ScriptedPlannerChat` is a `ChatBackend` (what `LLMPlanner` calls for every prompt), so the
real LLM path runs end to end: prompt files rendered, budgets checked, the reply parsed and
validated, costs recorded. It answers each of the three prompts with the offline planner's
decision as JSON, each call taking a fixed time that stands in for a model's latency. It reports no
usage, so the graph counts tokens itself with tiktoken from the prompts actually sent.

A `ChatBackend` rather than a LangChain chat model: it is the one protocol every planner
call goes through (an OpenAI client is adapted to it too), it receives the reply schema, so
the prompt kind needs no guessing from the prompt text, and no LangChain callback machinery
adds to what the benchmarks time.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

from pydantic import BaseModel

from memroute.planners.llm.prompting import THE_QUESTION
from memroute.planners.llm.replies import JudgeReply, RouteReply, SplitReply
from memroute.planners.llm.structured import Completion, Message
from memroute.planners.llm.tokens import encoding
from memroute.planners.offline.bridging import bridge_query, judge_evidence
from memroute.reading.entities import capitalized_phrases, key_terms
from memroute.planners.offline.question_syntax import route_by_syntax, subject_sub_queries
from memroute.strategies.split_query import clean_sub_queries

_NONE = "(none)"


def _between(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return match.group(1) if match else ""


def _lines(block: str, prefix: re.Pattern[str]) -> list[str]:
    if block.strip() == _NONE:
        return []
    return [prefix.sub("", line) for line in block.splitlines() if line.strip()]


def padded_split(question: str, n: int) -> list[str]:
    """Exactly ``n`` valid sub-queries when the question allows it: the offline planner's
    split, then one per named phrase of the question, then slices of its key terms."""
    terms = key_terms(question)
    candidates = [*subject_sub_queries(question),
                  *(bridge_query(question, phrase)
                    for phrase in capitalized_phrases(question)),
                  *(" ".join(terms[i::n]) for i in range(n)),
                  *(f"{term} facts" for term in terms)]
    return clean_sub_queries(question, candidates)[:n]


def planner_reply(messages: list[Message], schema: type[BaseModel],
                  split_into: int | None = None) -> str:
    """The offline planner's decision for the prompt asking for ``schema``, as JSON.

    ``split_into``: answer the split prompt with exactly that many sub-queries (padded, see
    `padded_split`) instead of the offline planner's own split.
    """
    user = messages[-1]["content"]
    question = _between(user, "question")
    if schema is RouteReply:
        route, reason = route_by_syntax(question)
        return json.dumps({"route": route, "reason": reason[:80]})
    if schema is SplitReply:
        subs = (subject_sub_queries(question) if split_into is None
                else padded_split(question, split_into))
        return json.dumps({"sub_queries": subs})
    if schema is JudgeReply:
        evidence = _lines(_between(user, "evidence"), re.compile(r"^\[\d+\] "))
        previous = [question if q == THE_QUESTION else q for q in
                    _lines(_between(user, "previous_queries"), re.compile(r"^- "))]
        return judge_evidence(question, evidence, previous).model_dump_json()
    raise ValueError(f"no scripted reply for {schema.__name__}")


class ScriptedPlannerChat:
    """A `ChatBackend` answering with `planner_reply`; each call takes ``latency_s`` seconds
    in all (the reply's own computing time included), or the computing time if longer.

    Replies are cut to ``max_tokens`` as a server would cut them. It counts nothing: usage is
    left to the caller's tiktoken estimate of the prompts sent.
    """

    can_cap_output = True

    def __init__(self, latency_s: float = 0.0, *, split_into: int | None = None,
                 model: str = "scripted-offline-planner") -> None:
        self.latency_s = latency_s
        self.split_into = split_into
        self.model = model

    async def complete(self, messages: list[Message], schema: type[BaseModel],
                       max_tokens: int | None) -> Completion:
        started = time.perf_counter()
        text = planner_reply(messages, schema, self.split_into)
        left = self.latency_s - (time.perf_counter() - started)
        if left > 0:
            await asyncio.sleep(left)
        if max_tokens is not None:
            tokens = encoding().encode(text, disallowed_special=())
            if len(tokens) > max_tokens:
                text = encoding().decode(tokens[:max_tokens])
        return Completion(text)
