"""The protocol's metrics on hand-made cases."""

from __future__ import annotations

import pytest

from memroute.evals import metrics
from memroute.evals.datasets import parse_evidence

GOLD = ["Kiss and Tell: Kiss and Tell is a 1945 American comedy film starring Shirley Temple.",
        "Shirley Temple: As an adult, she was named United States ambassador to Ghana."]


def test_sf_recall_is_exact_match_on_contents() -> None:
    returned = [GOLD[0], "Other: unrelated sentence here."]
    assert metrics.sf_recall(GOLD, returned) == 0.5
    # a near copy is not an exact match
    assert metrics.sf_recall(GOLD, [GOLD[0].lower()]) == 0.0
    assert metrics.sf_recall(GOLD, GOLD + ["x"]) == 1.0
    assert metrics.sf_recall([], GOLD) == 0.0


def test_all_sf_needs_every_gold_fact() -> None:
    assert metrics.all_sf(GOLD, GOLD) == 1.0
    assert metrics.all_sf(GOLD, GOLD[:1]) == 0.0
    assert metrics.all_sf([], GOLD) == 0.0


def test_para_recall_counts_titles() -> None:
    assert metrics.para_recall(["A", "B"], ["A", "A", "C"]) == 0.5
    assert metrics.para_recall(["A", "B"], ["B", "A"]) == 1.0


def test_mm_recall_substring_of_whole_fact_or_tail() -> None:
    # whole fact, after lowercasing and collapsing whitespace
    assert metrics.mm_fact_hit(GOLD[0], ["  KISS and  Tell: kiss and tell is a 1945 american "
                                         "comedy film starring shirley temple.  extra"])
    # only the part after the first ':' (e.g. returned without a title)
    assert metrics.mm_fact_hit(GOLD[1], ["As an adult, she was named United States ambassador "
                                         "to Ghana."])
    assert not metrics.mm_fact_hit(GOLD[1], ["She was an ambassador."])


def test_mm_recall_token_overlap_rule() -> None:
    fact = "Title: The quick brown foxes jumped over seven lazy dogs yesterday"
    # tokens of length >= 3 of the sentence: the quick brown foxes jumped over seven lazy
    # dogs yesterday (10)
    line_60 = "quick brown foxes jumped over seven different cats"  # 6/10 >= 60%
    assert metrics.mm_fact_hit(fact, [line_60])
    line_50 = "quick brown foxes jumped elsewhere today again"  # 4/10 < 60%
    assert not metrics.mm_fact_hit(fact, [line_50])
    # the overlap must sit in ONE line, and that line needs >= 5 tokens
    assert not metrics.mm_fact_hit(fact, ["quick brown foxes", "jumped over seven lazy"])
    assert not metrics.mm_fact_hit(fact, ["quick brown foxes jumped"])


def test_mm_recall_short_facts_need_a_substring() -> None:
    fact = "T: Paris is big"  # fewer than 5 tokens of length >= 3: no overlap rule
    assert not metrics.mm_fact_hit(fact, ["paris big is very big indeed today"])
    assert metrics.mm_fact_hit(fact, ["we know that paris is big today"])
    assert metrics.mm_recall([fact, GOLD[1]], ["paris is big"]) == 0.5


def test_evidence_recall_counts_unresolved_ids_as_misses() -> None:
    assert metrics.evidence_recall(["D1:3", "D2:4"], [], ["D1:3", "D9:9"]) == 0.5
    assert metrics.evidence_recall(["D1:3"], ["D4:36"], ["D1:3"]) == 0.5
    assert metrics.evidence_recall([], [], ["D1:3"]) is None


@pytest.mark.parametrize(("raw", "expected"), [
    (["D1:3"], ["D1:3"]),
    (["D8:6; D9:17"], ["D8:6", "D9:17"]),
    (["D:11:26"], ["D11:26"]),
    (["D1:3, D1:5", "D1:3"], ["D1:3", "D1:5"]),
    (["D"], ["D"]),
    ("D2:1 D2:2", ["D2:1", "D2:2"]),
    ([], []),
])
def test_parse_evidence(raw, expected) -> None:
    assert parse_evidence(raw) == expected


def test_squad_normalization_em_and_f1() -> None:
    assert metrics.normalize_answer("The  Beatles!") == "beatles"
    assert metrics.exact_match("the Beatles", ["Beatles"]) == 1.0
    assert metrics.exact_match("Beatles band", ["Beatles"]) == 0.0
    assert metrics.token_f1("Beatles band", ["The Beatles"]) == pytest.approx(2 / 3)
    assert metrics.token_f1("no", ["yes"]) == 0.0
    assert metrics.token_f1("yes it is", ["yes"]) == 0.0  # yes/no is all or nothing
    assert metrics.token_f1("x", ["", "x"]) == 1.0  # best over the aliases


# -- passage protocol ---------------------------------------------------------------------

PA = "Kiss and Tell (1945 film): Kiss and Tell is a 1945 American comedy film. It stars Shirley."
PB = "Shirley Temple: Shirley Temple was an American actress. She was an ambassador to Ghana."
PC = "Ghana: Ghana is a country in West Africa."
PD = "Accra: Accra is the capital of Ghana."


def test_passage_recall_is_the_share_of_supporting_passages_in_the_top_k() -> None:
    ranked = [PC, PA, PD, PB]
    assert metrics.passage_recall([PA, PB], ranked, 1) == 0.0
    assert metrics.passage_recall([PA, PB], ranked, 2) == 0.5
    assert metrics.passage_recall([PA, PB], ranked, 3) == 0.5
    assert metrics.passage_recall([PA, PB], ranked, 4) == 1.0
    assert metrics.all_passages([PA, PB], ranked, 3) == 0.0
    assert metrics.all_passages([PA, PB], ranked, 4) == 1.0
    # exact match on the passage: its title alone, or one of its sentences, is no hit
    assert metrics.passage_recall([PA], ["Kiss and Tell (1945 film): It stars Shirley."], 5) == 0
    assert metrics.passage_recall([], ranked, 5) == 0.0
    assert metrics.all_passages([], ranked, 5) == 0.0


def test_k_counts_distinct_passages_so_a_duplicate_takes_no_slot() -> None:
    ranked = [PC, PC, PA, PC, PB]
    assert metrics.top_passages(ranked, 3) == [PC, PA, PB]
    assert metrics.passage_recall([PA, PB], ranked, 2) == 0.5
    assert metrics.passage_recall([PA, PB], ranked, 3) == 1.0


def test_a_gold_passage_listed_twice_counts_once() -> None:
    # the same supporting passage twice in a question's gold (e.g. two supporting facts of
    # one paragraph, or one paragraph listed twice): still one passage of two
    assert metrics.passage_recall([PA, PA, PB], [PA, PC], 2) == 0.5
    assert metrics.all_passages([PA, PA], [PA], 1) == 1.0
