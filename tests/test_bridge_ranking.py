"""The first bridge is an entity, not a capitalised word (`BridgeRanking`; docs/evaluation.md,
"The first bridge")."""

from __future__ import annotations

import json
import uuid

from memroute import RetrievalAgent, Scope
from memroute.nlp import Entity
from memroute.planners.offline.bridging import BridgeRanking, ChainHeuristics, bridge_candidates
from memroute.planners.offline.parsed import judge_with_entities, rank_bridges
from memroute.planners.offline.planner import OfflinePlanner

QUESTION = "Which label released the debut album of the band that Mara Quint founded?"
# "Federal" comes first in the sentence and scores the same as the band: no entity vouches
# for it (the NER of this sentence finds Mara Quint and Velvet Harbor only)
HOP1 = ["Mara Quint: In the Federal era, Mara Quint founded the band Velvet Harbor.",
        "Quint (surname): Quint is a surname of Latin origin."]
STORED = [[Entity("Mara Quint", "mara quint", "PERSON"),
           Entity("Velvet Harbor", "velvet harbor", "LOC")],
          [Entity("Latin", "latin", "NORP")]]
NEUTRAL = ChainHeuristics(ranking=BridgeRanking())
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
    assert ChainHeuristics().ranking.unvouched < 1  # the default
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
    assert ranked.index("Federal") == len(ranked) - 1


def test_later_rewrites_keep_the_surface_order_unless_asked() -> None:
    first = judge_with_entities(QUESTION, HOP1, [QUESTION], ChainHeuristics(), STORED)
    hop2 = [*HOP1, ALBUM]
    stored2 = [*STORED, [Entity("Velvet Harbor", "velvet harbor", "PERSON"),
                         Entity("Brightwater Records", "brightwater records", "ORG")]]
    tried = [QUESTION, first.new_query]
    default = judge_with_entities(QUESTION, hop2, tried, ChainHeuristics(keep=2), stored2)
    neutral = judge_with_entities(QUESTION, hop2, tried, ChainHeuristics(
        keep=2, ranking=BridgeRanking()), stored2)
    assert default.new_query == neutral.new_query and "Federal" in default.new_query
    later = judge_with_entities(QUESTION, hop2, tried, ChainHeuristics(
        keep=2, ranking=BridgeRanking(unvouched=0.0, later=True)), stored2)
    assert later.new_query != default.new_query


def test_each_compared_subject_bridges_through_an_entity() -> None:
    """One bridge per compared subject (`bridge_per_subject`) is ranked the same way."""
    asked = "Which film has the director who died later, Night Harbor or Blue Coast?"
    hop1 = ["Night Harbor: Directed by Tom Varga, the film stars Ilse Kern.",
            "Blue Coast: Blue Coast is a 1950 film directed by Anna Roth."]
    stored = [[Entity("Tom Varga", "tom varga", "PERSON"), Entity("Ilse Kern", "ilse kern",
                                                                  "PERSON")],
              [Entity("Blue Coast", "blue coast", "WORK_OF_ART"),
               Entity("Anna Roth", "anna roth", "PERSON")]]
    assert ChainHeuristics().ranking.subjects  # the default
    for entities in (stored, None):  # stored, or the NER of the evidence
        assert judge_with_entities(asked, hop1, [asked], ChainHeuristics(),
                                   entities).new_query.startswith("Tom Varga Anna Roth")
    first_only = ChainHeuristics(ranking=BridgeRanking(unvouched=0.3))
    assert judge_with_entities(asked, hop1, [asked], first_only,
                               stored).new_query.startswith("Directed Anna Roth")


def test_a_ranking_from_json() -> None:
    heuristics = ChainHeuristics(**json.loads('{"ranking": {"unvouched": 0.5, "titled": 2}}'))
    assert heuristics.ranking == BridgeRanking(unvouched=0.5, titled=2.0)
    assert BridgeRanking().neutral and not heuristics.ranking.neutral
    planner = OfflinePlanner(ranking={"unvouched": 1.0})
    assert planner.heuristics.ranking.neutral


async def test_on_a_store_the_chain_bridges_through_the_band(memory) -> None:
    """Entities extracted at ingestion vouch for the band; the style word is searched only
    in the packed last rewrite."""
    scope = Scope(org_id=f"rank-{uuid.uuid4().hex[:8]}", project_id="wiki", user_id="u")
    await memory.add(scope, [{"content": text, "producer": "system", "session_id": "s1"}
                             for text in [*HOP1, *OTHERS]])

    async def queries(**planner) -> list[str]:
        agent = RetrievalAgent(memory, planner=OfflinePlanner(keep=2, **planner),
                               context=(0, 0))
        return (await agent.aretrieve(QUESTION, scope=scope, k=3, strategy="chain")).queries

    default = await queries()
    assert default[1].startswith("Velvet Harbor") and "Federal" in default[2]
    assert (await queries(ranking={}))[1].startswith("Federal")
