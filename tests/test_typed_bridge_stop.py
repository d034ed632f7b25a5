"""The typed-bridge stop (`ChainHeuristics.typed_bridge_stop`, off by default)."""

from __future__ import annotations

from memroute.nlp import Entity
from memroute.planners.offline.bridging import ChainHeuristics
from memroute.planners.offline.parsed import judge_with_entities, typed_bridge_found
from memroute.planners.offline.question_parse import PERSON_LABELS, read_question

QUESTION = "Which government position was held by the star of Kiss and Tell?"
REWRITE = "Shirley Temple government position held star"
# the first hop found the bridge in a fact not filed under the question's subject, so
# `bridge_found` (which needs one) cannot settle it
KEPT = "Corliss Archer: Corliss Archer was played by Shirley Temple in Kiss and Tell."
STAR = "Shirley Temple: Shirley Temple Black served as United States ambassador to Ghana."
PERSON = [Entity("Shirley Temple", "shirley temple", "PERSON")]


def test_the_bridge_page_and_the_slot_type_are_both_needed() -> None:
    slot = read_question(QUESTION).hidden_labels
    assert slot == PERSON_LABELS  # "the star of X" is a person
    assert typed_bridge_found(QUESTION, REWRITE, [STAR], [PERSON], slot)
    # the bridge is a place, not a person
    place = [Entity("Shirley Temple", "shirley temple", "GPE")]
    assert not typed_bridge_found(QUESTION, REWRITE, [STAR], [place], slot)
    # the page found is not the typed entity's: another title the rewrite names
    hall = "Shirley Temple Hall: Shirley Temple Hall is a theatre."
    assert not typed_bridge_found(QUESTION, REWRITE + " Hall", [hall], [PERSON], slot)
    # a page title with a parenthesis is the entity it names
    assert typed_bridge_found(QUESTION, REWRITE, [
        "Shirley Temple (actress): She was ambassador to Ghana."], [PERSON], slot)
    # the new hit is not filed under the bridge
    other = "Ghana: Shirley Temple Black was ambassador here."
    assert not typed_bridge_found(QUESTION, REWRITE, [other], [PERSON], slot)
    # conversation turns have no titles: never
    turn = "Shirley Temple Black served as ambassador to Ghana."
    assert not typed_bridge_found(QUESTION, REWRITE, [turn], [PERSON], slot)
    # a rewrite packing one bridge per compared subject: each needs its bridge's page
    asked = "Which film has the director who died later, Kiss and Tell or Bright Eyes?"
    directors = [[Entity("Richard Wallace", "richard wallace", "PERSON")],
                 [Entity("David Butler", "david butler", "PERSON")]]
    wallace = "Richard Wallace: Richard Wallace died in 1951."
    butler = "David Butler (director): David Butler died in 1979."
    rewrite = "Richard Wallace David Butler director died"
    labels = read_question(asked).hidden_labels
    each = ["Richard Wallace", "David Butler"]
    assert not typed_bridge_found(asked, rewrite, [wallace], directors, labels, each)
    assert typed_bridge_found(asked, rewrite, [wallace, butler], directors, labels, each)
    assert typed_bridge_found(asked, rewrite, [wallace], directors, labels)
    # no hidden slot with a type: never
    assert not typed_bridge_found(QUESTION, REWRITE, [STAR], [PERSON], frozenset())


def test_the_judge_stops_after_the_first_rewrite_only_with_the_switch_on() -> None:
    tried = [QUESTION, REWRITE]
    stored = [PERSON, None]
    on = judge_with_entities(QUESTION, [KEPT, STAR], tried,
                             ChainHeuristics(keep=1, typed_bridge_stop=True), stored)
    assert on.is_sufficient and on.confidence >= 0.8
    off = judge_with_entities(QUESTION, [KEPT, STAR], tried, ChainHeuristics(keep=1), stored)
    assert not off.is_sufficient and off.new_query
    # the first hop is never stopped by it
    first = judge_with_entities(QUESTION, [KEPT], [QUESTION],
                                ChainHeuristics(keep=1, typed_bridge_stop=True), [PERSON])
    assert not first.is_sufficient


def test_a_comparison_of_alternatives_stops_only_once_each_bridge_page_came_up() -> None:
    asked = "Which film has the director who died later, Kiss and Tell or Bright Eyes?"
    films = ["Kiss and Tell (1945 film): Kiss and Tell is a comedy film directed by "
             "Richard Wallace, starring Shirley Temple and Walter Abel.",
             "Bright Eyes (1934 film): Bright Eyes is a drama film directed by David Butler, "
             "starring James Dunn and Jane Darwell."]
    stored = [[Entity("Richard Wallace", "richard wallace", "PERSON")],
              [Entity("David Butler", "david butler", "PERSON")]]
    h = ChainHeuristics(keep=2, typed_bridge_stop=True, bridge_found_stop=False)
    first = judge_with_entities(asked, films, [asked], h, stored)
    assert first.new_query.startswith("Richard Wallace David Butler")
    tried = [asked, first.new_query]
    wallace = "Richard Wallace: Richard Wallace died in 1951."
    butler = "David Butler (director): David Butler died in 1979."
    one = judge_with_entities(asked, [*films, wallace], tried, h, [*stored, None])
    assert not one.is_sufficient
    assert one.new_query  # the runner-up bridges next
    both = judge_with_entities(asked, [*films, wallace, butler], tried, h,
                               [*stored, None, None])
    assert both.is_sufficient and both.confidence >= 0.8
    # without it (and without `bridge_found_stop`, which also settles this one), the
    # runner-ups are searched
    off = judge_with_entities(asked, [*films, wallace, butler], tried,
                              ChainHeuristics(keep=2, bridge_found_stop=False),
                              [*stored, None, None])
    assert not off.is_sufficient
