"""Resolve, then ask: the offline chain's reading of a question that describes a thing
instead of naming it (its descriptor, `memroute.reading.descriptors`).

The **bridge** is the one name the evidence ties to the descriptor: in the best-ranked
sentence that holds the descriptor's noun (or, for a plain "person", its clause's words) and
its owner (the owner's name, a possessive pronoun, or the first person for "my"), the name
nearest to that noun ("My brother Anders ...", "His fiancée, Marit Olsen, ...", "a tutor named
Bettina Kraus"). Names are the entities stored for the item, its title, and capitalised
phrases that do not start a sentence; a sentence's first word, an interjection or a
contraction is never one.

The **resolved question** is the question with the descriptor replaced by its bridge ("Which
football club does Marit Olsen support?"): one name added, nothing else of the evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memroute.memory.titles import split_title, without_disambiguation
from memroute.nlp import SPEAKER_LABEL, Entity
from memroute.reading.entities import (
    STOPWORDS,
    asks,
    capitalized_phrases,
    fold,
    is_contraction,
    lemmas,
    mentioned,
    without_opening_interjections,
)
from memroute.reading import vocabulary as V
from memroute.reading.descriptors import (
    Descriptor,
    _plain,
    _same_noun,
    _stem,
    descriptor,
    whole_chain,
)

# Nouns too general to look for in the evidence: the clause describes the thing instead.
GENERIC_NOUNS = V.GENERIC
NOT_NAMES = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT",
                       SPEAKER_LABEL})
_FIRST_PERSON = re.compile(r"\b(" + V.FIRST_PERSON.alternation() + r")\b")
_POSSESSIVE_PRONOUN = re.compile(r"\b(" + V.POSSESSIVE_PRONOUNS.alternation() + r")\b")
_SENTENCE = re.compile("".join(rf"(?<!\b{a.capitalize()})" for a in V.ABBREVIATIONS)
                       + r"[.!?]+\s+(?=[A-Z\"“'])")
_WORD = re.compile(r"[\w’'\-]+")


NEAR = 3  # words at most between a described noun and the name the evidence ties to it


def sentences(text: str) -> list[str]:
    """An item's sentences (its title's prefix dropped)."""
    out = []
    for line in text.splitlines() or [text]:
        out.extend(s for s in _SENTENCE.split(split_title(line)[1]) if s.strip())
    return out


def _names(sentence: str, entities: list[Entity], title: str | None) -> list[str]:
    """The names of a sentence: stored entities (not dates, amounts or speakers), the item's
    title, and capitalised phrases that do not start it (nor contractions)."""
    names = [without_opening_interjections(e.text) for e in entities
             if e.label not in NOT_NAMES]
    if title:
        names.append(without_disambiguation(title))
    first = (_WORD.findall(sentence) or [""])[0]
    for phrase in capitalized_phrases(sentence):
        words = phrase.split()
        if words[0] == first and sentence.lstrip(" \"“'").startswith(phrase):
            words = words[1:]  # a sentence's first word names nothing by being first
        phrase = " ".join(w for w in words if not is_contraction(w))
        if phrase:
            names.append(phrase)
    folded = " ".join(_plain(sentence))
    return [n for n in dict.fromkeys(names)
            if n and fold(n) and f" {' '.join(_plain(n))} " in f" {folded} "]


def _possessor(words: list[str], at: int, possessor: set[int]) -> str:
    """Whose the relation noun at ``at`` is, by the word that owns it ("my ex-husband",
    "her husband", "Nia's husband"; at most two words between): "first" for the speaker's
    own, "other" for someone else's, "" when the sentence does not say."""
    for i in range(at - 1, max(at - 4, -1), -1):
        if i in possessor or _POSSESSIVE_PRONOUN.fullmatch(words[i]):
            return "other"
        if _FIRST_PERSON.fullmatch(words[i]):
            return "first"
    return ""


def _owned_elsewhere(d: Descriptor, whose: str, speaker: str | None) -> bool:
    """Whether a relation noun owned as ``whose`` is someone else's than ``d``'s: the asker's
    own relation ("my husband") is not another person's ("her husband"), and another
    person's ("Nia's husband") is not the speaker's own ("my ex-husband")."""
    if d.owner == "my":
        return whose == "other" and not d.whole  # a chain states its own possessors
    if d.owner and whose == "first":
        return speaker is None or fold(speaker) != fold(d.owner)
    return False


def _position(words: list[str], target: str) -> int | None:
    parts = _plain(target)
    for i in range(len(words) - len(parts) + 1):
        if words[i:i + len(parts)] == parts:
            return i
    return None


def _owner_tied(sentence: str, owner: str, title: str | None, speaker: str | None) -> bool:
    """Whether ``sentence`` speaks of ``owner`` ("my": the asker). The first person of a
    turn is its speaker's: a named speaker's "my colleague" is theirs, not the asker's, and
    ties to a question about that speaker's colleague. A title names its passage's subject:
    under another subject's title the sentence must name the owner in full; in a turn or
    under the owner's own title a word of the name or "his"/"her" will do."""
    folded = f" {' '.join(_plain(sentence))} "
    first_person = bool(_FIRST_PERSON.search(folded))
    if owner == "my":
        return first_person and speaker is None
    if not owner:
        return True
    if speaker is not None and first_person and fold(speaker) == fold(owner):
        return True
    bare = without_disambiguation(owner)
    if title and not (mentioned(bare, title) or mentioned(title, bare)):
        return f" {' '.join(_plain(bare))} " in folded
    parts = [p for p in _plain(bare) if len(p) >= 3 and p not in STOPWORDS]
    return bool(title) or any(f" {p} " in folded for p in parts) or bool(
        _POSSESSIVE_PRONOUN.search(folded))


@dataclass(frozen=True)
class Bridge:
    name: str
    sentence: str


def _support(name: str, evidence: list[str], stems: set[str]) -> int:
    """How many of ``stems`` (the rest of the question) sentences naming ``name`` hold."""
    parts = [p for p in _plain(name) if len(p) >= 3]
    found: set[str] = set()
    for text in evidence:
        for sentence in sentences(text):
            words = _plain(sentence)
            if any(p in words for p in parts):
                found |= stems & {_stem(w) for w in words}
    return len(found)


def _noun_positions(words: list[str], noun: str, skip: set[int]) -> list[int]:
    """Where ``noun`` stands in ``words`` (both ends of a noun of several words,
    "sister in law"), not where ``skip`` holds a possessor."""
    parts = noun.split()
    out: list[int] = []
    for i in range(len(words) - len(parts) + 1):
        end = i + len(parts) - 1
        if end not in skip and all(_same_noun(words[i + j], p) for j, p in enumerate(parts)):
            out.extend(dict.fromkeys((i, end)))
    return out


def find_bridge(d: Descriptor, evidence: list[str], entities: list[list[Entity]],
                known: str) -> Bridge | None:
    """The name the best-ranked evidence ties to ``d`` (see the module docstring), at most
    `NEAR` words from its noun; among several, the one the evidence also links to the rest
    of the question (``known``, whose names are not bridges)."""
    rest = {_stem(w) for w in _WORD.findall(known.replace(d.text, " "))
            if len(w) >= 3 and fold(w) not in STOPWORDS and not w[:1].isupper()}
    generic = d.noun in GENERIC_NOUNS
    person = fold(d.noun) in V.PEOPLE_RELATIONS
    word_stems = {_stem(w) for w in d.words if len(w) >= 3 and not w[:1].isupper()}
    best: tuple[tuple, Bridge] | None = None
    for rank, (text, ents) in enumerate(zip(evidence, entities, strict=True)):
        title = split_title(text.splitlines()[0] if text else text)[0]
        # who said the item, when a name did (its first entity: `hit_entities`); a role such
        # as "user" names no one: the asker's own turns
        speaker = ents[0].text if ents and ents[0].label == SPEAKER_LABEL else None
        for sentence in sentences(text):
            words = _plain(sentence)
            stems = [_stem(w) for w in words]
            # "my brother's wife, Sigrid": a possessor's name is not the one beside it
            possessor = {i for i, w in enumerate(fold(sentence).split()) if w.endswith("'s")}
            noun_at = _noun_positions(words, d.noun, possessor) if not generic else []
            noun_at = [a for a in noun_at
                       if not _owned_elsewhere(d, _possessor(words, a, possessor), speaker)]
            if not generic and not noun_at:
                continue
            matched = sum(s in stems for s in word_stems)
            if generic and not matched or len(word_stems) > matched and d.whole:
                continue
            if not _owner_tied(sentence, d.owner, title, speaker):
                continue
            anchors = noun_at or [i for i, s in enumerate(stems) if s in word_stems]
            candidates = []
            for name in _names(sentence, ents, title):
                if fold(name) in fold(known) or (d.owner and fold(name) == fold(d.owner)):
                    continue
                if d.owner and set(_plain(name)) <= set(_plain(d.owner)):
                    continue  # a part of the owner's own name
                at = _position(words, name)
                if at is None or person and at and words[at - 1] in V.PLACE_PREPOSITIONS.words:
                    continue  # a person's relation names a person, not the place beside them
                end = at + len(_plain(name)) - 1
                distance = min(min(abs(a - at), abs(a - end)) for a in anchors)
                if distance <= NEAR:
                    candidates.append((distance, name))
            if not candidates:
                continue
            distance, name = min(candidates)
            key = (matched, _support(name, evidence, rest), -rank, -distance)
            if best is None or key > best[0]:
                best = (key, Bridge(name, sentence))
    return None if best is None else best[1]


@dataclass(frozen=True)
class Resolution:
    question: str  # with every descriptor the evidence resolved replaced by its bridge
    bridges: list[tuple[str, str]]  # (descriptor text, bridge name), innermost first
    left: Descriptor | None  # the next descriptor the evidence did not resolve


def resolve(question: str, evidence: list[str], entities: list[list[Entity]],
            named: list[str] = (), levels: int = 3) -> Resolution:
    """Replace descriptors by their bridges, innermost first, as long as the evidence ties
    one to each (at most ``levels``)."""
    bridges: list[tuple[str, str]] = []
    current = question
    for _ in range(levels):
        d = descriptor(current, [*named, *(b for _, b in bridges)])
        if d is None:
            return Resolution(current, bridges, None)
        chain = whole_chain(current, d) if d.owner else None
        bridge = find_bridge(chain, evidence, entities, current) if chain else None
        if bridge is not None:
            d = chain
        else:
            bridge = find_bridge(d, evidence, entities, current)
        if bridge is None:
            return Resolution(current, bridges, d)
        at = current.find(d.text)
        current = current[:at] + bridge.name + current[at + len(d.text):]
        bridges.append((d.text, bridge.name))
    return Resolution(current, bridges, descriptor(current, [b for _, b in bridges]))


def answered(question: str, bridge: str, evidence: list[str], entities: list[list[Entity]],
             predicate: list[str], order: list[int] | None = None) -> tuple[str, int]:
    """A sentence of the evidence that names ``bridge`` (a word of it) with one of the
    question's ``predicate`` words, and the index of its item; ("", -1) if none. Items are
    read in ``order`` (newest first, when a later statement supersedes an earlier one),
    else as ranked. A question ("Where does Dana work now?") is no answer."""
    parts = [p for p in _plain(bridge) if len(p) >= 3 and p != "the"]
    stems = {_stem(w) for w in predicate if len(w) >= 3}
    asked_lemmas: set[str] | None = None
    for index in order if order is not None else range(len(evidence)):
        text = evidence[index]
        title = split_title(text.splitlines()[0] if text else text)[0]
        for sentence in sentences(text):
            if asks(sentence):
                continue
            folded = f" {' '.join(_plain(sentence))} "
            names_it = any(f" {p} " in folded for p in parts) or (
                title is not None and fold(bridge) in fold(title))
            if not names_it:
                continue
            if any(_stem(w) in stems for w in folded.split()):
                return sentence, index
            if asked_lemmas is None:
                asked_lemmas = lemmas(" ".join(predicate))
            if asked_lemmas & lemmas(sentence):  # "grew up" answers "grow up"
                return sentence, index
    return "", -1
