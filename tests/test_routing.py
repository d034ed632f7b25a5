"""The offline planner routes by the question's structure, and says what it saw: a plain
attribute of what it names -> direct; independent lookups -> split; a thing described but
not named -> chain (resolve, then ask); a relation it cannot resolve -> chain by expansion.
Reasons are asserted by the words that decided them (`tests.reasons.names`), not their prose."""

from __future__ import annotations

import pytest

from memroute.planners.offline.planner import OfflinePlanner
from memroute.reading.descriptors import descriptor
from tests.reasons import names


@pytest.mark.parametrize(("question", "named"), [
    ("When is Oskar's birthday?", "Oskar"), ("What does Kiwi eat?", "Kiwi"),
    ("When did I adopt Pickles?", "Pickles"),  # a name the parse does not tag
    ("What is the order number of the Northwind Electronics laptop?", "Northwind Electronics"),
    ("When is my dentist appointment?", ""),  # a kind of appointment, not a dentist to resolve
    ("Where does my Spanish class meet?", "Spanish"),
    ("When did I last go swimming?", ""),
])
async def test_a_plain_attribute_goes_direct(question: str, named: str) -> None:
    """Direct, one search; the reason names the name the attribute is of (golden: the name
    is what decided it), and no chain's first search or hop."""
    decision = (await OfflinePlanner().route(question)).value
    assert decision.route == "direct", decision.reason
    assert not decision.first_query and not decision.first_searches
    if named:
        assert names(decision.reason, named), decision.reason


@pytest.mark.parametrize(("question", "described"), [
    ("Which football club does my brother's wife support?", "my brother"),
    ("What does the person who moved to Lisbon love to eat?", "the person who moved to Lisbon"),
    ("Where is the conference I'm flying to held?", "the conference I'm flying to"),
    ("What is the address of the clinic where Biscuit's vet works?", "Biscuit's vet"),
    ("Where was the director of film Inception born?", "the director of film Inception"),
])
async def test_a_described_thing_goes_to_a_chain_that_names_it(question: str,
                                                               described: str) -> None:
    decision = (await OfflinePlanner().route(question)).value
    assert decision.route == "chain"
    assert names(decision.reason, described), decision.reason  # golden: what it resolves
    assert descriptor(question).text == described


def test_descriptors_resolve_innermost_first() -> None:
    assert descriptor("What does my neighbour's daughter's maths tutor coach?").text \
        == "my neighbour"
    assert descriptor("What does Gwen's daughter's maths tutor coach?").text == "Gwen's daughter"
    inner = descriptor("What does Isla's maths tutor coach?")
    assert (inner.text, inner.noun, inner.owner, inner.words) == (
        "Isla's maths tutor", "tutor", "Isla", ("maths",))


@pytest.mark.parametrize(("question", "owner"), [
    ("What's Rhys's football coach called again?", "Rhys"),
    ("When's Nia's husband back?", "Nia"),
    ("What is the work of Julien's parents?", "Julien"),
    ("Which club does Edward Howard, 2nd Earl of Carlisle's son support?",
     "Edward Howard, 2nd Earl of Carlisle"),
])
def test_an_owner_is_a_name_not_the_question_word_before_it(question: str, owner: str) -> None:
    described = descriptor(question)
    assert described.owner == owner
    assert described.text.startswith(owner)


@pytest.mark.parametrize(("question", "subjects"), [
    ("Where does Karim study and where is Helga Brandt's office?", ("Karim", "Helga Brandt")),
    ("What do Pepper and Mochi eat?", ("Pepper", "Mochi")),
    ("When are the birthdays of Helen Park and Ravi Menon?", ("Helen Park", "Ravi Menon")),
])
async def test_independent_lookups_split(question: str, subjects: tuple[str, ...]) -> None:
    """A split, one sub-question per subject; the reason names the subjects (golden)."""
    from memroute.planners.offline.parsed import split_by_parse

    decision = (await OfflinePlanner().route(question)).value
    assert decision.route == "split" and names(decision.reason, *subjects), decision.reason
    subs = split_by_parse(question)
    assert len(subs) == len(subjects)
    assert all(sum(s in sub for s in subjects) == 1 for sub in subs), subs


async def test_a_comparison_searches_the_question_first_and_says_so() -> None:
    decision = (await OfflinePlanner().route("Who is older, Lucy Gichuhi or Bob Day?")).value
    assert decision.route == "chain" and not decision.first_query  # the question first
    assert names(decision.reason, "Lucy Gichuhi", "Bob Day"), decision.reason


async def test_a_relation_it_cannot_resolve_is_expansion_by_name() -> None:
    decision = (await OfflinePlanner().route(
        "Which actor starred in both Kiss and Tell and The Bachelor?")).value
    assert decision.route == "chain" and not decision.first_query
    assert names(decision.reason, "starred in"), decision.reason  # golden: the relation


@pytest.mark.parametrize(("question", "route"), [
    ("When is Yasmin's birthday?", "direct"),
    ("What does the person who moved to Lisbon love to eat?", "chain"),
    ("Where does Karim study and where is Helga Brandt's office?", "split"),
    ("how do vaccines train the immune system?", "direct"),
])
async def test_parsed_routes_carry_a_confidence(question: str, route: str) -> None:
    decision = (await OfflinePlanner().route(question)).value
    assert decision is not None and decision.route == route
    assert decision.confidence is not None and 0.5 <= decision.confidence <= 1


async def test_attribute_route_may_send_attributes_elsewhere() -> None:
    question = "When is Yasmin's birthday?"
    assert (await OfflinePlanner().route(question)).value.route == "direct"
    chained = OfflinePlanner(attribute_route="chain")
    assert (await chained.route(question)).value.route == "chain"


async def test_a_named_speakers_attribute_goes_direct_with_their_own_turns() -> None:
    decision = (await OfflinePlanner().route("What did Caroline research?",
                                              ["Caroline", "Melanie"])).value
    assert decision.route == "direct" and names(decision.reason, "Caroline")
    assert [(s.query, s.producer) for s in decision.first_searches] == [
        ("What did I research?", "Caroline")]


def test_the_same_relation_of_two_named_owners_is_two_lookups() -> None:
    from memroute.planners.offline.parsed import route_by_parse, split_by_parse

    question = "Who are Mila's and Zara's teachers this year?"
    route, reason, _ = route_by_parse(question)
    assert route == "split" and names(reason, "Mila", "Zara")
    assert split_by_parse(question) == ["Who are Mila's teachers this year?",
                                        "Who are Zara's teachers this year?"]
    # "When's" is "when is", not a possessive: one named subject, one search
    assert route_by_parse("When's Graham's knee replacement?")[0] == "direct"
