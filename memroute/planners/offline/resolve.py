"""Resolve, then ask: the offline chain's reading of a question that describes a thing
instead of naming it.

A **descriptor** is a described-but-unnamed thing of the question: a relation of an owner
("my brother", "Anders's fiancée", "my colleague's cello tutor" innermost first: "my
colleague"), a role of a named thing ("the director of film Inception") or a noun with a
relative clause ("the conference I'm flying to", "the person who moved to Lisbon").

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
from memroute.errors import ModelUnavailableError
from memroute.nlp import SPEAKER_LABEL, WH_TAGS, Entity, parse
from memroute.planners.offline.entities import (
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

# Who or what a memory relates to someone: people by their role, pets by their kind.
RELATION_NOUNS = V.RELATIONS
# Nouns too general to look for in the evidence: the clause describes the thing instead.
GENERIC_NOUNS = V.GENERIC
NOT_NAMES = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT",
                       SPEAKER_LABEL})
_FIRST_PERSON = re.compile(r"\b(" + V.FIRST_PERSON.alternation() + r")\b")
_POSSESSIVE_PRONOUN = re.compile(r"\b(" + V.POSSESSIVE_PRONOUNS.alternation() + r")\b")
_NAME = (r"(?:[A-Z][\w’'.\-]*(?:\s+(?:" + V.NAME_LINKS.alternation()
         + r")?\s*[A-Z][\w’'.\-]*)*)")
_MODIFIER = r"(?:[a-z][\w\-]*\s+)"
_CLAUSE_STOP = V.CLAUSE_STOPS.words
_SENTENCE = re.compile("".join(rf"(?<!\b{a.capitalize()})" for a in V.ABBREVIATIONS)
                       + r"[.!?]+\s+(?=[A-Z\"“'])")
_WORD = re.compile(r"[\w’'\-]+")


NEAR = 3  # words at most between a described noun and the name the evidence ties to it


@dataclass(frozen=True)
class Descriptor:
    """A described-but-unnamed thing of a question."""

    text: str  # as it stands in the question, replaced by the bridge once resolved
    noun: str  # its head noun ("fiancée"), folded
    owner: str  # "my", a name ("Anders"), or "" (a role through a clause)
    words: tuple[str, ...]  # its other content words ("cello", "flying", "Lisbon")
    whole: bool = False  # a chain of relations ("my brother's wife"): the evidence states all


_CHAINED = re.compile(r"^['’]s\s+((?:[a-z\-]+\s+){0,2}?)([a-zéè]+)\b")


def whole_chain(question: str, d: Descriptor) -> Descriptor | None:
    """``d`` with the relations that follow it ("my brother" -> "my brother's wife"), to be
    resolved at once where a sentence states the whole chain; None if none follows."""
    end = question.find(d.text) + len(d.text)
    text, nouns, words = d.text, [], list(d.words)
    while m := _CHAINED.match(question[end:]):
        if not _relation(m.group(2)):
            break
        nouns.append(d.noun if not nouns else nouns[-1])
        words += [*m.group(1).split(), nouns[-1]]
        text += m.group(0)
        end += len(m.group(0))
        last = fold(m.group(2))
    if not nouns:
        return None
    return Descriptor(text, last, d.owner, tuple(words), whole=True)


def _plain(text: str) -> list[str]:
    """The folded words of ``text``, a possessive's "'s" dropped ("freya's" -> "freya")."""
    return [re.sub(r"'s?$", "", w) for w in fold(text).split()]


def _stem(word: str) -> str:
    """A word's first four letters: "loves" and "love", "directed" and "director" meet."""
    return fold(word)[:4]


def _same_noun(word: str, noun: str) -> bool:
    """Whether a folded word is ``noun`` or its plural, or shares its first five letters
    ("directed" for "director"; "dental" is no "dentist")."""
    return (word == noun or word.rstrip("s") == noun.rstrip("s")
            or (len(noun) >= 5 and len(word) >= 5 and word[:5] == noun[:5]))


_KIN_AFFIXES = re.compile(r"^(?:step ?|(?:" + V.KIN_PREFIXES.alternation()
                          + r") )| in laws?$")  # folded


def _relation(noun: str) -> bool:
    """Whether ``noun`` names someone (or a pet) by their relation to an owner: a role of
    `RELATION_NOUNS`, its plural, or a kin word of one ("stepdad", "sister-in-law",
    "ex-husband", "great-aunt")."""
    folded = fold(noun)
    if folded in ("in law", "in laws"):
        return True
    bare = _KIN_AFFIXES.sub("", folded)
    return any(w.replace(" ", "") in RELATION_NOUNS  # "co-worker"
               for w in (folded, folded.rstrip("s"), bare, bare.rstrip("s")))


_OWNER = re.compile(rf"\b(?:(?P<my>[Mm]y|[Oo]ur)|(?P<name>{_NAME})['’]s?)\s+")
_ROLE_OF = re.compile(
    rf"\bthe\s+(?P<mods>{_MODIFIER}{{0,2}}?)(?P<noun>[a-z]+)\s+of\s+(?:the\s+)?"
    rf"(?P<kind>(?:[a-z]+\s+){{0,1}}?)(?P<name>{_NAME}|[\"“][^\"”]+[\"”])")
_THE = re.compile(r"\bthe\s+", re.I)
_RELATIVE_WORDS = V.CLAUSE_OPENERS.words


def _names_a_kind(question: str, end: int) -> bool:
    """Whether the relation noun ending at ``end`` only names a kind of the question's last
    noun ("When is my dentist appointment?": an appointment, not a dentist, is asked about).
    After "do"/"does"/"did" the last word is the question's verb ("What does my tutor
    coach?")."""
    rest = _WORD.findall(question[end:])
    if len(rest) != 1 or re.search(r"\b(do|does|did)\b", question[:end], re.I):
        return False
    token = next((t for t in parse(question) if t.idx >= end and t.is_alpha), None)
    return token is not None and token.tag_ == "NN"


_NAME_PART = re.compile(r"(?P<w>[A-Z0-9][\w’'.\-]*|" + V.NAME_LINKS.alternation()
                        + r")(?:\s*,)?\s+$")


def _name_start(question: str, start: int) -> int:
    """Where the name ending before ``start`` begins, its titles and appositions included
    ("Edward Howard, 2Nd Earl Of Carlisle")."""
    while (m := _NAME_PART.search(question[:start])) and m.start() > 0:
        if fold(m.group("w")) in V.WH_WORDS.words:
            break
        start = m.start()
    return start


def _owner_start(question: str, start: int, end: int) -> int:
    """Where an owner's name between ``start`` and ``end`` begins: never at a question word
    and its verb ("What's Rhys's coach": Rhys) nor at a joining word ("the work of Julien's
    parents": Julien), by the question's parse."""
    try:
        doc = parse(question)
    except ModelUnavailableError:
        return start
    for token in doc:
        if token.idx < start:
            continue
        if token.idx >= end or token.idx > start:
            break
        if not (token.tag_ in WH_TAGS or token.tag_ in ("IN", "DT", "POS") or token.pos_ == "AUX"
                or token.lower_ in ("'s", "’s")):
            break
        start = token.idx + len(token.text_with_ws)
    return start


def _possessed(question: str) -> Descriptor | None:
    """"my brother", "Anders's fiancée", "my pottery tutor": an owner, up to two modifiers,
    and a relation noun."""
    for m in _OWNER.finditer(question):
        name = m.group("name")
        if name is not None and (fold(name) in V.POINTERS.words | V.WH_WORDS.words
                                 or not re.search(r"['’]s?\s+$", m.group(0))):
            continue
        words = _WORD.findall(question[m.end():])[:3]
        for i, word in enumerate(words):
            plain = re.sub(r"['’]s?$", "", word)
            if _relation(plain):
                end = question.find(word, m.end()) + len(plain)
                if _names_a_kind(question, end):
                    return None
                start = _name_start(question, m.start()) if name else m.start()
                if name:
                    start = _owner_start(question, start, m.start() + len(name))
                    if start >= m.start() + len(name):
                        break
                owner = question[start:m.start() + len(name)] if name else "my"
                return Descriptor(question[start:end], fold(plain), owner.strip(),
                                  tuple(words[:i]))
            if not re.fullmatch(r"[A-Za-z\-]+", word):
                break
    return None


def _role_of(question: str) -> Descriptor | None:
    m = _ROLE_OF.search(question)
    if not m or not _relation(m.group("noun")):
        return None
    mods = tuple(m.group("mods").split()) + tuple(m.group("kind").split())
    return Descriptor(m.group(0), fold(m.group("noun")), m.group("name").strip("\"“”"), mods)


_PREPOSITIONS = V.CLAUSE_PREPOSITIONS.words
# an object of the clause's verb: a pronoun, or the noun a determiner opens ("lent us his van")
_OBJECT_WORDS = V.CLAUSE_OBJECTS.words


def _clause_words(clause: str, nouns: frozenset[str] = frozenset()) -> list[str]:
    """A relative clause's words up to its verb's particles and object: where the question's
    own verb starts ("love to eat", "held", "famous for") the clause has ended. Its object
    stays: a pronoun or determiner and what follows it ("lent us his van"), a preposition's
    noun, a name with the number after it ("on April 3"), and a noun of ``nouns`` after
    another ("at book club")."""
    words = clause.split()
    out: list[str] = []
    verb_seen = False
    for i, word in enumerate(words):
        plain = fold(word)
        previous = out[-1] if out else ""
        goes_on = (plain in _PREPOSITIONS or plain in _OBJECT_WORDS or word[:1].isupper()
                   or fold(previous) in _PREPOSITIONS | _OBJECT_WORDS
                   or (word[:1].isdigit() and previous[:1].isupper())
                   or (word in nouns and previous in nouns))
        if verb_seen and out and (plain in _CLAUSE_STOP or not goes_on):
            break
        out.append(word)
        if re.fullmatch(r"[a-z]+(ed|ing|s)|[a-z]+", plain) and i and not word[:1].isupper() \
                and plain not in V.NOT_A_VERB.words:
            verb_seen = True
    return out


def _nouns(question: str) -> frozenset[str]:
    """The common nouns of ``question`` by its parse (none without the spaCy model)."""
    try:
        return frozenset(t.text for t in parse(question) if t.tag_ in ("NN", "NNS"))
    except ModelUnavailableError:
        return frozenset()


def _with_clause(question: str, named: list[str]) -> Descriptor | None:
    """"the conference I'm flying to", "the person who moved to Lisbon": a noun, up to two
    modifiers, then, right after it, a relative clause (a relative pronoun, a pronoun or a
    name opens it)."""
    nouns: frozenset[str] | None = None  # parsed once, when a clause is first read
    for m in _THE.finditer(question):
        words = _WORD.findall(question[m.end():].split("?")[0])
        for i, word in enumerate(words[:3]):
            rest = words[i + 1:]
            if not rest or not re.fullmatch(r"[a-z\-]+", word) or word in STOPWORDS:
                break
            opener = rest[0]
            if not (fold(opener) in _RELATIVE_WORDS or opener[:1].isupper()):
                continue
            if re.match(rf"\W*{re.escape(word)}\s*,", question[question.find(word, m.end()):]):
                break  # a relative clause follows its noun directly, not after a comma
            nouns = _nouns(question) if nouns is None else nouns
            clause = _clause_words(" ".join(rest), nouns)
            if not clause or len(clause) < 2:
                continue
            start = m.start()
            end = question.find(clause[-1], question.find(word, m.end())) + len(clause[-1])
            text = question[start:end]
            content = [w for w in clause if fold(w) not in _RELATIVE_WORDS | _PREPOSITIONS
                       | _OBJECT_WORDS | {"is", "was", "m"}]
            owner = next((n for n in named if n in text), "")
            return Descriptor(text, fold(word), owner, tuple(words[:i]) + tuple(content))
    return None


def descriptor(question: str, named: list[str] = ()) -> Descriptor | None:
    """The question's innermost descriptor, or None: an owner's relation first ("my
    brother" in "my brother's fiancée"), then a role of a named thing, then a noun with a
    relative clause."""
    return _possessed(question) or _role_of(question) or _with_clause(question, list(named))


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
