"""A question read with spaCy (dependency parse + NER): ``named`` (its named things: NER
entities other than amounts and dates, and unlabelled proper-noun runs), ``hidden_head`` (a
noun it describes but does not name: "the person who moved to Lisbon", "X's father"),
``predicate`` (the content words outside those, which a bridge query keeps) and ``clauses``
(coordinated clauses with their own subjects, one self-contained question each)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from memroute.nlp import WH_TAGS, entity_key, named_spans, parse
from memroute.reading.entities import STOPWORDS
from memroute.reading import vocabulary as V

# Nouns for a person or place reached through another thing ("the director of X").
PERSON_NOUNS = V.PERSON_NOUNS
PLACE_NOUNS = V.PLACE_NOUNS.words
_CONTENT_POS = frozenset({"NOUN", "VERB", "ADJ", "PROPN", "NUM", "ADV"})


@dataclass(frozen=True)
class QuestionParse:
    text: str
    named: list[str]
    named_keys: frozenset[str]
    hidden_head: str | None
    hidden_reason: str
    predicate: list[str]
    description: list[str] = field(default_factory=list)
    clauses: list[str] = field(default_factory=list)


def _is_named(token, named_tokens: set[int]) -> bool:
    return token.i in named_tokens or token.pos_ == "PROPN"


def _contact_clause(token, named_tokens: set[int]) -> bool:
    """"the dog Tom adopted", "the student Helga Brandt mentors": a role noun, a name, then
    the verb of a relative clause without "who"/"that" (the small model misparses these)."""
    doc = token.doc
    if token.i == 0 or doc[token.i - 1].lower_ not in ("the", "a", "an"):
        return False
    j = token.i + 1
    while j < len(doc) and j in named_tokens:
        j += 1
    return j > token.i + 1 and j < len(doc) and doc[j].tag_ in ("VBD", "VBZ", "VBP", "NNS")


def _hidden_head(doc, named_tokens: set[int]):
    """The described-but-unnamed noun and why, or (None, "")."""
    for token in doc:
        if token.lemma_.lower() in PERSON_NOUNS and token.i not in named_tokens \
                and _contact_clause(token, named_tokens):
            return token, "relative clause"
    for token in doc:
        if token.pos_ not in ("NOUN", "PRON") or _is_named(token, named_tokens):
            continue
        if token.tag_ in WH_TAGS or token.lower_ in V.SUBJECT_PRONOUNS.words:
            continue
        deps = {child.dep_ for child in token.children}
        if "relcl" in deps or ("acl" in deps and token.pos_ == "NOUN"):
            return token, "relative clause"
        lemma = token.lemma_.lower()
        if lemma in PERSON_NOUNS or lemma in PLACE_NOUNS:
            for child in token.children:
                if child.dep_ == "prep" and child.lower_ in V.ROLE_PREPOSITIONS.words \
                        and any(_is_named(t, named_tokens) for t in child.subtree):
                    return token, "a role of a named thing"
                if child.dep_ == "poss" and (_is_named(child, named_tokens)
                                             or child.pos_ == "NOUN"):
                    return token, "a role of a named thing"
            if lemma in PERSON_NOUNS and any(c.lower_ == "the" for c in token.children) \
                    and any(c.dep_ in ("compound", "amod") for c in token.children):
                return token, "a described role" # "the pottery teacher"
    return None, ""


_NEXT_QUESTION = re.compile(r"\s*,?\s+(?:and|but)\s+(?=(?:" + V.WH_WORDS.alternation()
                            + r")\b)", re.I)
_POSSESSIVE_PRONOUN = re.compile(r"\b(" + V.POSSESSIVE_PRONOUNS.alternation() + r")\b", re.I)
_SUBJECT_PRONOUN = re.compile(r"\b(he|she|they)\b", re.I)


def _own_questions(text: str, named: list[str]) -> list[str]:
    """"When is Yasmin's birthday and where will her wedding be held?" -> two questions, a
    pronoun of a later one ("her", "she") resolved to the first question's named subject."""
    parts = [p.strip(" ,;?") for p in _NEXT_QUESTION.split(text.strip())]
    parts = [p for p in parts if len(p.split()) >= 2]
    if len(parts) < 2:
        return []
    subject = next((n for n in named if n in parts[0]), None)
    out = []
    for i, part in enumerate(parts):
        if i and subject and not any(n in part for n in named):
            bare = re.sub(r"['’]s$", "", subject)
            part = _POSSESSIVE_PRONOUN.sub(bare + "'s", part, count=1)
            part = _SUBJECT_PRONOUN.sub(bare, part, count=1)
        out.append(part[:1].upper() + part[1:] + "?")
    return out


def _clauses(doc) -> list[str]:
    """Coordinated clauses with their own subjects, as separate questions (else []): the
    question is cut at each coordinating word that joins the main verb to such a clause."""
    root = next((t for t in doc if t.dep_ == "ROOT"), None)
    if root is None:
        return []
    conjs = [c for c in root.children if c.dep_ == "conj" and c.pos_ in ("VERB", "AUX")
             and any(g.dep_ in ("nsubj", "nsubjpass", "expl") for g in c.children)]
    cuts = sorted(t.i for t in root.children if t.dep_ == "cc" and t.i > root.i)
    if not conjs or not cuts:
        return []
    out, start = [], 0
    for cut in [*cuts, len(doc)]:
        words = doc[start:cut].text.strip(" ,;?")
        if len(words.split()) >= 2:
            out.append(words[:1].upper() + words[1:] + "?")
        start = cut + 1
    return out if len(out) >= 2 else []


def _described(doc, head) -> set[int]:
    """The token indices of the hidden head and its description.

    When the head is the subject right after the question's auxiliary ("Where did the man
    who leads the Accra office study?"), the question's last word (with "love to" before
    "eat") is the main verb and everything between belongs to the description: the small
    model often parses that verb into the relative clause."""
    words = [t for t in doc if not t.is_punct]
    aux = [t for t in doc[max(0, head.i - 4):head.i] if t.pos_ == "AUX"]
    subject_after_aux = bool(aux) and all(t.pos_ in ("DET", "ADJ", "NOUN", "PRON")
                                          for t in doc[aux[-1].i + 1:head.i])
    if subject_after_aux and words and words[-1].i > head.i and all(
            t.tag_ in WH_TAGS or t.pos_ in ("NOUN", "ADJ", "DET") for t in doc[:aux[-1].i]):
        start = words[-1].i
        if doc[start].pos_ == "ADP" and start - 1 > head.i:  # "live in?"
            start -= 1
        if start >= 2 and doc[start - 1].lower_ == "to":
            start -= 2
        if start > head.i:
            return set(range(head.i, start))
    return {t.i for c in head.children if c.dep_ in ("relcl", "acl", "prep", "poss")
            for t in c.subtree} | {head.i}


@lru_cache(maxsize=4096)
def read_question(text: str) -> QuestionParse:
    """The question's parse (cached per text).

    Raises:
        ModelUnavailableError: the spaCy model is not installed.
    """
    doc = parse(text)
    spans = named_spans(doc)
    named_tokens = {t.i for s in spans for t in s}
    named = list(dict.fromkeys(s.text.strip() for s in spans if entity_key(s.text)))
    head, reason = _hidden_head(doc, named_tokens)
    described = _described(doc, head) if head is not None else set()
    # capitalised inside the sentence: part of a name the model split ("Kiss and Tell")
    predicate = [t.text for t in doc if not (t.i and t.text[:1].isupper())
                 and t.pos_ in _CONTENT_POS and t.i not in named_tokens and t.i not in described
                 and t.lower_ not in STOPWORDS and t.tag_ not in WH_TAGS and t.is_alpha]
    description = [t.text for t in doc if t.i in described and t.pos_ in _CONTENT_POS
                   and t.i not in named_tokens and t.lower_ not in STOPWORDS and t.is_alpha]
    return QuestionParse(
        text=text, named=named, named_keys=frozenset(entity_key(n) for n in named),
        hidden_head=None if head is None else head.lemma_.lower(), hidden_reason=reason,
        predicate=list(dict.fromkeys(predicate)), description=list(dict.fromkeys(description)),
        clauses=_own_questions(text, named) or _clauses(doc))
