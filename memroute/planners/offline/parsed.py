"""The offline planner's decisions from a parsed question and the entities of the evidence.

- **route** (`route_by_parse`): by the question's structure, each with a reason that names
  what it saw and a confidence.
- **split** (`split_by_parse`): whole sub-questions.
- **judge** (`judge_chain`): resolve, then ask (`resolve`); a comparison's missed subjects;
  a named speaker's own turns; else expansion (`judge_with_entities`), labelled so.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from memroute.memory.titles import split_title, without_disambiguation
from memroute.errors import ModelUnavailableError
from memroute.nlp import SPEAKER_LABEL, Entity, entity_key, extract_entities, parse
from memroute.planners.base import EvidenceEntities, EvidenceTimes
from memroute.planners.offline.bridging import (
    FRESH_WEIGHT,
    BridgeCandidate,
    ChainHeuristics,
    bridge_candidates,
    bridge_query,
)
from memroute.reading.entities import (
    CALENDAR,
    STOPWORDS,
    asks,
    first_person,
    fold,
    key_terms,
    mentioned,
)
from memroute.reading.parse import QuestionParse, read_question
from memroute.reading.descriptors import RELATION_NOUNS, Descriptor, descriptor, whole_chain
from memroute.reading.question import read
from memroute.planners.offline.resolve import GENERIC_NOUNS, NEAR, answered, resolve
from memroute.planners.offline.resolve import _names as _sentence_names
from memroute.planners.offline.resolve import sentences as resolve_sentences
from memroute.planners.offline.question_syntax import (
    COMPARISON,
    asks_for_hidden_entity,
    comparison_subjects,
    nested_relation_words,
    route_by_syntax,
    subject_sub_queries,
)
from memroute.strategies.base import MAX_REASON_CHARS, ChainJudgment, ChainSearch, query_key
from memroute.strategies.split_query import clean_sub_queries
from memroute.time.events import event_span
from memroute.time.expressions import date_window, without_dates
from memroute.time.windows import newest_first
from memroute.reading import vocabulary as V

SUFFICIENT = 0.85
# Confidence in a bridge rewrite (not in sufficiency: the chain goes on either way).
BRIDGE_SURE, BRIDGE_UNSURE = 0.75, 0.5
_WORD = re.compile(r"\w+")


def _without_named_possessives(query: str, qp: QuestionParse) -> str:
    """"When is Yasmin's birthday?" -> "When is Yasmin birthday?": a possessive of a named
    subject (tagged by the parse, or capitalised after the first word: "the Golf's MOT") is
    its attribute, not a relation to follow."""
    for name in qp.named:
        bare = re.sub(r"['’]s$", "", name)
        query = re.sub(rf"({re.escape(bare)})['’]s\b", r"\1", query)
    return re.sub(r"(?<=\s)([A-Z][\w\-]*)['’]s\b", r"\1", query)


_OWNERS = re.compile(r"\b(?P<first>[A-Z][\w\-]*(?:\s+[A-Z][\w\-]*)*)(?P<s>['’]s),?\s+(?:and|&)\s+"
                     r"(?P<second>[A-Z][\w\-]*(?:\s+[A-Z][\w\-]*)*)['’]s\b")


def coordinated_owners(query: str) -> dict[str, str]:
    """Each of two named owners of one relation with its own question ("Who are Mila's and
    Zara's teachers?" -> Mila: "Who are Mila's teachers?", Zara: "Who are Zara's
    teachers?"): two lookups; {} otherwise."""
    m = _OWNERS.search(query)
    if m is None:
        return {}
    return {m.group(name): query[:m.start()] + m.group(name) + m.group("s") + query[m.end():]
            for name in ("first", "second")}


def asking_sentence(query: str) -> str:
    """The one sentence of ``query`` that asks, when its other sentences only say why ("need
    it for a form"); else ``query`` itself. Sentences as the parse reads them ("Dr. Okafor"
    ends none)."""
    try:
        sentences = [s.text.strip() for s in parse(query).sents if s.text.strip()]
    except ModelUnavailableError:
        return query
    asking = [s for s in sentences if s.endswith("?")]
    return asking[0] if len(sentences) > 1 and len(asking) == 1 else query


def route_by_parse(query: str, attribute_route: str = "direct") -> tuple[str, str, float]:
    """The route, a reason that names what decided it, and a confidence in [0, 1]:
    independent lookups (two questions in one, coordinated or compared subjects) -> split;
    a thing described but not named (`memroute.reading.descriptors`) -> chain, resolved then asked;
    another relation the parse cannot resolve -> chain by expansion; one subject with a
    plain attribute -> ``attribute_route`` (direct); nothing named -> direct. Of a question
    with sentences that ask nothing ("What's my address now? Filling in a form for Rhys's
    club"), the sentence that asks decides (`asking_sentence`)."""
    asked = asking_sentence(query)
    if asked != query:
        route, reason, confidence = route_by_parse(asked, attribute_route)
        return route, f"{reason} (of the sentence that asks, '{asked}')", confidence
    reading = read(query)
    qp = reading.parse
    if (event := reading.event) and reading.described is None:
        return ("chain", f"asked {event.relation} an event, '{event.text}': when it was "
                         "bounds the search", 0.8)
    if qp.clauses:
        return "split", "two questions in one: " + " | ".join(qp.clauses), 0.9
    if owners := coordinated_owners(query):
        return "split", f"coordination of several subjects: {', '.join(owners)}", 0.8
    route, reason = route_by_syntax(query)
    subjects, _ = comparison_subjects(query)
    described = reading.described
    if route == "split":
        return "split", f"{reason}: {', '.join(subjects)}", 0.8
    if (subjects and reason == "nested relation" and described is None
            and not asks_for_hidden_entity(query, subjects)):
        return "split", f"coordination of several subjects: {', '.join(subjects)}", 0.75
    if described is not None:
        return ("chain", f"'{described.text}' is described, not named: resolve it, then ask",
                0.85)
    if qp.hidden_head:
        return "chain", (f"{qp.hidden_reason}: '{qp.hidden_head}' is not named; expansion "
                         "searches the entities the evidence leads to"), 0.7
    if route == "chain" and reason != "nested relation" and not reason.startswith("a relation"):
        said = f" ({', '.join(subjects)})" if subjects else ""
        return ("chain", f"{reason}{said}; expansion searches the entities the evidence leads "
                         "to", 0.7)
    if nested := nested_relation_words(_without_named_possessives(query, qp)):
        said = "', '".join(nested)
        return "chain", (f"a nested relation ('{said}'); expansion searches the entities the "
                         "evidence leads to"), 0.6
    if qp.named:
        names = ", ".join(re.sub(r"['’]s$", "", n) for n in qp.named)
        return (attribute_route, f"a plain attribute of what it names ({names}): nothing "
                                 "to resolve", 0.75)
    # a capitalised word after the first, "I" aside: a name the parse did not tag ("When
    # did I adopt Pickles?")
    capitalised = [re.sub(r"['’]s$", "", w) for w in (
        w.strip("?!.,;:\"“”()") for w in query.split()[1:])
        if w[:1].isupper() and not re.fullmatch(r"I(['’]\w+)?", w)
        and fold(re.sub(r"['’]s$", "", w)) not in CALENDAR]
    if capitalised:
        return ("direct", f"a plain attribute of what it names ({', '.join(capitalised)}): "
                          "nothing to resolve", 0.75)
    return "direct", "nothing described or named to resolve", 0.9


_SINGULAR = V.SINGULAR | {k.capitalize(): v.capitalize() for k, v in V.SINGULAR.items()}
_SHARED_WORDS = re.compile(r"\s+\b(" + V.SHARED_DROPPED.alternation() + r")\b", re.I)


def whole_sub_questions(query: str, subjects: list[str]) -> list[str]:
    """The question once per coordinated subject, the coordination replaced by that
    subject ("What do Pepper and Mochi eat?" -> "What does Pepper eat?", "What does Mochi
    eat?"): predicate, constraints and referent kept. [] when the subjects do not stand
    together in the question (trailing options of a comparison)."""
    starts = [query.find(s) for s in subjects]
    if len(subjects) < 2 or min(starts) < 0:
        return []
    first, last = min(starts), max(s + len(n) for s, n in zip(starts, subjects, strict=True))
    joined = query[first:last]
    if not re.search(r"\b(and|or|&)\b|,", joined) or len(joined.split()) > 4 * len(subjects):
        return []
    before, after = query[:first], _SHARED_WORDS.sub("", query[last:])
    if before.rstrip().endswith((",", ":")):
        return []  # trailing options ("..., A or B?"): no question of their own
    words = before.rstrip().rsplit(" ", 1)
    if len(words) == 2 and words[1] in _SINGULAR:
        before = f"{words[0]} {_SINGULAR[words[1]]} "
    elif len(words) == 1 and words[0] in _SINGULAR:
        before = f"{_SINGULAR[words[0]]} "
    before = _SHARED_WORDS.sub("", before)
    return [_asking_which(re.sub(r"\s+", " ", f"{before}{s}{after}").strip())
            for s in subjects]


_SAME = re.compile(r"^(?P<aux>" + V.BE.alternation() + "|" + V.DO_HAVE.alternation()
                   + r")\s+(?P<body>.+?)\s+"
                   r"(?:the\s+)?same\s+(?P<noun>[a-z]+)(?P<tail>[^?]*)\?$", re.I)


def _asking_which(question: str) -> str:
    """A subject's share of "the same" comparison asked as the attribute it compares ("Is
    Ana from the same country?" -> "Which country is Ana from?"); other questions as they
    are."""
    m = _SAME.match(question)
    if m is None:
        return question
    body = re.sub(r",\s+", " ", m["body"]).strip()
    tail = m["tail"].strip(" ,")
    return f"Which {m['noun']} {m['aux'].lower()} {body}{' ' + tail if tail else ''}?"


def split_by_parse(query: str) -> list[str]:
    """One question per coordinated clause, else the question once per coordinated
    subject (`whole_sub_questions`), else one sub-query per compared subject."""
    qp = read(query).parse or read_question(query)
    if qp.clauses:
        return qp.clauses
    if owners := coordinated_owners(query):
        return list(owners.values())
    subjects, _ = comparison_subjects(query)
    return whole_sub_questions(query, subjects) or subject_sub_queries(query)


SUBJECTS_AFTER_SEARCH = "the question's own search first, then only the subjects it missed: "


def compared_subjects(query: str) -> list[str]:
    """The two sub-queries of a comparison of two named subjects ("Which was founded first,
    A or B?" -> "A founded", "B founded"), else []: searched only when the question's own
    search missed their subject (`subjects_missed`). A coordination ("Where do Priya and
    Jonah live?") asks two facts, not one compared attribute, and stays a split: its searches
    run at once (in a conversation no subject is ever covered by the question's search, so a
    chain would only run them in turn)."""
    route, reason, _ = route_by_parse(query)
    if route != "split" or not reason.startswith(COMPARISON):
        return []
    subjects, _ = comparison_subjects(query)
    subs = clean_sub_queries(query, whole_sub_questions(query, subjects)
                             or subject_sub_queries(query))  # as a split would search
    return subs if len(subs) == 2 else []


def subjects_missed(query: str, kept: list[str], subs: list[str],
                    tried: list[str]) -> list[str]:
    """The sub-queries not searched yet whose subject the question's search did not cover.
    A subject is covered by a fact filed under its title (one the question and the sub-query
    name) that names it and says more ("George Andreadis (1936 - 2015) was a Greek
    novelist", not only "He died in 2015."): the page's own statement of what it is, where
    compared attributes are told. Untitled items (conversation turns) cover no subject."""
    covered = {title for text in kept
               for title, sentence in map(split_title, text.splitlines() or [text])
               if title is not None and mentioned(title, query) and mentioned(title, sentence)
               and len(sentence.split()) >= len(title.split()) + 2}
    searched = {query_key(q) for q in tried}
    return [s for s in subs if query_key(s) not in searched
            and not any(mentioned(title, s) for title in covered)]


def _has_predicate(text: str, stems: set[str]) -> bool:
    """Whether a word of ``text`` starts with a stem ("loves" for "love")."""
    return any(w[:len(s)] == s for w in _WORD.findall(fold(text)) for s in stems)


_CACHED_TEXTS = 4096
_entity_cache: OrderedDict[str, list[Entity]] = OrderedDict()


def _evidence_entities(evidence: list[str]) -> list[list[Entity]]:
    """The NER entities of each item (of its sentence part), its stored title first. Items
    seen recently are not parsed again (a chain shows its kept evidence at every hop)."""
    missing = list(dict.fromkeys(t for t in evidence if t not in _entity_cache))
    titled = [split_title(text) for text in missing]
    found = extract_entities([sentence for _, sentence in titled]) if missing else []
    for text, (title, _), entities in zip(missing, titled, found, strict=True):
        head = [Entity(title, entity_key(title), "TITLE")] if title else []
        _entity_cache[text] = head + entities
    for text in evidence:
        _entity_cache.move_to_end(text)
    while len(_entity_cache) > _CACHED_TEXTS:
        _entity_cache.popitem(last=False)
    return [_entity_cache[text] for text in evidence]


def _titled(evidence: list[str], top: int = 5) -> bool:
    """Whether the top items are filed under titles (``"Title: sentence"``), all but one at
    most: a conversation's turns that open with a label ("Change of plan: ...", "Booked:
    ...") are turns, not passages."""
    items = evidence[:top]
    return bool(items) and sum(split_title(t)[0] is not None for t in items) >= max(
        1, len(items) - 1)


def _item_entities(evidence: list[str], stored: EvidenceEntities) -> list[list[Entity]]:
    """Each item's entities: what the index stored for it (its title first when it is filed
    under one), else the NER of its text."""
    stored = stored if stored is not None else [None] * len(evidence)
    missing = [t for t, s in zip(evidence, stored, strict=True) if s is None]
    parsed = dict(zip(missing, _evidence_entities(missing), strict=True)) if missing else {}
    out = []
    for text, entities in zip(evidence, stored, strict=True):
        if entities is None:
            out.append(parsed[text])
            continue
        title = split_title(text)[0]
        head = ([Entity(title, entity_key(title), "TITLE")]
                if title and all(e.key != entity_key(title) for e in entities) else [])
        out.append([*head, *entities])
    return out


def _subject_speaker(stored: EvidenceEntities, qp: QuestionParse) -> str:
    """The speaker, as stored, whom the question names, when it names exactly one (its own
    turns are where its attributes are told); else "". A speaker counts as named by the
    parse's names or by the name as a whole word of the question: the small model's names
    can swallow a neighbour ("John taken" in "What test has John taken ...?")."""
    speakers = {e.key: e.text for ents in stored or [] for e in ents or []
                if e.label == SPEAKER_LABEL and (
                    e.key in qp.named_keys
                    or re.search(rf"(?<!\w){re.escape(e.text)}(?!\w)", qp.text))}
    return next(iter(speakers.values())) if len(speakers) == 1 else ""


def _own_words(query: str, qp: QuestionParse, speaker: str) -> str:
    """The search of ``speaker``'s own turns ("" without a speaker): the question as the
    speaker would ask it ("What did I research?"). What a named speaker is asked about is
    told in their own turns, whose capitalised words ("Thanks", the other speaker) are no
    bridges; searching only those turns stands for the name."""
    if not speaker:
        return ""
    names = [*(n for n in qp.named if entity_key(n) == entity_key(speaker)), speaker]
    return first_person(query, names) if key_terms(query, drop=names) else ""


def _own_searches(query: str, qp: QuestionParse, speaker: str,
                  h: ChainHeuristics) -> list[ChainSearch]:
    """A named speaker's own-turns search, and its dated twin when the question states a full
    date (the same words without the date, among that speaker's turns of those days)."""
    words = _own_words(query, qp, speaker)
    if not words or query_key(words) == query_key(query):
        return []
    searches = [ChainSearch(query=words, producer=speaker)]
    span = date_window(query, h.date_pad_days) if h.date_pad_days else None
    dated = without_dates(words) if span is not None else ""
    if dated and query_key(dated) not in {query_key(words), query_key(query)}:
        searches.append(ChainSearch(query=dated, producer=speaker,
                                    produced_after=span[0].isoformat(),
                                    produced_before=span[1].isoformat()))
    return searches


def first_round_searches(query: str, speakers: list[str],
                         h: ChainHeuristics = ChainHeuristics()) -> list[ChainSearch]:
    """The searches that go out beside the question's own, at once, when the scope's
    speakers are known (``speakers``, `Memory.speakers`) and the question names exactly one
    of them (`_subject_speaker`): that speaker's own turns, and their dated twin. [] without
    speakers, for a comparison (its subjects are searched instead) or with ``own_turns`` off."""
    if not (speakers and h.own_turns) or compared_subjects(query):
        return []
    qp = read(query).parse or read_question(query)
    speaker = _subject_speaker([[Entity(s, entity_key(s), SPEAKER_LABEL) for s in speakers]],
                               qp)
    return _own_searches(query, qp, speaker, h)


def bridge_found(query: str, bridge_query: str, kept: list[str], fresh: list[str],
                 role_of_each: bool) -> bool:
    """Whether the bridge's search settled the question: the first hop's ``kept`` items hold
    facts filed under a title the question names, and a ``fresh`` hit is filed under the
    bridge (a title ``bridge_query`` names and the question does not; untitled items, such
    as turns, never are). When ``role_of_each`` (a described role, e.g. "the director") and
    the question names two or more of those titles, each needs its own bridge found."""
    named = {title for title, _ in map(split_title, kept)
             if title is not None and mentioned(title, query)}
    found = {title for title, _ in map(split_title, fresh)
             if title is not None and mentioned(title, bridge_query)
             and not mentioned(title, query)}
    if not named or not found:
        return False
    return len(found) >= (len(named) if role_of_each and len(named) >= 2 else 1)


def subject_bridges(query: str, evidence: list[str], tried: list[str],
                    described: set[str], heuristics: ChainHeuristics,
                    stored: EvidenceEntities = None) -> list[str]:
    """The best bridge of each title the question names, from the items filed under it that
    state the role the question describes (``described``: its stems), if any do ("Which film
    has the director who died later, A or B?": A's director, B's director), ranked by
    `rank_bridges`."""
    stored = stored if stored is not None and len(stored) == len(evidence) else None
    by_title: dict[str, list[int]] = {}
    for i, text in enumerate(evidence):
        title = split_title(text)[0]
        if title is not None and mentioned(title, query):
            by_title.setdefault(title, []).append(i)
    bridges: list[str] = []
    for indices in by_title.values():
        indices = [i for i in indices if _has_predicate(evidence[i], described)] or indices
        items = [evidence[i] for i in indices]
        best = rank_bridges(query, items, [*tried, *bridges], heuristics,
                            None if stored is None else [stored[i] for i in indices])[:1]
        bridges.extend(c.entity for c in best)
    return list(dict.fromkeys(bridges))


def rank_bridges(query: str, evidence: list[str], tried: list[str],
                 heuristics: ChainHeuristics = ChainHeuristics(),
                 stored: EvidenceEntities = None) -> list[BridgeCandidate]:
    """The surface bridge candidates (`bridge_candidates`), a capitalised word that no
    entity or title of the items naming it vouches for weighted ``heuristics.unvouched``."""
    h = heuristics
    candidates = bridge_candidates(query, evidence, tried)
    if h.unvouched == 1.0 or not candidates:
        return candidates
    entities = _item_entities(evidence, stored if stored is not None and len(stored) == len(
        evidence) else None)
    texts = [f" {entity_key(text)} " for text in evidence]
    # "Drive" is vouched for by a fact filed under "Drive (2011 film)"
    titles = {entity_key(without_disambiguation(t)) for t in (
        split_title(line)[0] for text in evidence for line in text.splitlines()) if t}
    out = []
    for candidate in candidates:
        key = entity_key(candidate.entity)
        vouched = key in titles or any(
            e.key == key for text, ents in zip(texts, entities, strict=True)
            if f" {key} " in text or any(x.key == key for x in ents) for e in ents)
        out.append(BridgeCandidate(candidate.entity,
                                   candidate.score * (1.0 if vouched else h.unvouched)))
    return sorted(out, key=lambda c: -c.score)


def tied_name(query: str, qp: QuestionParse, evidence: list[str], stored: EvidenceEntities,
              tried: list[str]) -> tuple[str, str]:
    """The first name (best-ranked item first) of a statement that also holds a content
    word of the question, which neither the question nor an earlier query names, and the
    sentence; ("", "") if none. Names are stored entities and capitalised phrases that do
    not open a sentence: never an interjection, a greeting or a sentence's first word
    ("Wonderful", "Booked", "Done")."""
    words = {fold(w)[:5] for w in [*qp.predicate, *qp.description, *key_terms(query)]
             if len(w) >= 3}
    seen = " \n ".join([query, *tried])
    entities = _item_entities(evidence, stored)
    for text, ents in zip(evidence, entities, strict=True):
        for sentence in resolve_sentences(text):
            if asks(sentence):
                continue
            if not words & {w[:5] for w in fold(sentence).split()}:
                continue
            for name in names_of(sentence, ents):
                if len(fold(name)) >= 3 and fold(name) not in STOPWORDS \
                        and not mentioned(name, seen):
                    return name, sentence
    return "", ""


def _tied_name_judgment(query: str, qp: QuestionParse, evidence: list[str],
                        stored: EvidenceEntities, tried: list[str], indices: list[int],
                        rewrites: int) -> ChainJudgment:
    """Expansion over a conversation: one search of a name a statement ties to the
    question's words, with those words (`bridge_query`: never the name alone); sufficient
    when there is none (or it was searched)."""
    name, sentence = tied_name(query, qp, evidence, stored, tried) if rewrites == 0 else ("", "")
    if not name:
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=0.9,
                             reason="no name in the evidence is tied to the question's words "
                                    f"({_asked_words(query)})" if rewrites == 0
                             else f"the name the evidence ties to it searched: \"{tried[-1]}\"")
    return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                         new_query=bridge_query(query, name), confidence=BRIDGE_UNSURE,
                         reason=f"expansion: {name}, named in \"{sentence[:120]}\"")


def _asked_words(query: str) -> str:
    """The question's own words a hop looked for, as its reason names them ("address, form")."""
    return ", ".join(key_terms(query)) or query


def judge_with_entities(query: str, evidence: list[str], previous_queries: list[str],
                        heuristics: ChainHeuristics = ChainHeuristics(),
                        stored: EvidenceEntities = None) -> ChainJudgment:
    """The chain's judgment when the question has nothing to resolve (`judge_chain` tries
    that first): a comparison's missed subjects; a named speaker's own turns; else
    expansion, the evidence's best untried entities with the question's words.
    ``stored``: the entity index's entities of each item (else they are parsed from text)."""
    h = heuristics
    if stored is not None and len(stored) != len(evidence):
        stored = None
    qp = read(query).parse or read_question(query)
    keep = min(h.keep, len(evidence))
    indices = list(range(keep))
    tried = [q for q in previous_queries if q.strip()]
    subjects = compared_subjects(query)
    if subjects:
        # a comparison searched as a chain: the question's search first, then each subject
        # whose facts it did not bring up, at once
        left = subjects_missed(query, evidence[:keep], subjects, tried)
        if not left:
            return ChainJudgment(is_sufficient=True, evidence_indices=indices,
                                 confidence=SUFFICIENT,
                                 reason="the question's search covered every compared "
                                        f"subject: {', '.join(subjects)}")
        return ChainJudgment(is_sufficient=False, evidence_indices=indices, new_query=left[0],
                             concurrent_searches=[ChainSearch(query=q) for q in left[1:]],
                             confidence=BRIDGE_SURE,
                             reason="compared subjects the question's search missed: "
                                    f"{', '.join(left)}")
    rewrites = max(0, len(tried) - 1)
    speaker = _subject_speaker(stored, qp) if h.own_turns else ""
    own = _own_searches(query, qp, speaker, h)
    searched = {query_key(q) for q in tried}
    own = [s for s in own if query_key(s.query) not in searched]
    if own:
        return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                             new_query=own[0].query, producer=speaker,
                             produced_after=own[0].produced_after,
                             produced_before=own[0].produced_before,
                             concurrent_searches=own[1:], confidence=BRIDGE_SURE,
                             reason=f"{speaker}'s own turns")
    if speaker:
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=0.9,
                             reason=f"{speaker}'s own turns searched")
    if rewrites >= h.expansions:
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=0.9,
                             reason=f"{h.expansions} expansions searched: "
                                    + ", ".join(f'"{q}"' for q in tried[1:]))
    if not _titled(evidence):
        # a conversation: expansion adds only a name the evidence ties to the question
        return _tied_name_judgment(query, qp, evidence, stored, tried, indices, rewrites)
    if rewrites == 1 and bridge_found(query, tried[-1], evidence[:keep], evidence[keep:],
                                      bool(qp.hidden_head)):
        # the expanded entity's own facts (filed under its title) came up
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT,
                             reason=f"the expanded entity's own facts came up: \"{tried[-1]}\"")
    if rewrites == 0 and qp.hidden_head:
        # a role compared across subjects ("the director of A or of B"): each one's entity
        described = {fold(w)[:4] for w in qp.description if len(w) >= 3}  # "stud": studied
        bridges = subject_bridges(query, evidence[:keep], tried, described, h,
                                  None if stored is None else stored[:keep])
        if len(bridges) >= 2:
            words = [w for w in dict.fromkeys([*qp.description, *qp.predicate])
                     if not any(mentioned(w, b) for b in bridges)]
            return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                                 new_query=" ".join([*bridges, *words]),
                                 confidence=BRIDGE_UNSURE,
                                 reason=f"expansion: one entity per subject ({', '.join(bridges)})")
    # expansion: the first ranks the question's hits; a later one the kept hits, then the
    # latest search's new ones (weighted `FRESH_WEIGHT`)
    ranked = (rank_bridges(query, evidence, tried, h, stored) if rewrites == 0 else
              bridge_candidates(query, evidence, tried, fresh_from=keep,
                                fresh_weight=FRESH_WEIGHT))
    if not ranked:
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=0.9,
                             reason=f"no entity in the evidence to expand for "
                                    f"{_asked_words(query)}" if rewrites == 0
                             else f"no untried entity left to expand after \"{tried[-1]}\"")
    last = rewrites + 1 == h.expansions
    bridge = " ".join(c.entity for c in ranked[:h.pack if last else 1])
    clear = len(ranked) == 1 or ranked[0].score >= 2 * ranked[1].score
    return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                         new_query=bridge_query(query, bridge),
                         confidence=BRIDGE_SURE if clear else BRIDGE_UNSURE,
                         reason=f"expansion: {bridge} with the question's words")


_NOT_PEOPLE = V.NOT_PEOPLE


def who_is(question: str, left: Descriptor) -> str:
    """The question that asks for a description the evidence has not tied to a name yet,
    whole ("Where does my wife's sister work?" -> "Who is my wife's sister?"): a bare
    description ("my wife") is never searched alone."""
    d = (whole_chain(question, left) if left.owner else None) or left
    text = d.text.strip()
    if not text:
        return ""
    if not (d.owner and d.owner != "my" and text.startswith(d.owner)):
        text = text[:1].lower() + text[1:]  # "My sister" mid-question; a name keeps its case
    if d.noun in _NOT_PEOPLE:
        return f"What is {text} called?"
    single = d.noun[:-1] if d.noun.endswith("s") and d.noun[:-1] in RELATION_NOUNS else d.noun
    person = single in RELATION_NOUNS | GENERIC_NOUNS or single.endswith(("er", "or", "ist"))
    return f"{'Who' if person else 'What'} {'are' if single != d.noun else 'is'} {text}?"


def _resolving_judgment(query: str, evidence: list[str], previous_queries: list[str],
                        stored: EvidenceEntities,
                        times: EvidenceTimes = None) -> ChainJudgment | None:
    """Resolve, then ask (`memroute.planners.offline.resolve`): the question with its
    descriptors replaced by the names the evidence ties to them; sufficient once a sentence
    names the last of them with the question's words. None when the question has no
    descriptor, or over titled passages when the evidence names nothing for it: then
    expansion."""
    reading = read(query)
    qp = reading.parse
    if reading.described is None or compared_subjects(query):
        return None
    indices = list(range(min(ChainHeuristics().keep, len(evidence))))
    entities = _item_entities(evidence, stored)
    res = resolve(query, evidence, entities, qp.named)
    searched = {query_key(q) for q in [query, *previous_queries]}
    if res.bridges:
        bridge = res.bridges[-1][1]
        said = "; ".join(f"'{text}' is {name}" for text, name in res.bridges)
        if res.left is None:
            predicate = key_terms(res.question, drop=[bridge, *qp.named])
            sentence, at = answered(res.question, bridge, evidence, entities, predicate,
                                    newest_first(times) if reading.asks_now else None)
            if sentence:
                return ChainJudgment(
                    is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT,
                    answer_index=at, reason=f"{said}; answered: \"{sentence[:160]}\"")
        if query_key(res.question) not in searched:
            return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                                 new_query=res.question, confidence=BRIDGE_SURE,
                                 reason=f"resolved: {said}; asking about {bridge}")
        if res.left is None:
            # resolved and asked, not answered in so many words: over a conversation, one
            # search of a name a statement ties to the resolved question ("Booked: Dr. Brandt
            # at Beacon Dental" for "the practice of Dr. Felix Brandt"); else a reader decides
            asked_only = searched <= {query_key(query), query_key(res.question)}
            name, sentence = tied_name(res.question, read_question(res.question), evidence,
                                       stored, [query, *previous_queries]) \
                if asked_only and not _titled(evidence) else ("", "")
            if name:
                return ChainJudgment(
                    is_sufficient=False, evidence_indices=indices,
                    new_query=bridge_query(res.question, name),
                    confidence=BRIDGE_UNSURE,
                    reason=f"resolved: {said}; no sentence names {bridge} with the question's "
                           f"words: searching {name}, named in \"{sentence[:120]}\"")
            return ChainJudgment(
                is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT,
                reason=f"resolved: {said}; asked, but no sentence names {bridge} with the "
                       "question's words (whether the evidence answers needs a reader)")
    left = res.left
    if left is not None and _titled(evidence):
        # passages filed under titles: the described thing's page is reached by expanding
        # the entities the evidence names, not by searching the description again (no new
        # query here: `judge_chain` expands, and says why)
        return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                             reason=f"no sentence ties a name to '{left.text[:160]}' yet, and over "
                                    "titled passages its page is reached by expanding the "
                                    "entities the evidence names")
    asked = who_is(res.question, left) if left is not None else ""
    if asked and query_key(asked) not in searched:
        return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                             new_query=asked, confidence=BRIDGE_UNSURE,
                             reason=f"no sentence ties a name to '{left.text[:160]}' yet: "
                                    f"asking \"{asked}\"")
    return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT,
                         reason=f"no name within {NEAR} words of '{left.text[:160]}' in the "
                                "evidence: nothing left to resolve")


def _event_judgment(query: str, evidence: list[str], previous_queries: list[str],
                    stored: EvidenceEntities, times: EvidenceTimes) -> ChainJudgment | None:
    """A question asked around an event ("before my trip to Norway"): once the evidence
    dates the event, the question searched again within the window its relation asks about;
    sufficient once that search is done. None without an event, or while nothing dates it."""
    event = read(query).event
    if event is None or not times or len(times) != len(evidence) or _titled(evidence) \
            or read(query).described is not None:
        return None
    indices = list(range(min(ChainHeuristics().keep, len(evidence))))
    if [query_key(q) for q in previous_queries].count(query_key(query)) >= 2:
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT,
                             reason=f"searched {event.relation} '{event.text}'")
    span = event_span(event, evidence, list(times), stored)
    if span is None:
        return None
    return ChainJudgment(is_sufficient=False, evidence_indices=indices, new_query=query,
                         produced_after="" if span.after is None else span.after.isoformat(),
                         produced_before="" if span.before is None else span.before.isoformat(),
                         confidence=BRIDGE_SURE, reason=span.said(event)[:MAX_REASON_CHARS])


def judge_chain(query: str, evidence: list[str], previous_queries: list[str],
                heuristics: ChainHeuristics = ChainHeuristics(),
                stored: EvidenceEntities = None, times: EvidenceTimes = None) -> ChainJudgment:
    """An event's window (`_event_judgment`); resolve, then ask (`_resolving_judgment`);
    else the judgment of `judge_with_entities`, whose bridge rewrites are expansion
    (labelled so). Over passages filed under titles, expansion also follows a resolution
    that stopped. ``times``: when each item was produced (a later statement of the same
    thing answers a question about now)."""
    if stored is not None and len(stored) != len(evidence):
        stored = None
    if times is not None and len(times) != len(evidence):
        times = None
    timed = _event_judgment(query, evidence, previous_queries, stored, times)
    if timed is not None:
        return timed
    judgment = _resolving_judgment(query, evidence, previous_queries, stored, times)
    # unresolved over titled passages: the resolution defers to expansion (no query of its own)
    defers = judgment is not None and not judgment.is_sufficient and not judgment.new_query
    if judgment is not None and not defers and not (judgment.is_sufficient
                                                    and _titled(evidence)):
        return judgment
    expanded = judge_with_entities(query, evidence, previous_queries, heuristics, stored)
    if judgment is None:
        return expanded
    # passages filed under titles: the entities the evidence names have pages of their own,
    # which expansion fetches (after the resolution, while expansions are left)
    if expanded.is_sufficient and not defers:
        return judgment
    reason = f"{judgment.reason}; {expanded.reason}"[:MAX_REASON_CHARS]
    return expanded.model_copy(update={"reason": reason})


def names_of(sentence: str, entities: list[Entity]) -> list[str]:
    """The names of a statement, by `resolve`'s rule: its stored entities (no dates or
    amounts) and the capitalised phrases that do not open it."""
    return _sentence_names(sentence, entities, None)
