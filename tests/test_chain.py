"""A chain resolves, then asks: the bridge is the one name the evidence ties to the
described thing, the next search is the question with that name in its place (one name
added, nothing else of the evidence), and the chain stops once a sentence names it with the
question's words. What it cannot resolve is expansion, and says so. Auto keeps a share of
the question's own search."""

from __future__ import annotations

import uuid

import pytest

from memroute import RetrievalAgent, Scope
from memroute.graph.final_rerank import QUESTION_SHARE, with_question_share
from memroute.graph.state import QUESTION_RANK
from memroute.nlp import Entity
from memroute.planners.offline.parsed import judge_chain, names_of, who_is
from memroute.planners.offline.resolve import answered, find_bridge, resolve
from memroute.reading.descriptors import descriptor
from tests.reasons import names as reason_names

LISBON = "What does the person who moved to Lisbon love to eat?"
LISBON_HOP1 = ["Clara moved to Lisbon in 2023.", "People in Lisbon love to eat custard tarts.",
               "Tom lives in Berlin."]


def test_the_chain_resolves_the_person_then_asks_about_her() -> None:
    first = judge_chain(LISBON, LISBON_HOP1, [LISBON])
    assert not first.is_sufficient
    assert first.new_query == "What does Clara love to eat?"  # not "People", not "Tom"
    # golden: a hop's reason names what it resolved and to whom
    assert reason_names(first.reason, "the person who moved to Lisbon", "Clara"), first.reason
    second = judge_chain(LISBON, [*LISBON_HOP1, "Clara loves grilled sardines."],
                         [LISBON, first.new_query])
    assert second.is_sufficient and second.confidence >= 0.8
    assert second.answer_index == 3 and second.new_query == ""
    assert reason_names(second.reason, "Clara loves grilled sardines"), second.reason


def test_a_chain_of_relations_stated_at_once_resolves_at_once() -> None:
    question = "Which football club does my brother's wife support?"
    evidence = ["Yes! My brother's wife, Sigrid, grew up in Stavanger.",
                "Great, I booked the table for Friday.", "I'm away until Monday."]
    judged = judge_chain(question, evidence, [question])
    # "Yes", "Great" and "I'm" start their sentences: never names
    assert judged.new_query == "Which football club does Sigrid support?"


def test_nested_descriptors_resolve_innermost_first() -> None:
    question = "What does my neighbour's daughter's maths tutor coach?"
    evidence = ["My neighbour Gwen grows tomatoes on her balcony.",
                "Gwen's daughter Isla started at Craigmount High in August.",
                "Isla has a maths tutor too, Mr. Fergus Lamb."]
    res = resolve(question, evidence, [[] for _ in evidence])
    assert [name for _, name in res.bridges] == ["Gwen", "Isla", "Mr. Fergus Lamb"]
    assert res.question == "What does Mr. Fergus Lamb coach?" and res.left is None
    # only the first level in the evidence: the partly resolved question is asked next
    partial = judge_chain(question, evidence[:1], [question])
    assert partial.new_query == "What does Gwen's daughter's maths tutor coach?"


def test_the_bridge_is_the_name_beside_the_described_noun() -> None:
    d = descriptor("Where does my colleague's cello tutor teach?")
    assert d.text == "my colleague"
    # a name far from the noun ("Hey Maria, ... with a colleague") ties nothing
    far = ["Hey Maria, I'm so excited to tell you I started a weekend yoga class with a "
           "colleague and it's awesome!"]
    assert find_bridge(d, far, [[]], "Where does my colleague's cello tutor teach?") is None
    # two colleagues: the one the evidence also ties to the rest of the question
    evidence = ["My colleague Rob invited me to a yoga class.",
                "My colleague Ravi Menon turns 35 on 22 June.",
                "Ravi is learning the cello from a tutor named Bettina Kraus."]
    bridge = find_bridge(d, evidence, [[] for _ in evidence],
                         "Where does my colleague's cello tutor teach?")
    assert bridge.name == "Ravi Menon"


def test_a_title_names_its_passage_subject_so_his_is_not_the_owner() -> None:
    question = "Who is the paternal grandfather of Euphemia of Pomerania?"
    d = descriptor(question)
    assert d.owner == "Euphemia of Pomerania"
    # another man's page: "his" and a shared word ("Pomerania") are about its title
    other = ["Bogislaw V: His paternal grandfather was Otto I, Duke of Pomerania."]
    assert find_bridge(d, other, [[]], question) is None
    # the owner's own page, or a sentence naming her in full, ties the name
    own = ["Euphemia of Pomerania: Her paternal grandfather was Bogislaw IV."]
    assert find_bridge(d, own, [[]], question).name == "Bogislaw IV"
    named = ["Bogislaw V: Euphemia of Pomerania's paternal grandfather, Wartislaw IV, died."]
    assert find_bridge(d, named, [[]], question).name == "Wartislaw IV"


def test_the_chain_says_why_it_stops_without_an_answer() -> None:
    question = "Which band does my manager play in?"
    evidence = ["My manager, Declan Moore, wants the quarterly report by Friday."]
    first = judge_chain(question, evidence, [question])
    assert first.new_query == "Which band does Declan Moore play in?"
    stop = judge_chain(question, evidence, [question, first.new_query])
    assert stop.is_sufficient and not stop.new_query and stop.answer_index is None
    assert reason_names(stop.reason, "my manager", "Declan Moore"), stop.reason
    unresolved = judge_chain(question, ["We went hiking on Sunday."], [question])
    assert unresolved.new_query == "Who is my manager?"  # asked whole, never "my manager"
    nothing = judge_chain(question, ["We went hiking on Sunday."],
                          [question, unresolved.new_query])
    assert nothing.is_sufficient and not nothing.new_query and nothing.answer_index is None
    assert reason_names(nothing.reason, "my manager"), nothing.reason


def test_what_cannot_be_resolved_is_expansion_by_name() -> None:
    question = "Which actor starred in both Kiss and Tell and The Bachelor?"
    evidence = ["Kiss and Tell (1945 film): Kiss and Tell is a 1945 comedy film starring "
                "Shirley Temple as the teenage Corliss Archer."]
    judged = judge_chain(question, evidence, [question])
    # expansion searches the name the evidence leads to, with the question's words
    assert not judged.is_sufficient and "Shirley Temple" in judged.new_query
    assert reason_names(judged.reason, "Shirley Temple"), judged.reason


def _record(uid: str, score: float, rank: int | None = None) -> dict:
    extra = {} if rank is None else {QUESTION_RANK: rank}
    return {"uid": uid, "episodes": [], "matched_sentence": "", "vector_score": score,
            "rerank_score": score, "lexical_score": None, "reranker": "none", "query": "",
            "extra": extra}


def test_the_question_keeps_its_share_of_the_top_k() -> None:
    pool = [_record("q0", 0.5, 0), _record("q1", 0.4, 1), _record("q2", 0.3, 2),
            _record("b0", 0.9), _record("b1", 0.8), _record("b2", 0.7)]
    fused = [pool[3], pool[4], pool[5], pool[0]]  # the fused order, 4 places
    kept = with_question_share(fused, pool, 4)
    assert QUESTION_SHARE == 0.5
    assert [r["uid"] for r in kept] == ["b0", "b1", "q0", "q1"]
    assert with_question_share(fused[:2], pool, 4)[2:] == [pool[0], pool[1]]


@pytest.mark.parametrize("k", [3, 5])
async def test_on_a_store_auto_resolves_and_keeps_what_direct_found(memory, k: int) -> None:
    scope = Scope(org_id=f"chain-{uuid.uuid4().hex[:8]}", project_id="chat", user_id="u")
    turns = ["Clara moved to Lisbon in 2023.", "Tom moved to Berlin last spring.",
             "People in Lisbon love to eat custard tarts.", "Clara loves grilled sardines.",
             "Tom loves currywurst.", "The weather was lovely all week.",
             "We watched a film about Lisbon's trams."]
    await memory.add(scope, [{"content": t, "producer": "user", "session_id": "s1"}
                             for t in turns])
    agent = RetrievalAgent(memory, planner="offline", context=(0, 0))
    auto = await agent.aretrieve(LISBON, scope=scope, k=k)
    direct = await agent.aretrieve(LISBON, scope=scope, k=k, strategy="direct")
    # the resolved question is asked, unless the question's own search already answered it
    assert auto.route == "chain" and auto.queries[0] == LISBON
    assert set(auto.queries) <= {LISBON, "What does Clara love to eat?"}
    assert reason_names(auto.hops[0]["reason"], "Clara")
    assert "Clara loves grilled sardines." in [r.nucleus.content for r in auto.results]
    share = [r.uid for r in direct.results][:round(QUESTION_SHARE * k + 0.49)]
    assert set(share) <= {r.uid for r in auto.results}
    assert auto.hops[-1].get("reason")


def test_kin_words_and_roles_of_everyday_life_are_relations() -> None:
    """"my sister-in-law", "my stepdad", "my physio": someone named by their relation to the
    owner; "my order number" names a thing, not a relation."""
    question = "What does my sister-in-law's husband do for a living?"
    d = descriptor(question)
    assert d.text == "my sister-in-law" and d.owner == "my"
    evidence = ["My sister Ana lives in Porto.",
                "My sister-in-law Dana just got back from Lagos.",
                "Dana's husband, Idris Okoro, is a structural engineer at Arup."]
    assert find_bridge(d, evidence, [[] for _ in evidence], question).name == "Dana"
    res = resolve(question, evidence, [[] for _ in evidence])
    assert res.question == "What does Idris Okoro do for a living?"
    for asked, text in [("Where did my physio train?", "my physio"),
                        ("Who is my stepdad's brother?", "my stepdad"),
                        ("Where does my ex-husband live?", "my ex-husband"),
                        ("When did my great-aunt emigrate?", "my great-aunt")]:
        assert descriptor(asked).text == text
    assert descriptor("What is my order number?") is None


def test_an_irregular_verb_answers_its_question_and_an_interjection_names_nothing() -> None:
    evidence = ["I started Spanish lessons with a tutor, Carmen Ruiz.",
                "Carmen grew up in Valencia and still has family there."]
    sentence, at = answered("Where did Carmen Ruiz grow up?", "Carmen Ruiz", evidence,
                            [[], []], ["grow"])
    assert (sentence, at) == (evidence[1], 1)
    assert answered("Where did Carmen Ruiz work?", "Carmen Ruiz", evidence, [[], []],
                    ["work"]) == ("", -1)
    said = "Wow, that's great news. Congrats, Joanna! Woah Joanna, a screenplay!"
    names = names_of(said, [Entity("Congrats", "congrats", "PERSON"),
                            Entity("Woah Joanna", "woah joanna", "PERSON")])
    assert "Joanna" in names and not {"Congrats", "Woah Joanna"} & set(names)
    names = names_of("Ruairí's up on Friday, he's booked Fallon's Table for half seven.", [])
    assert "Fallon's Table" in names and "Table" not in names  # a possessive is no contraction


async def test_a_resolved_question_left_unanswered_searches_the_name_tied_to_it(memory) -> None:
    """"the practice of the dentist I see on April 3": the dentist is resolved, and the
    practice the booking names beside him is searched."""
    scope = Scope(org_id=f"chain-{uuid.uuid4().hex[:8]}", project_id="chat", user_id="u")
    turns = [("user", "I also need a dentist appointment for myself."),
             ("assistant", "Is your dentist still Dr. Felix Brandt at Beacon Dental?"),
             ("assistant", "Booked: Dr. Brandt at Beacon Dental on April 3 at 8:00."),
             ("user", "My manager Ingrid Solberg needs to know my travel dates."),
             ("user", "Ingrid is the one who recommended Beacon Dental to me."),
             ("user", "Riverside Animal Clinic is where Biscuit sees Dr. Amara Okafor."),
             ("user", "Dr. Okafor recommended a new food for Biscuit.")]
    await memory.add(scope, [{"content": t, "producer": who, "session_id": "s1"}
                             for who, t in turns])
    agent = RetrievalAgent(memory, planner="offline", context=(0, 0))
    question = "Who recommended the practice of the dentist that I see on April 3?"
    auto = await agent.aretrieve(question, scope=scope, k=5)
    # the name tied to it, searched with the question's words: never the name alone
    assert "Beacon Dental" in auto.queries[-1] and auto.queries[-1] != "Beacon Dental"
    assert reason_names(auto.hops[-2]["reason"], "Beacon Dental")
    assert turns[4][1] in [r.nucleus.content for r in auto.results]


@pytest.mark.parametrize(("question", "asked"), [
    ("What does my wife's sister do?", "Who is my wife's sister?"),
    ("What is Otto's girlfriend studying?", "Who is Otto's girlfriend?"),
    ("What do Julien's parents do for work?", "Who are Julien's parents?"),
])
def test_a_hop_asking_who_someone_is_reads_as_a_persons_question(question: str,
                                                                 asked: str) -> None:
    left = resolve(question, [], []).left
    assert who_is(question, left) == asked
