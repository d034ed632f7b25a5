"""The chain's judge reads what the entity index stored for its evidence: the speaker of a
turn makes "is this about the question's subject" structural (docs/evaluation.md, issue 12)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from memroute import RetrievalAgent, Scope
from memroute.nlp import SPEAKER_LABEL, Entity
from memroute.planners.offline.parsed import judge_with_entities
from memroute.planners.offline.planner import OfflinePlanner
from memroute.planners.offline.bridging import ChainHeuristics


def speaker(name: str) -> Entity:
    return Entity(name, name.lower(), SPEAKER_LABEL)


QUESTION = "What instruments does Melanie play?"
TURNS = ["Yeah, I play clarinet! Started when I was young.",
         "Wow, that sounds great. I love music too."]


def test_attribute_rewrite_searches_the_named_speakers_own_turns() -> None:
    stored = [[speaker("Melanie")], [speaker("Caroline")]]
    own = judge_with_entities(QUESTION, TURNS, [QUESTION], ChainHeuristics(own_turns=True),
                              stored)
    # the speaker tells it in the first person: the rewrite asks as they would
    assert not own.is_sufficient and own.new_query == "What instruments do I play?"
    assert own.producer == "Melanie"
    assert ChainHeuristics().own_turns  # the default
    # off, or nothing stored: the same rewrite over everyone's turns
    assert judge_with_entities(QUESTION, TURNS, [QUESTION], ChainHeuristics(own_turns=False),
                               stored).producer == ""
    assert judge_with_entities(QUESTION, TURNS, [QUESTION], ChainHeuristics(own_turns=True),
                               None).producer == ""
    # every other word of the question stays: the speaker's turns stand for the name
    named = "What LGBTQ events has Melanie joined?"
    assert judge_with_entities(named, TURNS, [named], ChainHeuristics(own_turns=True),
                               stored).new_query == "What LGBTQ events have I joined?"
    # the parse's name swallowed a word ("John taken"): the speaker's name in the question counts
    swallowed = "What test has John taken multiple times?"
    judged = judge_with_entities(swallowed, ["I failed the test.", "Oh no."], [swallowed],
                                 ChainHeuristics(), [[speaker("John")], [speaker("Maria")]])
    assert judged.producer == "John"
    assert judged.new_query == "What test have I taken multiple times?"
    # two named speakers: no single subject whose turns to search
    both = "What song did Melanie play for Caroline?"
    assert judge_with_entities(both, TURNS, [both], ChainHeuristics(own_turns=True),
                               stored).producer == ""


def test_speakers_tell_turns_from_titled_facts() -> None:
    """A titled fact's stored entities hold no speaker: it gets a bridge, not the predicate
    alone, even when its text has no title prefix to go by."""
    question = "When was Arthur Blake born?"
    facts = ["Arthur Blake was a painter of the Norwich school, trained by John Crome.",
             "John Crome founded the Norwich Society of Artists in 1803."]
    stored = [[Entity("Arthur Blake", "arthur blake", "PERSON"),
               Entity("John Crome", "john crome", "PERSON")],
              [Entity("John Crome", "john crome", "PERSON")]]
    judgment = judge_with_entities(question, facts, [question], ChainHeuristics(), stored)
    # untitled text alone would search the predicate
    assert judgment.new_query not in ("born", "When was I born?")
    turns = judge_with_entities(question, facts, [question], ChainHeuristics(),
                                [[*s, speaker("Arthur Blake")] for s in stored])
    assert turns.new_query == "When was I born?"  # a speaker's own turns, in the first person


class RecordingPlanner(OfflinePlanner):
    """The offline planner, keeping the stored entities each judge call was given."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.seen: list = []

    async def judge(self, query, evidence, previous_queries, hop, evidence_entities=None,
                    **times):
        self.seen.append(evidence_entities)
        return await super().judge(query, evidence, previous_queries, hop, evidence_entities,
                                   **times)


async def test_the_judge_gets_stored_entities_and_the_rewrite_keeps_to_the_speaker(memory):
    scope = Scope(org_id=f"judge-{uuid.uuid4().hex[:8]}", project_id="chat", user_id="u")
    start = datetime(2024, 5, 1, tzinfo=timezone.utc)
    turns = [("Melanie", "I finally learned the violin this spring."),
             ("Caroline", "I play the piano and the violin at church."),
             ("Melanie", "Taking the kids to Lisbon next week!"),
             ("Caroline", "Lisbon is lovely. Enjoy the custard tarts."),
             ("Melanie", "Yeah, I play clarinet! Started when I was young."),
             ("Caroline", "Do you play in a band?")]
    await memory.add(scope, [{"content": text, "producer": who, "session_id": "s1",
                              "produced_at": start + timedelta(seconds=i)}
                             for i, (who, text) in enumerate(turns)])
    planner = RecordingPlanner(own_turns=True)
    agent = RetrievalAgent(memory, planner=planner, context=(0, 0))
    result = await agent.aretrieve(QUESTION, scope=scope, k=3, strategy="chain")
    assert result.queries == [QUESTION, "What instruments do I play?"]
    first = planner.seen[0]
    assert first and all(entities is not None for entities in first)
    assert all(any(e.label == SPEAKER_LABEL for e in entities) for entities in first)
    rewrite_hits = [r for r in result.results if r.extra.get("hop") == 2]
    assert rewrite_hits and all(r.nucleus.producer == "Melanie" for r in rewrite_hits)
    # a window's speakers count as the hit's: Caroline's turn names Melanie, Melanie's follows
    asked = "What did Caroline say about Lisbon?"
    windowed = RetrievalAgent(memory, planner=planner, context=(0, 1))
    planner.seen.clear()
    await windowed.aretrieve(asked, scope=scope, k=3, strategy="chain")
    speakers = {e.text for entities in planner.seen[0] for e in entities
                if e.label == SPEAKER_LABEL}
    assert speakers == {"Melanie", "Caroline"}
    assert any("clarinet" in r.nucleus.content for r in result.results)


async def test_a_hop_that_is_not_judged_reads_no_stored_entities(memory, monkeypatch):
    """A judged hop reads its hits' entities in its search statement (no second statement);
    a hop that is not judged does not ask for them."""
    scope = Scope(org_id=f"judge-{uuid.uuid4().hex[:8]}", project_id="chat", user_id="u")
    await memory.add(scope, [{"content": "Melanie plays the clarinet.", "producer": "Melanie",
                              "session_id": "s1"}])
    asked: list[bool] = []
    search, separate = memory.search_scored, []

    async def counted(*args, **kwargs):
        asked.append(kwargs.get("with_entities", False))
        return await search(*args, **kwargs)

    async def stored_entities(*args, **kwargs):
        separate.append(args)
        return {}

    monkeypatch.setattr(memory, "search_scored", counted)
    monkeypatch.setattr(memory, "stored_entities", stored_entities)
    planner = RecordingPlanner(own_turns=True)
    await RetrievalAgent(memory, planner=planner, context=(0, 0), max_hops=1).aretrieve(
        QUESTION, scope=scope, k=3, strategy="chain")
    assert asked == [False] and planner.seen == []  # one hop, the hop limit: nothing judged
    asked.clear()
    await RetrievalAgent(memory, planner=planner, context=(0, 0), max_hops=2).aretrieve(
        QUESTION, scope=scope, k=3, strategy="chain")
    assert asked.count(True) == len(planner.seen) >= 1  # entities for each judged hop only
    assert separate == []  # never a statement of their own
    assert planner.seen[0] and any(e.text == "Melanie" for e in planner.seen[0][0])


def test_first_person_words_a_question_as_its_subject_would() -> None:
    """The own-turns rewrite (`ChainHeuristics.own_query="first_person"`): the name, its
    possessive and the third-person pronouns become the speaker's own words."""
    from memroute.reading.entities import first_person
    cases = {
        ("What did Caroline research?", "Caroline"): "What did I research?",
        ("What is Caroline's identity?", "Caroline"): "What is my identity?",
        ("What activities has Melanie done with her family?", "Melanie"):
            "What activities have I done with my family?",
        ("Who supports Caroline when she has a bad day?", "Caroline"):
            "Who supports me when I have a bad day?",
        ("What type of pizza is James' favorite?", "James"): "What type of pizza is my favorite?",
        ("Does Jon like his studio?", "Jon"): "Do I like my studio?",
        ("Is Gina a dancer?", "Gina"): "Am I a dancer?",
        # another person named stays named
        ("What book did Melanie read from Caroline's suggestion?", "Melanie"):
            "What book did I read from Caroline's suggestion?",
    }
    for (question, name), expected in cases.items():
        assert first_person(question, [name]) == expected
    # the rewrite names nothing the question and the evidence do not: "I" is no entity
    from memroute.strategies.chain_of_query import ungrounded_entities
    assert ungrounded_entities(first_person("What did James' dog eat?", ["James"]),
                               ["What did James' dog eat?"]) == []
