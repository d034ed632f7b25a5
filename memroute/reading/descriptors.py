"""Descriptors: the things a question describes but does not name (`descriptor`).

A **descriptor** is a relation of an owner ("my brother", "Anders's fiancée", "my colleague's
cello tutor" innermost first: "my colleague"), a role of a named thing ("the director of film
Inception") or a noun with a relative clause ("the conference I'm flying to", "the person who
moved to Lisbon"). The offline chain resolves it against the evidence
(`memroute.planners.offline.resolve`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memroute.errors import ModelUnavailableError
from memroute.nlp import WH_TAGS, parse
from memroute.reading import vocabulary as V
from memroute.reading.entities import STOPWORDS, fold

# Who or what a memory relates to someone: people by their role, pets by their kind.
RELATION_NOUNS = V.RELATIONS
_NAME = (r"(?:[A-Z][\w’'.\-]*(?:\s+(?:" + V.NAME_LINKS.alternation()
         + r")?\s*[A-Z][\w’'.\-]*)*)")
_MODIFIER = r"(?:[a-z][\w\-]*\s+)"
_CLAUSE_STOP = V.CLAUSE_STOPS.words
_WORD = re.compile(r"[\w’'\-]+")

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
