"""Rule-based text analysis read by a question's reading and the offline planner: entities,
key terms, stored titles.

No models and no data downloads: capitalized phrases, quoted phrases and the ``Title:`` prefix
of stored contents stand in for named entities. English only.
"""

from __future__ import annotations

import calendar
import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

from memroute.memory.titles import without_disambiguation
from memroute.nlp import TEXT_CACHE_SIZE, asks, fold
from memroute.reading import vocabulary as V


STOPWORDS = V.STOPWORDS.words
# Words that start sentences or questions and are capitalized only for that reason.
_FUNCTION_CAPS = STOPWORDS | V.MODALS.words
# Words that are capitalized at the start of a sentence but name nothing.
_SENTENCE_STARTERS = V.SENTENCE_STARTERS.words
# Interjections and greetings: never part of a name ("Hey Maria" names Maria, "Wow" nothing).
_INTERJECTIONS = V.INTERJECTIONS.words
# "I'm", "we've", "that's": a contraction is never a name.
_CONTRACTION = re.compile(  # a name's possessive ("Jason's") is none
    r"(?i)(?:i['’](?:m|ve|ll|d)|(?:you|we|they)['’](?:ve|ll|d|re)"
    r"|(?:" + V.CONTRACTED.alternation() + r")['’](?:s|ll|d)|[a-z]+n['’]t)")
CALENDAR = frozenset(n.lower() for n in (*calendar.month_name[1:], *calendar.day_name))
# Lowercase words allowed inside a capitalized phrase ("Kiss and Tell", "Bank of America").
# "and" is left out: in running text it joins two entities far more often than it sits in one.
_CONNECTORS = V.CONNECTORS.words
_ABBREVIATIONS = V.ABBREVIATIONS.words
_TOKEN = re.compile(r"[\w][\w'’.\-]*[\w]|[\w]|&", re.UNICODE)
_QUOTED = re.compile(r"[\"“”]([^\"“”]{2,80})[\"“”]")
_WORD = re.compile(r"\w+", re.UNICODE)


def _is_cap(token: str) -> bool:
    return token[:1].isupper() or (token[:1].isdigit() and len(token) <= 4)


def capitalized_phrases(text: str) -> list[str]:
    """Maximal runs of capitalized tokens (digits allowed after the first token), with short
    lowercase connectors inside ("Bank of America"), plus quoted phrases. Sentence-initial
    function words ("The", "In", "Which") and calendar words do not start a phrase. Cached
    per text (as `fold`): a chain's judge reads the same evidence sentences at every hop."""
    return list(_capitalized_phrases(text))


@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _capitalized_phrases(text: str) -> tuple[str, ...]:
    phrases: list[str] = [m.group(1).strip(" .,;:") for m in _QUOTED.finditer(text)]
    # Quoted titles are taken whole; their words do not start phrases of their own.
    text = _QUOTED.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', text)
    tokens = [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]
    i = 0
    while i < len(tokens):
        word = tokens[i][0]
        if not word[:1].isupper() or word.lower() in _FUNCTION_CAPS or word.lower() in CALENDAR:
            i += 1
            continue
        initial = i == 0 or bool(re.search(r"[.!?:]\s*[\"'“(]*\s*$",
                                           text[:tokens[i][1]]))
        j = i + 1
        end = i
        while j < len(tokens):
            nxt = tokens[j][0]
            gap = text[tokens[j - 1][2]:tokens[j][1]]
            if any(ch in gap for ch in ",;:()[]\"“”!?") or "\n" in gap:
                break
            previous = tokens[j - 1][0]
            if "." in gap and not (len(previous) == 1 or previous.lower() in _ABBREVIATIONS):
                break  # a sentence ends here ("J. R. R. Tolkien" and "St. Louis" do not)
            if _is_cap(nxt) and nxt.lower() not in CALENDAR:
                end = j
                j += 1
            elif (nxt.lower() in _CONNECTORS and j + 1 < len(tokens)
                  and tokens[j + 1][0][:1].isupper()):
                j += 1
            else:
                break
        phrase = _without_interjections(
            re.sub(r"['’]s$", "", text[tokens[i][1]:tokens[end][2]]).strip(" .,;:'’-"))
        # A lone capitalized word opening a sentence is usually just a sentence opener.
        lone_opener = initial and end == i and (word.lower() in _SENTENCE_STARTERS
                                                or word.lower().endswith("ly"))
        if phrase and not lone_opener:
            phrases.append(phrase)
        i = end + 1
    unique: dict[str, str] = {}
    for phrase in phrases:
        unique.setdefault(_strip_article(fold(phrase)), phrase)
    return tuple(p for key, p in unique.items() if key)


def is_contraction(word: str) -> bool:
    """Whether ``word`` is a contraction ("I'm", "we've", "that's", "don't"); a name's
    possessive ("Fallon's") is none."""
    return bool(_CONTRACTION.fullmatch(word))


def _opening_dropped(words: list[str], contractions: bool) -> list[str]:
    """``words`` without the interjections (and, when ``contractions``, the contractions)
    that open them."""
    at = 0
    while at < len(words) and (words[at].lower().strip("!,.") in _INTERJECTIONS
                               or contractions and is_contraction(words[at])):
        at += 1
    return words[at:]


def without_opening_interjections(phrase: str) -> str:
    """``phrase`` without the interjections and greetings that open it, which the entity model
    sometimes files as (part of) a name: "Woah Joanna" -> "Joanna", "Congrats" -> ""."""
    return " ".join(_opening_dropped(phrase.split(), contractions=False))


def _without_interjections(phrase: str) -> str:
    """``phrase`` without the interjections that open it and the contractions at its ends
    ("Hey Maria" -> "Maria", "Yeah I'm" -> ""); "" when no capitalised word is left."""
    words = _opening_dropped(phrase.split(), contractions=True)
    while words and is_contraction(words[-1]):
        words.pop()
    return " ".join(words) if words and words[0][:1].isupper() else ""


_CONTENT_POS = ("VERB", "NOUN", "ADJ")


def lemmas(text: str) -> set[str]:
    """The lemmas ``text``'s words can have as a verb, noun or adjective ("grew" -> "grow",
    "booked" -> "book"), from lemminflect's tables: no parse, and a word the tables do not
    know adds nothing. Stop words and lemmas under three letters are left out."""
    from lemminflect import getAllLemmas

    out: set[str] = set()
    for word in re.findall(r"[a-z]+", text.lower()):
        found = getAllLemmas(word)
        out.update(lemma for pos in _CONTENT_POS for lemma in found.get(pos, ()))
    return {lemma for lemma in out if len(lemma) >= 3 and lemma not in STOPWORDS}


def _strip_article(folded: str) -> str:
    return folded[4:] if folded.startswith("the ") else folded


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"  # what ``\w`` matches in a str pattern


def occurs_as_words(phrase: str, text: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` with no word character just before or after it:
    ``re.search(rf"(?<!\\w){re.escape(phrase)}(?!\\w)", text)`` without compiling a pattern
    per phrase (the judge checks thousands of distinct phrases per run, past ``re``'s cache
    of 512 patterns: ~11 ms of an auto question, docs/research.md "Where the time goes
    between the searches")."""
    start = text.find(phrase)
    while start >= 0:
        end = start + len(phrase)
        if ((start == 0 or not _is_word_char(text[start - 1]))
                and (end == len(text) or not _is_word_char(text[end]))):
            return True
        start = text.find(phrase, start + 1)
    return False


@lru_cache(maxsize=TEXT_CACHE_SIZE)
def mentioned(entity: str, text: str) -> bool:
    """Whether ``entity`` (or every content word of it) already occurs in ``text`` (cached,
    as `fold`)."""
    entity = without_disambiguation(entity)  # "Kiss and Tell (1945 film)"
    e, t = _strip_article(fold(entity)), fold(text)
    if not e:
        return True
    if occurs_as_words(e, t):
        return True
    words = [w for w in _WORD.findall(e) if w not in STOPWORDS]
    have = set(_WORD.findall(t))
    return bool(words) and all(w in have for w in words)


def key_terms(query: str, drop: Iterable[str] = ()) -> list[str]:
    """The query's content words, in order, without stopwords, question words or ``drop``."""
    dropped = {w for d in drop for w in _WORD.findall(fold(d))}
    out: dict[str, str] = {}
    for word in _TOKEN.findall(query):
        word = re.sub(r"['’]s$", "", word)
        low = fold(word)
        if not low or low in STOPWORDS or low in _FUNCTION_CAPS or low in dropped:
            continue
        out.setdefault(low, word)
    return list(out.values())


_OBJECT_BEFORE = V.OBJECT_BEFORE.words
_I_AGREES = V.FIRST_PERSON_VERBS


def _agree(verb: str) -> str:
    """The first-person form of "has"/"does"/"is", its capital kept."""
    agreed = _I_AGREES[verb.lower()]
    return agreed.capitalize() if verb[:1].isupper() else agreed


def first_person(question: str, names: Iterable[str]) -> str:
    """The question as its subject would word it about themselves: ``names`` (one person)
    become "I"/"me", their possessive "my", and third-person pronouns follow ("What did
    Caroline research?" -> "What did I research?", "What does Melanie do with her kids?" ->
    "What do I do with my kids?"). A speaker's turns tell their facts in the first person."""
    text = question
    for name in sorted({n for n in names if n.strip()}, key=len, reverse=True):
        bare = re.escape(re.sub(r"['’]s$", "", name.strip()))
        text = re.sub(rf"\b{bare}(?:['’]s\b|['’](?!\w))", "my", text)  # "James'" too
        text = re.sub(rf"(\b\w+\s+)?\b{bare}\b",
                      lambda m: (m.group(1) or "") + (
                          "me" if m.group(1) and fold(m.group(1).strip()) in _OBJECT_BEFORE
                          else "I"), text)
    text = re.sub(r"\b(?:she|he)\b", "I", text, flags=re.I)
    text = re.sub(r"\bhis\b", "my", text, flags=re.I)
    text = re.sub(r"\bhim\b", "me", text, flags=re.I)
    # "her": possessive before a word, else an object
    text = re.sub(r"\bher\b(?=\s+(?!to\b|with\b|for\b|about\b|when\b|and\b|in\b|on\b|at\b)\w)",
                  "my", text, flags=re.I)
    text = re.sub(r"\bher\b", "me", text, flags=re.I)
    text = re.sub(r"\b(?:herself|himself)\b", "myself", text, flags=re.I)
    text = re.sub(r"\b(has|does|is) I\b", lambda m: _agree(m.group(1)) + " I", text, flags=re.I)
    text = re.sub(r"\bI (has|does|is)\b", lambda m: "I " + _I_AGREES[m.group(1)], text)
    return text[:1].upper() + text[1:]
