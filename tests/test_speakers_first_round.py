"""A speaker's own turns searched in the first round (docs/evaluation.md, "A speaker's own
turns in the first round"): the router reads the scope's speakers (`Memory.speakers`) and a
question naming one sends the own-turns search beside the question's search."""

from __future__ import annotations

import uuid
from datetime import timedelta

from memroute import RetrievalAgent, Scope
from memroute.planners.offline.parsed import first_round_searches
from memroute.planners.offline.planner import OfflinePlanner
from tests.reasons import names

QUESTION = "What did Caroline research for her project?"
TURNS = [("Caroline", "I researched adoption agencies for my project last week."),
         ("Melanie", "That sounds like a big step, Caroline!"),
         ("Melanie", "I painted a sunset over the lake yesterday."),
         ("Caroline", "My brother is a teacher in Ohio."),
         ("Melanie", "My kids started painting lessons last week.")]
DOCS = ["Lisbon: Lisbon is the capital of Portugal.",
        "Caroline Herschel: Caroline Herschel was an astronomer who researched comets."]


def _scope(name: str) -> Scope:
    return Scope(org_id=f"{name}-{uuid.uuid4().hex[:8]}", project_id="chat", user_id="u")


def test_the_first_round_searches_need_a_named_speaker_of_the_scope() -> None:
    own = first_round_searches(QUESTION, ["Caroline", "Melanie"])
    assert [(s.query, s.producer) for s in own] == [
        ("What did I research for my project?", "Caroline")]
    dated = first_round_searches("What did Caroline paint on 3 May, 2023?", ["Caroline"])
    assert [s.produced_after[:10] for s in dated] == ["", "2023-04-26"]
    assert first_round_searches(QUESTION, []) == []  # no speakers: no store read changes it
    assert first_round_searches(QUESTION, ["Melanie"]) == []  # names no speaker
    both = "Did Caroline or Melanie paint more?"
    assert first_round_searches(both, ["Caroline", "Melanie"]) == []
    off = OfflinePlanner(own_turns=False).heuristics
    assert first_round_searches(QUESTION, ["Caroline"], off) == []


async def test_speakers_are_looked_up_cached_and_see_a_new_producer(memory) -> None:
    scope = _scope("spk")
    assert await memory.speakers(scope) == []
    await memory.add(scope, [{"content": t, "producer": p, "session_id": "s1"}
                             for p, t in TURNS])
    await memory.add(scope, [{"content": "Hello there.", "producer": "user", "session_id": "s1"}])
    assert await memory.speakers(scope) == ["Caroline", "Melanie"]  # roles are no speakers
    # a producer ingested after the first lookup is seen (this process drops the cache)
    await memory.add(scope, [{"content": "I moved to Lisbon.", "producer": "Jon",
                              "session_id": "s2"}])
    assert await memory.speakers(scope) == ["Caroline", "Jon", "Melanie"]
    # another process's write: seen once the cached lookup expires
    cached = next(key for key in memory._speakers if key[0] == scope.key)
    memory._speakers[cached] = (0.0, ("Caroline",))
    assert await memory.speakers(scope) == ["Caroline", "Jon", "Melanie"]
    assert await memory.speakers(_scope("other")) == []  # scope-checked
    # within the bound: no speaker who first spoke after as_of, none outside the filters
    before_jon = (await memory.recent(scope, limit=1, filters={"producer": "Jon"}))[0]
    moment = before_jon.episode.produced_at - timedelta(microseconds=1)
    assert await memory.speakers(scope, as_of=moment) == ["Caroline", "Melanie"]
    assert await memory.speakers(scope, filters={"session_id": "s2"}) == ["Jon"]


async def test_a_question_naming_a_speaker_searches_both_in_round_one(
        memory, timed_searches) -> None:
    scope = _scope("own")
    await memory.add(scope, [{"content": t, "producer": p, "session_id": "s1"}
                             for p, t in TURNS])
    events = timed_searches.events
    agent = RetrievalAgent(memory, planner=OfflinePlanner(), context=(0, 0))
    result = await agent.aretrieve(QUESTION, scope=scope, k=10, strategy="auto")
    own = "What did I research for my project?"
    # a plain attribute of a named speaker: direct, with their own turns searched beside it
    assert result.route == "direct" and result.queries == [QUESTION, own]
    assert names(result.route_reason, "Caroline")  # golden: whose turns it searched
    # both searches started before either ended: one round
    assert [kind for kind, _ in events] == ["start", "start", "end", "end"]
    assert result.search_rounds == 1 and result.hops == []
    # the own turns first
    assert result.results[0].nucleus.content.startswith("I researched adoption")
    # switched off: the question alone
    events.clear()
    agent = RetrievalAgent(memory, planner=OfflinePlanner(own_turns=False), context=(0, 0))
    alone = await agent.aretrieve(QUESTION, scope=scope, k=10, strategy="auto")
    assert alone.route == "direct" and alone.queries == [QUESTION]


async def test_a_store_without_producers_routes_as_before(memory) -> None:
    scope = _scope("docs")
    await memory.add(scope, [{"content": d, "producer": "system", "session_id": "d"}
                             for d in DOCS])
    question = "What did Caroline Herschel research?"
    runs = []
    for own_turns in (True, False):
        agent = RetrievalAgent(memory, planner=OfflinePlanner(own_turns=own_turns),
                               context=(0, 0))
        runs.append(await agent.aretrieve(question, scope=scope, k=10, strategy="auto"))
    assert await memory.speakers(scope) == []  # "system" is a role, not a speaker
    assert runs[0].queries == runs[1].queries and runs[0].search_rounds == runs[1].search_rounds
    assert [r.uid for r in runs[0].results] == [r.uid for r in runs[1].results]


class _QuestionOnlyPlanner:
    """A planner written before ``wants_speakers``: its ``route`` takes the question alone."""

    name = "question-only"
    spends_llm_calls = False
    prompt_versions: dict[str, str] = {}

    def __init__(self) -> None:
        self.inner = OfflinePlanner()

    async def route(self, query):
        return await self.inner.route(query)

    async def split(self, query):
        return await self.inner.split(query)

    async def judge(self, query, evidence, previous_queries, hop, evidence_entities=None):
        return await self.inner.judge(query, evidence, previous_queries, hop, evidence_entities)

    def with_limits(self, limits):
        return self


async def test_a_planner_without_wants_speakers_routes_from_the_question(memory) -> None:
    scope = _scope("old")
    await memory.add(scope, [{"content": t, "producer": p, "session_id": "s1"}
                             for p, t in TURNS])
    agent = RetrievalAgent(memory, planner=_QuestionOnlyPlanner(), context=(0, 0))
    result = await agent.aretrieve(QUESTION, scope=scope, k=10, strategy="auto")
    # no lookup: it cannot know Caroline is a speaker, and searches the question alone
    assert result.route == "direct" and result.queries == [QUESTION]


async def test_the_cascade_passes_the_speakers_to_its_offline_router() -> None:
    from memroute.planners.cascade import CascadePlanner
    from memroute.planners.llm.planner import LLMPlanner

    assert LLMPlanner.wants_speakers is False  # the model routes from the question alone
    cascade = CascadePlanner(OfflinePlanner(), OfflinePlanner(), threshold=0.5)
    assert cascade.wants_speakers
    decided = await cascade.route("When is Caroline's birthday?", ["Caroline", "Melanie"])
    assert decided.decided_by == "offline"
    assert [s.producer for s in decided.value.first_searches] == ["Caroline"]
