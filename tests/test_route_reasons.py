"""Every route and hop reason names what decided it: a chain's or a split's reason names
words of the question (docs/agent.md, "The offline planner"), not only the kind of rule."""

from __future__ import annotations

import re

from memroute.planners.offline.parsed import route_by_parse
from memroute.planners.offline.planner import OfflinePlanner
from tests import assistant_memory as am

# the rule's own wording, which names nothing of the question
RULE_WORDS = ("expansion searches the entities the evidence leads to", "resolve it, then ask",
              "when it was bounds the search", "nothing to resolve")
SMALL = {"my", "is", "it", "to", "of", "in", "on", "at", "do", "an", "the", "and", "for", "s"}
# halves A-D and half E's tune part (no rule is read off the check part)
QUESTIONS = [q["q"] for q in am.QUESTIONS] + [
    q["q"] for q in am.E_QUESTIONS if q["conv"] in ("e1", "e2")]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower())) - SMALL


def test_every_chain_or_split_reason_names_words_of_its_question() -> None:
    unnamed = []
    for question in QUESTIONS:
        route, reason, _ = route_by_parse(question)
        if route == "direct":
            continue
        said = reason.lower()
        for words in RULE_WORDS:
            said = said.replace(words, "")
        if not _words(question) & _words(said):
            unnamed.append((route, reason, question))
    assert unnamed == []


async def test_without_the_parse_a_relation_route_names_its_words_too() -> None:
    """The surface fallback (no spaCy model) names the words that made a relation, not only
    the kind of rule ("nested relation")."""
    planner = OfflinePlanner(use_nlp=False)
    unnamed = []
    for question in QUESTIONS:
        decided = (await planner.route(question)).value
        said = re.sub(r"\(confidence [\d.]+\)", "", decided.reason.lower())
        if decided.route != "direct" and not _words(question) & _words(said):
            unnamed.append((decided.route, decided.reason, question))
    assert unnamed == []
