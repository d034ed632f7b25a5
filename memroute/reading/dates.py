"""The searches of the windows of time a question names (`windowed_searches`): a past window
searched with the question told as done (`as_told`: "What did I book last week?" -> "What
have I booked?") among the turns said in it; a window still to come with the question naming
its days. The windows themselves are `memroute.time.windows`.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from memroute.errors import ModelUnavailableError
from memroute.nlp import parse
from memroute.strategies.base import ChainSearch
from memroute.time.as_of import from_wall_clock, wall_clock
from memroute.time.expressions import date_window
from memroute.time.windows import time_windows, without_expression
from memroute.reading import vocabulary as V


_PARTICIPLES = V.PARTICIPLES


def _takes_have(pronoun) -> bool:
    """Whether a pronoun takes "have" ("I", "we", "you", "they"), by spaCy's morphology, as
    plural nouns and subjects joined by "and" do (a name or "my sister" takes "has")."""
    return pronoun.tag_ == "PRP" and (pronoun.morph.get("Person") in (["1"], ["2"])
                                      or "Plur" in pronoun.morph.get("Number"))


def as_told(question: str) -> str:
    """A past question asked in the perfect, in the form turns tell a deed ("What did I book?"
    -> "What have I booked?": a turn says "Booked the movers", and "book" alone reads as the
    noun); ``question`` unchanged when it asks no "did <subject> <verb>", asks when (the
    perfect takes no time: "When did I ring?"), or the model is missing."""
    if re.match(r"\s*when\b", question, re.I):
        return question
    try:
        doc = parse(question)
    except ModelUnavailableError:
        return question
    from lemminflect import getInflection

    for did in doc:
        if did.lower_ != "did" or did.i + 2 >= len(doc):
            continue
        if did.dep_ == "aux" and did.head.tag_ in ("VB", "VBP") and did.head.i > did.i + 1:
            verb = did.head  # "What did my sister book?"
        elif doc[did.i + 1].tag_ in ("PRP", "NNP") and doc[did.i + 2].tag_ in ("VB", "NN"):
            verb = doc[did.i + 2]  # "What did I book?", where the parse reads "book" as a noun
        else:
            continue
        subject = doc[did.i + 1:verb.i]
        participle = _PARTICIPLES.get(verb.lower_) or next(
            iter(getInflection(verb.lower_, "VBN") or ()), None)
        if participle is None or any(t.dep_ == "neg" for t in subject):
            return question
        head = next((t for t in subject if t.dep_ in ("nsubj", "nsubjpass")), subject[-1])
        plural = _takes_have(head) or head.tag_ in ("NNS", "NNPS") or any(
            t.dep_ == "cc" or t.lower_ == "and" for t in subject)
        have = "have" if plural else "has"
        words = [t.text_with_ws for t in doc]
        words[did.i] = (have.capitalize() if did.text[0].isupper() else have) + did.whitespace_
        words[verb.i] = participle + verb.whitespace_
        return "".join(words)
    return question


def windowed_searches(question: str, as_of: datetime,
                      skip: str = "") -> tuple[list[ChainSearch], str]:
    """The search of each window of time the question names, and what they are in words
    ("'last week' = 2024-07-01..07-07"); ([], "") when it names none. A window holds the
    turns said in it and the turns that name one of its days (`ChainSearch.mentions_days`:
    "Moved on Saturday", told on the Monday after; "Booked Saltwater for Saturday", told
    on the Tuesday before). A past window is searched with the question `as_told`, without
    the expression ("What did I book last week?" -> "What have I booked?"); a window still
    to come ("next Friday", "this weekend") with the question naming its days ("What's on
    Saturday 28 or Sunday 29 June?"), among the turns that name them. An expression inside
    ``skip`` (a described thing: "the dentist I see on April 3") is part of it, not a
    window. Windows are read on ``as_of``'s own calendar ("yesterday" asked at 00:30 on 15
    January, +01:00, is 14 January there) and searched as the instants they span."""
    wall = wall_clock(as_of)
    searches, said = [], []
    if date_window(question) is not None:
        return [], ""  # a full date it states ("on 3 May, 2023"): searched as stated
    for window in time_windows(question, as_of):
        if skip and window.expression in skip:
            continue  # the expression is part of a description the question gives
        days = window.days()
        if not days:
            continue  # a year: turns speak of it more than they are said in it
        try:
            produced_after = from_wall_clock(window.start, as_of)
            produced_before = from_wall_clock(min(window.end, wall + timedelta(seconds=1)),
                                              as_of)
        except (OverflowError, ValueError):  # past the calendar's ends
            continue
        said.append(window.label())
        if window.start > wall:
            at = question.find(window.expression)
            named = (question[:at] + window.spoken() + question[at + len(window.expression):]
                     if at >= 0 else question)
            searches.append(ChainSearch(query=named, mentions_days=days))
            continue
        words = as_told(without_expression(question, window.expression))
        searches.append(ChainSearch(query=words if len(words.split()) >= 2 else question,
                                    produced_after=produced_after.isoformat(),
                                    produced_before=produced_before.isoformat(),
                                    mentions_days=days))
    return searches, "; ".join(said)
