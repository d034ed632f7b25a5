"""Question syntax for the offline planner: comparisons, coordinations, nested relations.

Rules over the surface of an English question (no model): who or what it compares, whether a
relation is reached through another one, and which route that calls for. The measurements
behind each rule are in ``docs/research.md``.
"""

from __future__ import annotations

import re

from memroute.reading.entities import capitalized_phrases, key_terms
from memroute.strategies.split_query import MAX_SUB_QUERIES
from memroute.reading import vocabulary as V

# Words that make a question compare its subjects.
_COMPARATIVE = re.compile(r"\b(" + V.COMPARATIVES.alternation() + r")\b", re.I)
# Words that ask what several subjects share.
_SHARED = re.compile(r"\b(" + V.SHARED.alternation() + r")\b", re.I)
_YES_NO = re.compile(r"^\s*(" + "|".join((V.BE.alternation(), V.DO_HAVE.alternation(),
                                          V.AUXILIARIES_MORE.alternation())) + r")\b", re.I)
# Trailing options: "..., A or B?" / "...: A, B or C".
_OPTIONS = re.compile(r"[,:]\s*(?:the\s+)?([^,:]+?(?:\s*,\s*[^,:]+?)*\s+or\s+[^,:?]+?)\s*\??\s*$",
                      re.I)
_GROUP_GAP = re.compile(r"^\W*\s*(,|and|or|&|,\s*and|,\s*or|nor)?\s*(the)?\s*\W*$", re.I)
_MASK = "SUBJECTX"
# A relative clause after the first word ("the woman who portrayed ...").
_RELATIVE = re.compile(r"(?<!^)\b(" + V.RELATIVE_PRONOUNS.alternation()
                       + r")\s+(?!is\s+(older|younger))", re.I)
# A passive or participial relation ("the film directed by ...", "a band formed in ...").
_PARTICIPLE = re.compile(
    r"\b(\w+(" + V.PARTICIPLE_ENDINGS.alternation() + r"))\s+("
    + V.PARTICIPLE_PREPOSITIONS.alternation() + r")\b", re.I)
# A relation of a named thing: "the director of film X", "the father of X", "X's husband".
_RELATION_NP = re.compile(
    r"\b(" + V.ARTICLES.alternation() + "|" + V.POSSESSIVE_PRONOUNS.alternation()
    + r")\s+(?:[\w-]+\s+){0,3}?(" + V.RELATION_PREPOSITIONS.alternation() + r")\s+"
    r"(?:the\s+|a\s+|an\s+)?(?:(?:" + V.WORK_KINDS.alternation() + r")\s+)?[A-Z\"“'0-9]",
    re.U)
# (the look-behinds follow the possessor's last character: "what's", "when's" are "what is")
_POSSESSIVE = re.compile(
    r"[\w)\"”]" + "".join(rf"(?<!\b{w})" for w in sorted(
        set(V.CONTRACTED.phrases) | V.WH_WORDS.words))
    + r"['’]s\s+(?:[a-z-]+\s+){0,2}?[a-z-]+", re.U | re.I)
_COPULA_START = re.compile(r"^\s*(what|who|which)\s+(" + V.BE.alternation() + r")\s+("
                           + V.ARTICLES.alternation() + r")\b", re.I)
# People and roles a question can reach through a named thing ("the director who died first").
_ROLES = V.ROLES
_ROLE_OF = re.compile(r"\b(" + V.ROLE_OPENERS.alternation() + r")\s+(the|a|an)?\s*\w*\s*(" +
                      "|".join(sorted(_ROLES)) + r")\b", re.I)
# What a question can ask for that is a thing in its own right (its own paragraph), as
# opposed to an attribute the subjects share ("What sport ...", "What kind of ...").
_ENTITY_NOUNS = V.ENTITY_NOUNS
_ATTRIBUTE_NOUNS = V.ATTRIBUTE_NOUNS.words
_DESCRIPTOR = re.compile(r"\b(" + V.DESCRIPTORS.alternation() + rf")\s+(both\s+)?(the\s+)?{_MASK}",
                         re.I)

COMPARISON = "comparison of several subjects"  # a route reason


# a parenthesis right after a name qualifies it ("Hop (Film)", "Paris (Texas)")
_QUALIFIER = re.compile(r"\s*\([^()]{1,40}\)")


def _phrase_spans(query: str) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    cursor = 0
    for phrase in capitalized_phrases(query):
        at = query.find(phrase, cursor)
        if at < 0:
            at = query.find(phrase)
        if at >= 0:
            spans.append((at, at + len(phrase), phrase))
            cursor = at + len(phrase)
    merged: list[tuple[int, int, str]] = []
    for start, end, phrase in sorted(spans):
        if merged and start < merged[-1][1]:
            continue  # inside the qualifier of the name before it
        if qualifier := _QUALIFIER.match(query, end):
            end = qualifier.end()
        merged.append((start, end, query[start:end]))
    return merged


def coordinated_groups(query: str) -> list[tuple[list[str], bool]]:
    """Runs of capitalized phrases joined by ',', 'and', 'or', '&' (a run of commas alone is
    an apposition, "Irving, Texas", not a coordination). Each run comes with whether an
    'or' joins it."""
    groups: list[tuple[list[str], bool]] = []
    current: list[tuple[int, int, str]] = []
    gaps: list[str] = []

    def close() -> None:
        joined = " ".join(gaps).lower()
        if len(current) >= 2 and re.search(r"\b(and|or|nor)\b|&", joined):
            groups.append(([p for _, _, p in current], bool(re.search(r"\bor\b", joined))))

    for span in _phrase_spans(query):
        gap = query[current[-1][1]:span[0]] if current else ""
        if current and _GROUP_GAP.match(gap) and gap.strip(" \"'“”"):
            current.append(span)
            gaps.append(gap)
            continue
        close()
        current, gaps = [span], []
    close()
    return groups


def comparison_subjects(query: str) -> tuple[list[str], bool]:
    """The subjects a comparison or coordination names ([] if fewer than two), and whether
    they are alternatives ("A or B"): trailing options first, else the longest coordinated
    run of capitalized phrases."""
    q = query.strip()
    subjects: list[str] = []
    alternatives = False
    tail = _OPTIONS.search(q)
    if tail:
        parts = re.split(r"\s*,\s*(?:or\s+)?|\s+or\s+", tail.group(1))
        subjects = [re.sub(r"^(the|a|an)\s+", "", p.strip(" ?.\"'“”"), flags=re.I).strip()
                    for p in parts]
        alternatives = True
    if len([s for s in subjects if s]) < 2:
        groups = coordinated_groups(q)
        subjects, alternatives = max(groups, key=lambda g: len(g[0])) if groups else ([], False)
    subjects = [s for s in dict.fromkeys(s.strip() for s in subjects) if len(s) > 1]
    if len(subjects) < 2:
        return [], False
    return subjects[:MAX_SUB_QUERIES], alternatives


def mask_subjects(query: str, subjects: list[str]) -> str:
    """The query with each subject (and any quotes around it) replaced by a placeholder."""
    masked = query
    for subject in sorted(subjects, key=len, reverse=True):
        masked = re.sub(rf"[\"“']?{re.escape(subject)}[\"”']?", _MASK, masked)
    return masked


def has_nested_relation(query: str) -> bool:
    """A relation whose object is itself reached through another relation: a relative
    clause, a passive relation, two relations of named things, or one that the question
    asks something further about ("Where was the director of film X born?")."""
    return bool(nested_relation_words(query))


def nested_relation_words(query: str) -> list[str]:
    """The words that make `has_nested_relation` true (the relative clause's or the
    participle's opening, else each relation of a named thing), [] when it is false: what a
    route's reason names."""
    q = query.strip()

    def whole_words(m: re.Match) -> str:
        start, end = m.start(), m.end()
        while start > 0 and (q[start - 1].isalnum() or q[start - 1] in "'’-"):
            start -= 1
        while end < len(q) and (q[end].isalnum() or q[end] == "-"):
            end += 1
        return q[start:end].strip()

    if m := (_RELATIVE.search(q) or _PARTICIPLE.search(q)):
        return [whole_words(m)]
    # relations of names
    found = [whole_words(m) for m in (*_RELATION_NP.finditer(q), *_POSSESSIVE.finditer(q))]
    if len(found) >= 2 or (len(found) == 1 and not _COPULA_START.search(q)):
        return found
    return []


def asks_for_hidden_entity(query: str, subjects: list[str]) -> bool:
    """Whether a coordination only describes the thing asked for ("Which actor starred in
    both A and B?", "the film starring A, B and C") rather than naming the subjects asked
    about ("What sport do A and B play?")."""
    masked = mask_subjects(query, subjects)
    focus = re.match(r"^\s*(?:(who|whom)\b|(?:which|what)\s+((?:[\w-]+\s+){0,2}[\w-]+))",
                     masked, re.I)
    if focus and focus.group(1):
        return True
    words = {w.lower() for w in re.findall(r"[\w-]+", focus.group(2) or "")} if focus else set()
    if words & _ENTITY_NOUNS and not words & _ATTRIBUTE_NOUNS:
        return True
    return bool(_DESCRIPTOR.search(masked)) and not _SHARED.search(masked)


def route_by_syntax(query: str) -> tuple[str, str]:
    """The route and a short reason (see the module docstring)."""
    subjects, alternatives = comparison_subjects(query)
    nested = has_nested_relation(query)
    if subjects:
        comparative = bool(alternatives or _COMPARATIVE.search(query) or _YES_NO.search(query))
        shared = bool(_SHARED.search(query))
        # something reached through each subject ("Which film has the director who died
        # first, A or B?"): a chain per subject, not a split
        masked = mask_subjects(query, subjects)
        role = _ROLE_OF.search(masked) or (_RELATIVE.search(masked) and {
            w.lower() for w in re.findall(r"[A-Za-z]+", masked)} & _ROLES)
        if role and (comparative or shared):
            return "chain", "compares a role of its subjects (a dependency chain per subject)"
        if comparative:
            return "split", COMPARISON
        if (shared or not nested) and not asks_for_hidden_entity(query, subjects):
            return "split", "coordination of several subjects"
    if nested:
        return "chain", "nested relation"
    if subjects:
        return "chain", "the coordination describes the entity asked for"
    if capitalized_phrases(query):  # something named a chain can start from
        return "chain", "a relation of a named subject: bridge to the entities it leads to"
    return "direct", "nothing named to bridge from"


def subject_sub_queries(query: str) -> list[str]:
    """Each compared subject with the question's content words that are neither subjects
    nor comparison wording ("A founded", "B founded"); [] for fewer than two subjects."""
    subjects, _ = comparison_subjects(query)
    if len(subjects) < 2:
        return []
    relation = " ".join(w for w in key_terms(mask_subjects(query, subjects)) if w != _MASK
                        and not _COMPARATIVE.fullmatch(w) and not _SHARED.fullmatch(w))
    return [f"{s} {relation}".strip() for s in subjects]
