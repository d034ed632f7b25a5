"""Expansion, for a chain whose described thing the parse cannot resolve: it searches the
evidence's best untried entities with the question's words, labelled as expansion. The
first is an entity, not a capitalised word; it stops once the expanded entity's own facts
(filed under its title) came up; a role compared across two subjects expands one entity of
each."""

from __future__ import annotations

import json
import uuid

from memroute import RetrievalAgent, Scope
from memroute.nlp import Entity
from dataclasses import fields

from memroute.planners.offline.bridging import ChainHeuristics, bridge_candidates
from memroute.planners.offline.parsed import (bridge_found, judge_chain, judge_with_entities,
                                              rank_bridges)
from memroute.planners.offline.planner import OfflinePlanner
from tests.reasons import names

QUESTION = "Which label released the debut album of the band that Mara Quint founded?"
# "Federal" comes first in the sentence and scores the same as the band: no entity vouches
# for it (the NER of this sentence finds Mara Quint and Velvet Harbor only)
HOP1 = ["Mara Quint: In the Federal era, Mara Quint founded the band Velvet Harbor.",
        "Quint (surname): Quint is a surname of Latin origin."]
STORED = [[Entity("Mara Quint", "mara quint", "PERSON"),
           Entity("Velvet Harbor", "velvet harbor", "LOC")],
          [Entity("Latin", "latin", "NORP")]]
NEUTRAL = ChainHeuristics(unvouched=1.0)
ALBUM = "Velvet Harbor: Velvet Harbor released its debut album on Brightwater Records."
# found by the question too: the store's first hop holds them
OTHERS = ["Federal architecture: Federal architecture was common in the young republic.",
          "Harbor Records: Harbor Records is a label of folk music."]


def test_surface_order_puts_the_capitalised_word_first() -> None:
    surface = [c.entity for c in bridge_candidates(QUESTION, HOP1, [QUESTION])]
    assert surface[:2] == ["Federal", "Velvet Harbor"]
    # a neutral ranking keeps it, and the judge then bridges on the style word
    assert [c.entity for c in rank_bridges(QUESTION, HOP1, [QUESTION], NEUTRAL, STORED)] == surface
    assert judge_with_entities(QUESTION, HOP1, [QUESTION], NEUTRAL, STORED).new_query.startswith(
        "Federal")


def test_the_first_bridge_is_a_stored_entity() -> None:
    assert ChainHeuristics().unvouched < 1  # the default
    judgment = judge_with_entities(QUESTION, HOP1, [QUESTION], ChainHeuristics(), STORED)
    assert not judgment.is_sufficient and judgment.new_query.startswith("Velvet Harbor")
    assert "Federal" not in judgment.new_query
    # nothing stored: the NER of the evidence vouches instead
    assert judge_with_entities(QUESTION, HOP1, [QUESTION], ChainHeuristics(),
                               None).new_query.startswith("Velvet Harbor")
    # a title vouches too, its disambiguation left out ("Quint" is filed under
    # "Quint (surname)"), so only an unvouched word is pushed down
    ranked = [c.entity for c in rank_bridges(QUESTION, HOP1, [QUESTION], ChainHeuristics(),
                                             STORED)]
    assert ranked.index("Velvet Harbor") < ranked.index("Federal")  # vouched first


def test_later_expansions_keep_the_surface_order() -> None:
    first = judge_with_entities(QUESTION, HOP1, [QUESTION], ChainHeuristics(), STORED)
    hop2 = [*HOP1, ALBUM]
    stored2 = [*STORED, [Entity("Velvet Harbor", "velvet harbor", "PERSON"),
                         Entity("Brightwater Records", "brightwater records", "ORG")]]
    later = judge_with_entities(QUESTION, hop2, [QUESTION, first.new_query],
                                ChainHeuristics(keep=2), stored2)
    assert "Federal" in later.new_query and not later.is_sufficient
    # golden: an expansion's reason names what it expands
    assert names(later.reason, "Federal", "Brightwater Records"), later.reason


def test_each_compared_subject_bridges_through_an_entity() -> None:
    """One bridge per compared subject (`bridge_per_subject`) is ranked the same way."""
    asked = "Which film has the director who died later, Night Harbor or Blue Coast?"
    hop1 = ["Night Harbor: Directed by Tom Varga, the film stars Ilse Kern.",
            "Blue Coast: Blue Coast is a 1950 film directed by Anna Roth."]
    stored = [[Entity("Tom Varga", "tom varga", "PERSON"), Entity("Ilse Kern", "ilse kern",
                                                                  "PERSON")],
              [Entity("Blue Coast", "blue coast", "WORK_OF_ART"),
               Entity("Anna Roth", "anna roth", "PERSON")]]
    for entities in (stored, None):  # stored, or the NER of the evidence
        assert judge_with_entities(asked, hop1, [asked], ChainHeuristics(),
                                   entities).new_query.startswith("Tom Varga Anna Roth")


def test_six_parameters_from_json_or_keywords() -> None:
    assert len(fields(ChainHeuristics)) <= 6
    assert ChainHeuristics(**json.loads('{"unvouched": 0.5}')).unvouched == 0.5
    assert OfflinePlanner(unvouched=1.0).heuristics.unvouched == 1.0


async def test_on_a_store_the_chain_resolves_the_band_before_any_expansion(memory) -> None:
    """"the band that Mara Quint founded" is resolved from the evidence: the next search is
    the question about Velvet Harbor; over titled passages expansion may follow, labelled."""
    scope = Scope(org_id=f"rank-{uuid.uuid4().hex[:8]}", project_id="wiki", user_id="u")
    await memory.add(scope, [{"content": text, "producer": "system", "session_id": "s1"}
                             for text in [*HOP1, *OTHERS, ALBUM]])
    agent = RetrievalAgent(memory, planner=OfflinePlanner(keep=2), context=(0, 0))
    result = await agent.aretrieve(QUESTION, scope=scope, k=3, strategy="chain")
    assert result.queries[0] == QUESTION
    assert names(result.hops[0]["reason"], "the band that Mara Quint founded", "Velvet Harbor")
    # answered by the first search already; over titled passages expansion follows, its
    # reason naming the entity it expands
    assert all(q == "Which label released the debut album of Velvet Harbor?"
               or names(h["reason"], q.split()[0])
               for q, h in zip(result.queries[1:], result.hops))
    assert ALBUM in [r.nucleus.content for r in result.results]


STAR_QUESTION = "Which government position was held by the star of Kiss and Tell?"
FILM = ["Kiss and Tell (1945 film): Kiss and Tell is a 1945 comedy film starring Shirley "
        "Temple as the teenage Corliss Archer.",
        "Kiss and Tell (1945 film): The film was a box office success."]
STAR = "Shirley Temple: Shirley Temple Black served as United States ambassador to Ghana."
# the same fact, not filed under the bridge: its own facts did not come up
ABOUT_STAR = "Corliss Archer: Shirley Temple Black later served as ambassador to Ghana."
STAR_OTHERS = ["Accra: Accra is the capital of Ghana.",
          "Ghana: Ghana is a country in West Africa.",
          "Walter Abel: Walter Abel was an American character actor."]


def test_bridge_found_reads_the_titles_of_the_new_hits() -> None:
    bridge = "Shirley Temple government position held star"
    assert bridge_found(STAR_QUESTION, bridge, FILM, [STAR], True)
    assert not bridge_found(STAR_QUESTION, bridge, FILM, [ABOUT_STAR], True)  # another title's
    assert not bridge_found(STAR_QUESTION, bridge, FILM, ["Shirley Temple Black was an ambassador."],
                            True)
    # a title the question names is the question's subject, not the bridge
    assert not bridge_found(STAR_QUESTION, "Kiss and Tell star", FILM, [FILM[1]], True)
    # the first hop found nothing filed under the question's subject: not settled
    assert not bridge_found(STAR_QUESTION, bridge, STAR_OTHERS, [STAR], True)
    # a role of each of two named subjects: each needs its bridge found
    asked = "Which film has the director who died later, Kiss and Tell or Accra?"
    both = [*FILM, STAR_OTHERS[0]]
    assert not bridge_found(asked, "Shirley Temple director died", both, [STAR], True)
    assert bridge_found(asked, "Shirley Temple director died", both, [STAR], False)
    assert bridge_found(asked, "Shirley Temple Ghana director died", both, [STAR, STAR_OTHERS[1]],
                        True)


def test_the_judge_stops_only_after_the_first_rewrite_found_its_bridge() -> None:
    stop = ChainHeuristics(keep=2)
    first = judge_with_entities(STAR_QUESTION, FILM, [STAR_QUESTION], stop)
    assert not first.is_sufficient and first.new_query.startswith("Shirley Temple")
    tried = [STAR_QUESTION, first.new_query]
    found = judge_with_entities(STAR_QUESTION, [*FILM, STAR], tried, stop)
    assert found.is_sufficient and found.confidence >= 0.8
    missing = judge_with_entities(STAR_QUESTION, [*FILM, ABOUT_STAR], tried, stop)
    assert not missing.is_sufficient and missing.new_query


async def _chain(memory, facts: list[str], **heuristics) -> list[str]:
    scope = Scope(org_id=f"stop-{uuid.uuid4().hex[:8]}", project_id="wiki", user_id="u")
    await memory.add(scope, [{"content": text, "producer": "system", "session_id": "s1"}
                             for text in facts])
    agent = RetrievalAgent(memory, planner=OfflinePlanner(keep=2, **heuristics),
                           context=(0, 0))
    result = await agent.aretrieve(STAR_QUESTION, scope=scope, k=2, strategy="chain")
    return result.queries


async def test_on_a_store_the_chain_takes_two_searches_when_the_bridge_came_up(memory) -> None:
    queries = await _chain(memory, [*FILM, STAR, *STAR_OTHERS])
    assert len(queries) == 2 and queries[1].startswith("Shirley Temple")
    # without the bridge's own facts in the store, the runner-up entities are expanded
    assert len(await _chain(memory, [*FILM, ABOUT_STAR, *STAR_OTHERS])) == 3


def test_a_role_of_two_named_subjects_bridges_from_each_in_one_rewrite() -> None:
    asked = "Which film has the director who died later, The More The Merrier or Sleep, My Love?"
    hop1 = ["The More the Merrier: The More the Merrier is a 1943 comedy film directed by "
            "George Stevens and starring Jean Arthur.",
            "Sleep, My Love: Sleep, My Love is a 1948 film noir directed by Douglas Sirk, "
            "starring Claudette Colbert.",
            "Sleep, My Love: It stars Claudette Colbert and Robert Cummings."]
    both = judge_with_entities(asked, hop1, [asked], ChainHeuristics())
    # the director of each, not the star named twice
    assert both.new_query.startswith("George Stevens Douglas Sirk")
    assert "director" in both.new_query
    # one named title only: the usual single bridge
    single = judge_with_entities(asked, hop1[:1], [asked], ChainHeuristics())
    assert "Douglas Sirk" not in single.new_query


def test_an_unresolved_description_over_titles_says_why_it_expands() -> None:
    """Over titled passages, a description no sentence ties a name to is expanded, and each
    hop's reason says so before naming what it expands."""
    hop1 = ["Mara Quint: Mara Quint was born in Oslo and studied music at the Grieg Academy.",
            "Oslo: Oslo is the capital of Norway."]
    first = judge_chain(QUESTION, hop1, [QUESTION])
    assert not first.is_sufficient and first.new_query.startswith("Oslo")
    # golden: the reason names the description it could not resolve before what it expands
    described = "the band that Mara Quint founded"
    assert names(first.reason, described, "Oslo"), first.reason
    assert first.reason.index(described) < first.reason.index("Oslo")
    hop2 = [*hop1, "Grieg Academy: The Grieg Academy is a music school in Bergen."]
    second = judge_chain(QUESTION, hop2, [QUESTION, first.new_query])
    last = judge_chain(QUESTION, hop2, [QUESTION, first.new_query, second.new_query])
    assert not second.is_sufficient and second.new_query.startswith("Grieg Academy")
    assert last.is_sufficient and not last.new_query and names(last.reason, described)
