"""The offline planner's decisions from a parsed question and the entities of the evidence.

- **route**: coordinated clauses with their own subjects, or a comparison/coordination of
  named subjects -> ``split`` (a comparison of exactly two, with ``subjects_after_search``: a chain that
  searches the question first, then the subjects it did not cover, at once); a noun the question
  describes but does not name (a relative clause, a role of a named thing) or a nested
  relation -> ``chain``; one named subject with a direct attribute -> ``attribute_route``
  (``chain`` by default); nothing named -> ``direct``. Each with a confidence.
- **split**: one question per coordinated clause, else one sub-query per named subject with
  the question's relation words.
- **judge** (defaults in `ChainHeuristics`, measured in docs/evaluation.md) reads the
  entities the index stored for each evidence item (`Planner.judge`'s
  ``evidence_entities``; the NER of the text where none are stored). A named subject's
  attribute gets one rewrite, its predicate words alone when most of the top evidence is
  someone's turns (a stored speaker; without stored entities: untitled items), else a
  bridge. A question that names exactly one speaker of the evidence is such an attribute,
  and its rewrite, the question in that speaker's first person (``own_query``), searches
  only that speaker's turns (``own_turns``), then, when it states a full date, the same
  without the date among that speaker's turns of those days (``own_dated_search``); other
  questions get ``bridges`` rewrites, the surface bridge candidates packed into the last one
  (``bridge_from="surface"``), or entities the NER of the evidence vouches for
  (``"entities"``, the hidden slot's type first). With ``first_hop_stop`` /
  ``stop_when_filled`` the chain also stops once the unresolved slot is filled: an evidence
  item mentions what the last query searched together with a predicate word of the question
  and, when the wh-word expects one, an entity of the answer's type. With
  ``bridge_found_stop`` a bridge chain stops after its first rewrite once the first hop
  found facts filed under the question's subject and the bridge's search facts filed under
  the bridge (`bridge_found`), with ``typed_bridge_stop`` (off) also once it found the page
  of a bridge whose type fits the hidden slot (`typed_bridge_found`); ``bridge_per_subject``
  packs one bridge per named title into the first rewrite; with ``one_rewrite_in_sight`` a
  first hop that already holds the bridge's own facts (`bridge_in_sight`) gets one packed
  rewrite. A rewrite only holds words of the question and entities of the evidence.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import replace

from memroute.memory.titles import split_title, without_disambiguation
from memroute.nlp import SPEAKER_LABEL, Entity, entity_key, extract_entities
from memroute.planners.base import EvidenceEntities
from memroute.planners.offline.bridging import (
    BridgeCandidate,
    ChainHeuristics,
    bridge_candidates,
    bridge_query,
    judge_evidence,
)
from memroute.planners.offline.dates import date_window, without_dates
from memroute.planners.offline.entities import (
    STOPWORDS,
    first_person,
    fold,
    key_terms,
    mentioned,
)
from memroute.planners.offline.question_parse import QuestionParse, read_question
from memroute.planners.offline.resolve import NEAR, answered, descriptor, resolve
from memroute.planners.offline.question_syntax import (
    COMPARISON,
    asks_for_hidden_entity,
    comparison_subjects,
    has_nested_relation,
    route_by_syntax,
    subject_sub_queries,
)
from memroute.strategies.base import ChainJudgment, ChainSearch, query_key
from memroute.strategies.split_query import clean_sub_queries

SUFFICIENT = 0.85
# Confidence in a bridge rewrite (not in sufficiency: the chain goes on either way).
BRIDGE_SURE, BRIDGE_UNSURE = 0.75, 0.5
_WORD = re.compile(r"\w+")


def _without_named_possessives(query: str, qp: QuestionParse) -> str:
    """"When is Yasmin's birthday?" -> "When is Yasmin birthday?": a possessive of a named
    subject is its attribute, not a relation to follow."""
    for name in qp.named:
        bare = re.sub(r"['’]s$", "", name)
        query = re.sub(rf"({re.escape(bare)})['’]s\b", r"\1", query)
    return query


def route_by_parse(query: str, attribute_route: str = "direct") -> tuple[str, str, float]:
    """The route, a reason that names what decided it, and a confidence in [0, 1]:
    independent lookups (two questions in one, coordinated or compared subjects) -> split;
    a thing described but not named (`resolve.descriptor`) -> chain, resolved then asked;
    another relation the parse cannot resolve -> chain by expansion; one subject with a
    plain attribute -> ``attribute_route`` (direct); nothing named -> direct."""
    qp = read_question(query)
    if qp.clauses:
        return "split", "two questions in one: " + " | ".join(qp.clauses), 0.9
    route, reason = route_by_syntax(query)
    subjects, _ = comparison_subjects(query)
    described = descriptor(query, qp.named)
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
        return "chain", f"{reason}; expansion searches the entities the evidence leads to", 0.7
    if has_nested_relation(_without_named_possessives(query, qp)):
        return "chain", ("nested relation; expansion searches the entities the evidence "
                         "leads to"), 0.6
    if qp.named:
        names = ", ".join(re.sub(r"['’]s$", "", n) for n in qp.named)
        return (attribute_route, f"a plain attribute of what it names ({names}): nothing "
                                 "to resolve", 0.75)
    return "direct", "nothing described or named to resolve", 0.9


_SINGULAR = {"do": "does", "are": "is", "were": "was", "have": "has", "Do": "Does",
             "Are": "Is", "Were": "Was", "Have": "Has"}
_SHARED_WORDS = re.compile(r"\s+\b(both|each|either|all|also)\b", re.I)


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
    words = before.rstrip().rsplit(" ", 1)
    if len(words) == 2 and words[1] in _SINGULAR:
        before = f"{words[0]} {_SINGULAR[words[1]]} "
    elif len(words) == 1 and words[0] in _SINGULAR:
        before = f"{_SINGULAR[words[0]]} "
    before = _SHARED_WORDS.sub("", before)
    return [re.sub(r"\s+", " ", f"{before}{s}{after}").strip() for s in subjects]


def split_by_parse(query: str) -> list[str]:
    """One question per coordinated clause, else the question once per coordinated
    subject (`whole_sub_questions`), else one sub-query per compared subject."""
    qp = read_question(query)
    if qp.clauses:
        return qp.clauses
    subjects, _ = comparison_subjects(query)
    return whole_sub_questions(query, subjects) or subject_sub_queries(query)


SUBJECTS_AFTER_SEARCH = "the question's own search first, then only the subjects it missed: "


def compared_subjects(query: str) -> list[str]:
    """The two sub-queries of a comparison of two named subjects ("Which was founded first,
    A or B?" -> "A founded", "B founded"), else []: the questions
    `ChainHeuristics.subjects_after_search` searches first and splits only as needed. A
    coordination ("Where do Priya and Jonah live?") asks two facts, not one compared
    attribute, and stays a split: its searches run at once (in a conversation no subject
    is ever covered by the question's search, so a chain would only run them in turn)."""
    route, reason, _ = route_by_parse(query)
    if route != "split" or reason != COMPARISON:
        return []
    subs = clean_sub_queries(query, subject_sub_queries(query))  # as a split would search
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


def _stems(words: list[str]) -> set[str]:
    return {fold(w)[:4] for w in words if len(w) >= 3}  # "stud" for study, studied


def _has_predicate(text: str, stems: set[str]) -> bool:
    """Whether a word of ``text`` starts with a stem ("loves" for "love")."""
    return any(w[:len(s)] == s for w in _WORD.findall(fold(text)) for s in stems)


def _overlap(text: str, stems: set[str]) -> int:
    words = {w for w in _WORD.findall(fold(text))}
    return sum(1 for s in stems if any(w[:len(s)] == s for w in words))


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


def _names(entities: list[Entity], name: str) -> bool:
    """Whether an item's entities (a turn's speaker included) name ``name``."""
    key = entity_key(name)
    return any(e.key == key for e in entities)


def _answers(text: str, entities: list[Entity], anchors: list[str], qp: QuestionParse,
             stems: set[str]) -> bool:
    """Whether an item states the question's predicate about ``anchors`` (named in its text
    or its entities, a turn's speaker included) and holds a new entity of the answer's type
    when the wh-word expects one."""
    if not anchors or not any(mentioned(a, text) or _names(entities, a) for a in anchors):
        return False
    if not _has_predicate(text, stems):
        return False
    known = qp.named_keys | {entity_key(a) for a in anchors}
    return not qp.answer_labels or any(e.label in qp.answer_labels and e.key not in known
                                       for e in entities)


def _titled(evidence: list[str], top: int = 5) -> bool:
    """Whether most of the top items are filed under a title (``"Title: sentence"``)."""
    items = evidence[:top]
    return 2 * sum(split_title(t)[0] is not None for t in items) > len(items)


def _spoken(stored: EvidenceEntities, top: int = 5) -> bool | None:
    """Whether most of the top items are someone's turns (the index stored a speaker for
    them); ``None`` when the index stored nothing for them."""
    items = [s for s in (stored or [])[:top] if s is not None]
    if not items:
        return None
    return 2 * sum(any(e.label == SPEAKER_LABEL for e in s) for s in items) > len(items)


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


def _own_words(query: str, qp: QuestionParse, speaker: str, h: ChainHeuristics) -> list[str]:
    """The words of the search of ``speaker``'s own turns ([] without a speaker). A question
    about one named speaker: what it asks is told in their own turns, whose capitalised
    words ("Thanks", "Wow", the other speaker) are no bridges; searching only those turns
    stands for the name, and every other word of the question stays."""
    if not speaker:
        return []
    names = [*(n for n in qp.named if entity_key(n) == entity_key(speaker)), speaker]
    own_words = key_terms(query, drop=names)
    if own_words and h.own_query == "first_person":
        own_words = [first_person(query, names)]
    return own_words


def first_round_searches(query: str, speakers: list[str],
                         h: ChainHeuristics = ChainHeuristics()) -> list[ChainSearch]:
    """The searches of a speaker's own turns that the judge would send after the question's
    search (its own-turns search and dated twin, `judge_with_entities`), known before it when
    the scope's speakers are (``speakers``, `Memory.speakers`): the question names exactly
    one of them, by the judge's rule (`_subject_speaker`). They then go out beside the
    question's search, in the chain's first round; the judge after it has searched them and
    asks for nothing more. [] without speakers (Wikipedia stores), a named speaker, or with
    ``speakers_first_round``, ``own_turns`` or ``fan_out`` off."""
    if not (speakers and h.speakers_first_round and h.own_turns and h.fan_out):
        return []
    if h.subjects_after_search and compared_subjects(query):
        return []  # the judge searches a comparison's subjects instead
    qp = read_question(query)
    speaker = _subject_speaker([[Entity(s, entity_key(s), SPEAKER_LABEL) for s in speakers]],
                               qp)
    words = " ".join(_own_words(query, qp, speaker, h))
    allowed = h.attribute_rewrites + (h.own_dated_search and date_window(
        query, h.date_pad_days) is not None)
    if not words or allowed < 1 or query_key(words) == query_key(query):
        return []
    searches = [ChainSearch(query=words, producer=speaker)]
    span = date_window(query, h.date_pad_days) if h.own_dated_search else None
    dated = without_dates(words) if span is not None else ""
    if dated and query_key(dated) not in {query_key(words), query_key(query)} and allowed >= 2:
        searches.append(ChainSearch(query=dated, producer=speaker,
                                    produced_after=span[0].isoformat(),
                                    produced_before=span[1].isoformat()))
    return searches


def _spoken_or_untitled(evidence: list[str], stored: EvidenceEntities) -> bool:
    """Whether the top items are turns: by their stored speakers, else by having no title."""
    spoken = _spoken(stored)
    return not _titled(evidence) if spoken is None else spoken


def _support(key: str, entities: list[list[Entity]]) -> float:
    """How strongly the items' entities back an entity: 1/(rank+1) per item naming it."""
    return sum(1 / (i + 1) for i, ents in enumerate(entities) if any(e.key == key for e in ents))


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(fold(text)) if len(w) > 2 and w not in STOPWORDS}


def _clear_bridge(query: str, evidence: list[str], entities: list[list[Entity]], tried: list[str],
                  ratio: float) -> bool:
    """Whether the first hop's best bridge candidate was clearly ahead: the entities stored
    for the first hop's evidence back it at least ``ratio`` times the runner-up, and it
    shares no word with the question."""
    candidates = bridge_candidates(query, evidence, tried)[:2]
    supports = [_support(entity_key(c.entity), entities) for c in candidates]
    if not supports or supports[0] <= 0:
        return False
    # a variant of the question's own subject ("Jimmy Elliott" for "Jimmy Elliot") leads
    # on support alone, but bridges nowhere
    if _content_words(candidates[0].entity) & _content_words(query):
        return False
    return len(supports) == 1 or supports[0] >= ratio * supports[1]


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


def typed_bridge_found(query: str, bridge_query: str, fresh: list[str],
                       kept_entities: list[list[Entity]], slot: frozenset[str],
                       each: list[str] = ()) -> bool:
    """Whether the bridge's search found the bridge's own page and the bridge fills the
    question's hidden slot by type: a ``fresh`` hit is filed under a title that
    ``bridge_query`` names and the question does not, and that title is an entity of the
    first hop's items (``kept_entities``) with a label of ``slot``
    (`QuestionParse.hidden_labels`: a person or organisation for "the director of X").
    ``each``: the bridges of a rewrite that packed one per compared subject
    (`subject_bridges`), each of which needs its page. Unlike `bridge_found` it does not
    need facts filed under the question's own subject. Untitled items (conversation turns)
    never satisfy it."""
    if not slot:
        return False
    typed = {e.key for ents in kept_entities for e in ents if e.label in slot}
    found = {key for title, _ in map(split_title, fresh) if title is not None
             and mentioned(title, bridge_query) and not mentioned(title, query)
             and (key := entity_key(without_disambiguation(title))) in typed}
    if each:
        return all(entity_key(b) in found for b in each)
    return bool(found)


def bridge_in_sight(query: str, evidence: list[str]) -> bool:
    """Whether the first hop already shows where the bridge is: facts are filed under at
    least one title the question names, and for each such title, its facts mention another
    title the evidence holds facts under (that title's own facts came up too). Untitled
    items (conversation turns) never count."""
    titled = [(title, sentence) for text in evidence for title, sentence in
              map(split_title, text.splitlines() or [text]) if title is not None]
    named = {title for title, _ in titled if mentioned(title, query)}
    others = {title for title, _ in titled} - named
    if not named or not others:
        return False
    return all(any(mentioned(other, " \n ".join(s for t, s in titled if t == title))
                   for other in others) for title in named)


def packed_rewrite(query: str, kept: list[str], tried: list[str]) -> bool:
    """Whether the first rewrite (``tried[1]``) searched two or more of the first hop's
    bridge candidates together, as the one rewrite of a bridge in sight does; a single
    bridge (another planner's rewrite, in a cascade) leaves the chain its second rewrite."""
    if len(tried) < 2:
        return False
    return sum(mentioned(c.entity, tried[1])
               for c in bridge_candidates(query, kept, tried[:1])) >= 2


def subject_bridges(query: str, evidence: list[str], tried: list[str],
                    described: set[str], heuristics: ChainHeuristics | None = None,
                    stored: EvidenceEntities = None) -> list[str]:
    """The best bridge of each title the question names, from the items filed under it that
    state the role the question describes (``described``: its stems), if any do ("Which film
    has the director who died later, A or B?": A's director, B's director); ranked by
    ``heuristics.ranking`` when given (`rank_bridges`)."""
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
        if heuristics is None:
            best = bridge_candidates(query, items, [*tried, *bridges])[:1]
        else:
            best = rank_bridges(query, items, [*tried, *bridges], heuristics,
                                None if stored is None else [stored[i] for i in indices])[:1]
        bridges.extend(c.entity for c in best)
    return list(dict.fromkeys(bridges))


def _stem(word: str) -> str:
    """A word's first four letters once a plural, past or -ing ending is cut ("owned",
    "owns" -> "own")."""
    word = fold(word)
    for end in ("ing", "ed", "es", "s"):
        if word.endswith(end) and len(word) - len(end) >= 3:
            word = word[:-len(end)]
            break
    return word[:4]


def _distance(key: str, text: str, stems: set[str]) -> int | None:
    """The fewest words between ``key`` (an entity key) and a word starting with one of
    ``stems`` in one line of ``text``; ``None`` when no line holds both."""
    target = key.split()
    best = None
    for line in text.splitlines():
        words = entity_key(split_title(line)[1]).split()
        starts = [i for i in range(len(words) - len(target) + 1)
                  if words[i:i + len(target)] == target]
        if not starts:
            continue
        hits = [j for j, w in enumerate(words) if any(w.startswith(s) for s in stems)
                and not any(i <= j < i + len(target) for i in starts)]
        for i in starts:
            for j in hits:
                d = i - j if j < i else j - (i + len(target) - 1)
                best = d if best is None else min(best, d)
    return best


def rank_bridges(query: str, evidence: list[str], tried: list[str],
                 heuristics: ChainHeuristics = ChainHeuristics(), stored: EvidenceEntities = None,
                 fresh_from: int | None = None) -> list[BridgeCandidate]:
    """The surface bridge candidates (`bridge_candidates`), reordered by
    ``heuristics.ranking`` with the entities of the items that name each (`BridgeRanking`)."""
    h = heuristics
    candidates = bridge_candidates(query, evidence, tried, fresh_from=fresh_from,
                                   fresh_weight=h.fresh_weight)
    r = h.ranking
    if r.neutral or not candidates:
        return candidates
    qp = read_question(query)
    entities = _item_entities(evidence, stored if stored is not None and len(stored) == len(
        evidence) else None)
    texts = [f" {entity_key(text)} " for text in evidence]
    # "Drive" is vouched for by a fact filed under "Drive (2011 film)"
    titles = {entity_key(without_disambiguation(t)) for t in (
        split_title(line)[0] for text in evidence for line in text.splitlines()) if t}
    subject = [any(e.key in qp.named_keys for e in ents)
               or any(mentioned(n, text) for n in qp.named)
               for text, ents in zip(evidence, entities, strict=True)]
    stems = _stems([*qp.description, *qp.predicate])
    near_stems = {_stem(w) for w in [*qp.description, *qp.predicate] if len(w) >= 3}
    out = []
    for candidate in candidates:
        key = entity_key(candidate.entity)
        items = [i for i, (text, ents) in enumerate(zip(texts, entities, strict=True))
                 if f" {key} " in text or any(e.key == key for e in ents)]
        titled = key in titles
        labels = [e.label for i in items for e in entities[i] if e.key == key]
        label = next((lb for lb in labels if lb != "TITLE"), labels[0] if labels else None)
        factor = 1.0
        if label is None and not titled:
            factor *= r.unvouched
        if titled:
            factor *= r.titled
        if label is not None:
            factor *= r.labels.get(label, 1.0)
            if qp.hidden_labels and label in qp.hidden_labels:
                factor *= r.typed
        if any(subject[i] for i in items):
            factor *= r.subject
        if r.described and stems:
            factor *= 1.0 + r.described * max((_overlap(evidence[i], stems) for i in items),
                                              default=0)
        if r.near and near_stems:
            found = [d for i in items if (d := _distance(key, evidence[i], near_stems))]
            factor *= 1.0 + r.near / min(found) if found else 1.0
        out.append(BridgeCandidate(candidate.entity, candidate.score * factor))
    return sorted(out, key=lambda c: -c.score)


def _packed_subject_bridges(query: str, qp: QuestionParse, kept: list[str], tried: list[str],
                            h: ChainHeuristics, stored: EvidenceEntities) -> list[str]:
    """The bridges the first rewrite packed, one per subject of a comparison of
    alternatives ("the director who died first, A or B?"), as the first hop's judgment chose
    them (`subject_bridges`); [] for any other question (a pack from titles the question
    merely mentions needs none of them in particular)."""
    if not (h.bridge_per_subject and qp.hidden_head and comparison_subjects(query)[1]):
        return []
    bridges = subject_bridges(query, kept, tried[:1], _stems(qp.description),
                              h if h.ranking.subjects else None,
                              None if stored is None else stored[:len(kept)])
    return bridges if len(bridges) >= 2 and all(mentioned(b, tried[1]) for b in bridges) else []


def judge_with_entities(query: str, evidence: list[str], previous_queries: list[str],
                        heuristics: ChainHeuristics = ChainHeuristics(),
                        stored: EvidenceEntities = None) -> ChainJudgment:
    """Sufficient when the unresolved slot is filled; else the next grounded bridge.
    ``stored``: the entity index's entities of each item (else they are parsed from text)."""
    h = heuristics
    if stored is not None and len(stored) != len(evidence):
        stored = None
    qp = read_question(query)
    keep = min(h.keep, len(evidence))
    indices = list(range(keep))
    tried = [q for q in previous_queries if q.strip()]
    subjects = compared_subjects(query) if h.subjects_after_search else []
    if subjects:
        # a comparison searched as a chain: the question's search first, then each subject
        # whose facts it did not bring up (docs/evaluation.md, "Where the searches go")
        left = subjects_missed(query, evidence[:keep], subjects, tried)
        if not left:
            return ChainJudgment(is_sufficient=True, evidence_indices=indices,
                                 confidence=SUFFICIENT,
                                 reason="the question's search covered every compared subject")
        # the subjects are independent: with ``fan_out`` one hop searches them all
        return ChainJudgment(is_sufficient=False, evidence_indices=indices, new_query=left[0],
                             concurrent_searches=[ChainSearch(query=q) for q in left[1:]]
                             if h.fan_out else [],
                             confidence=BRIDGE_SURE,
                             reason="compared subjects the question's search missed")
    rewrites = max(0, len(tried) - 1)
    fresh_from = keep if rewrites else None
    attribute = (bool(qp.named) and not qp.hidden_head
                 and not has_nested_relation(_without_named_possessives(query, qp)))
    speaker = _subject_speaker(stored, qp) if h.own_turns else ""
    own_words = _own_words(query, qp, speaker, h)
    attribute = attribute or bool(own_words)
    # a date the question states: the speaker's turns of those days get one more search
    dated_span = (date_window(query, h.date_pad_days)
                  if own_words and h.own_dated_search else None)
    allowed = (h.attribute_rewrites + (dated_span is not None)) if attribute else h.bridges
    if (h.one_rewrite_in_sight and not attribute and bridge_in_sight(query, evidence[:keep])
            and (rewrites == 0 or packed_rewrite(query, evidence[:keep], tried))):
        allowed = min(allowed, 1)  # its one rewrite packs the best bridges
    if rewrites >= allowed:
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=0.9)
    if (h.bridge_found_stop and not attribute and rewrites == 1
            and bridge_found(query, tried[-1], evidence[:keep], evidence[keep:],
                             bool(qp.hidden_head))):
        # the bridge's own facts came up: the third search, the runner-up bridges, was
        # measured to add a supporting fact on few such questions
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT)
    if (h.typed_bridge_stop and not attribute and rewrites == 1 and qp.hidden_labels
            and typed_bridge_found(query, tried[-1], evidence[keep:],
                                   _item_entities(evidence[:keep], (
                                       stored or [None] * len(evidence))[:keep]),
                                   qp.hidden_labels, _packed_subject_bridges(
                                       query, qp, evidence[:keep], tried, h, stored))):
        # the bridge's page came up and the bridge is of the slot's type
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT)
    if (h.one_bridge_when_clear and not attribute and rewrites == 1
            and _clear_bridge(query, evidence[:keep], _item_entities(evidence[:keep], (
                stored or [None] * len(evidence))[:keep]), tried[:1], h.clear_ratio)):
        # the bridge searched was clearly the first hop's best: its search settles it
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT)
    if rewrites == 0:
        # first hop: filled only when no slot is hidden and a top item answers about the
        # question's named things
        stop = h.first_hop_stop or (h.attribute_hop_stop and attribute)
        anchors = qp.named if not qp.hidden_head and stop else []
        window = range(min(3, len(evidence)))
    elif h.stop_when_filled:
        anchors = [tried[-1]]  # narrowed to the entities it names below
        window = range(len(evidence))
    else:
        anchors, window = [], range(0)
    entities = (_item_entities(evidence, stored) if anchors or h.bridge_from == "entities"
                else [])
    if rewrites and anchors:
        anchors = [e.text for ents in entities for e in ents
                   if mentioned(e.text, tried[-1]) and not mentioned(e.text, query)]
    stems = _stems(qp.predicate or key_terms(query, drop=qp.named))
    if anchors and any(_answers(evidence[i], entities[i], anchors, qp, stems) for i in window):
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT)
    if attribute and (own_words or qp.predicate) and (
            h.attribute_rewrite == "predicate"
            or h.attribute_rewrite == "auto" and _spoken_or_untitled(evidence, stored)):
        # a named subject's attribute: its own facts need not repeat its name (a speaker's
        # turns), so the predicate words are searched alone; facts filed under a title
        # name their subject there, so those get the bridge
        words = " ".join(own_words or qp.predicate)
        searched = {query_key(q) for q in tried}
        dated = without_dates(words) if dated_span is not None else ""
        if query_key(words) not in searched:
            # the dated search does not depend on this one's evidence: with ``fan_out`` one
            # hop sends both
            both = (h.fan_out and dated and query_key(dated) != query_key(words)
                    and rewrites + 2 <= allowed)
            return ChainJudgment(
                is_sufficient=False, evidence_indices=indices, new_query=words,
                confidence=BRIDGE_SURE, producer=speaker,
                reason=f"{speaker}'s own turns" if speaker else "the predicate alone",
                concurrent_searches=[ChainSearch(
                    query=dated, producer=speaker, produced_after=dated_span[0].isoformat(),
                    produced_before=dated_span[1].isoformat())] if both else [])
        if dated and query_key(dated) not in searched:
            # the same, in the speaker's turns of the days the question states
            return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                                 new_query=dated, confidence=BRIDGE_SURE, producer=speaker,
                                 produced_after=dated_span[0].isoformat(),
                                 produced_before=dated_span[1].isoformat())
    if h.bridge_per_subject and rewrites == 0 and qp.hidden_head:
        bridges = subject_bridges(query, evidence[:keep], tried, _stems(qp.description),
                                  h if h.ranking.subjects else None,
                                  None if stored is None else stored[:keep])
        if len(bridges) >= 2:
            words = [w for w in dict.fromkeys([*qp.description, *qp.predicate])
                     if not any(mentioned(w, b) for b in bridges)]
            return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                                 new_query=" ".join([*bridges, *words]), confidence=BRIDGE_UNSURE)
    if h.bridge_from == "surface" and not h.ranking.neutral and (rewrites == 0
                                                                 or h.ranking.later):
        ranked = rank_bridges(query, evidence, tried, h, stored, fresh_from)
        if not ranked:
            return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=0.9)
        last = rewrites + 1 == allowed
        bridge = " ".join(c.entity for c in ranked[:h.pack if last else 1])
        clear = len(ranked) == 1 or ranked[0].score >= 2 * ranked[1].score
        # the runner-ups packed into a second search of the same hop, from this hop's
        # ranking (not after the first bridge's search)
        runner_ups = (" ".join(c.entity for c in ranked[1:1 + h.pack])
                      if h.bridges_at_once and rewrites == 0 and allowed == 2 else "")
        return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                             new_query=bridge_query(query, bridge),
                             concurrent_searches=[ChainSearch(query=bridge_query(
                                 query, runner_ups))] if runner_ups else [],
                             confidence=BRIDGE_SURE if clear else BRIDGE_UNSURE)
    if h.bridge_from == "surface":
        judgment = judge_evidence(query, evidence, previous_queries, replace(h, bridges=allowed))
        if judgment.is_sufficient:
            return judgment
        scores = [c.score for c in bridge_candidates(query, evidence, tried, fresh_from=fresh_from,
                                                     fresh_weight=h.fresh_weight)[:2]]
        clear = len(scores) == 1 or scores[0] >= 2 * scores[1]
        return judgment.model_copy(update={"confidence": BRIDGE_SURE if clear else BRIDGE_UNSURE})
    known = {e.key: e for ents in entities for e in ents}
    described = _stems(qp.description)
    candidates = []
    for candidate in bridge_candidates(query, evidence, tried, fresh_from=fresh_from,
                                       fresh_weight=h.fresh_weight):
        entity = known.get(entity_key(candidate.entity))
        if entity is None:
            continue  # capitalised, but no entity the model or a title vouches for
        boost = 2.0 if qp.hidden_labels and entity.label in qp.hidden_labels else 1.0
        # the filler of the hidden slot is stated with the slot's description
        boost *= 1.0 + max((_overlap(text, described) for text, ents in zip(evidence, entities)
                            if any(e.key == entity.key for e in ents)), default=0)
        typed = bool(qp.hidden_labels) and entity.label in qp.hidden_labels
        candidates.append((candidate.score * boost, entity.text, typed))
    candidates.sort(key=lambda c: -c[0])
    if not candidates:
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=0.9)
    # sure of the bridge: it fills the hidden slot's type, or clearly leads the runner-up
    clear = len(candidates) == 1 or candidates[0][0] >= 2 * candidates[1][0]
    confidence = BRIDGE_SURE if candidates[0][2] or clear else BRIDGE_UNSURE
    last_rewrite = rewrites + 1 == allowed
    bridge = " ".join(c[1] for c in candidates[:h.pack if last_rewrite else h.first_pack])
    words = [w for w in (qp.predicate or key_terms(query, drop=qp.named))
             if not mentioned(w, bridge)]
    return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                         new_query=" ".join([bridge, *words]).strip(), confidence=confidence)


def _resolving_judgment(query: str, evidence: list[str], previous_queries: list[str],
                        stored: EvidenceEntities) -> tuple[ChainJudgment | None, str]:
    """Resolve, then ask (`memroute.planners.offline.resolve`): the question with its
    descriptors replaced by the names the evidence ties to them; sufficient once a sentence
    names the last of them with the question's words. ``(None, why)`` when the question has
    no descriptor or the evidence leaves nothing to resolve or ask: then expansion."""
    qp = read_question(query)
    if descriptor(query, qp.named) is None or compared_subjects(query):
        return None, ""
    indices = list(range(min(ChainHeuristics().keep, len(evidence))))
    entities = _item_entities(evidence, stored)
    res = resolve(query, evidence, entities, qp.named)
    searched = {query_key(q) for q in [query, *previous_queries]}
    if res.bridges:
        bridge = res.bridges[-1][1]
        said = "; ".join(f"'{text}' is {name}" for text, name in res.bridges)
        if res.left is None:
            predicate = key_terms(res.question, drop=[bridge, *qp.named])
            sentence = answered(res.question, bridge, evidence, entities, predicate)
            if sentence:
                return ChainJudgment(
                    is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT,
                    reason=f"{said}; answered: \"{sentence[:160]}\""), ""
        if query_key(res.question) not in searched:
            return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                                 new_query=res.question, confidence=BRIDGE_SURE,
                                 reason=f"resolved {said}: asking about {bridge}"), ""
        if res.left is None:
            # resolved and asked: whether the evidence answers it needs a reader
            return ChainJudgment(
                is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT,
                reason=f"resolved {said} and asked; no sentence names {bridge} with the "
                       "question's words (whether the evidence answers needs a reader)"), ""
    left = res.left
    if left is not None and query_key(left.text) not in searched:
        return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                             new_query=left.text, confidence=BRIDGE_UNSURE,
                             reason=f"no sentence ties a name to '{left.text}' yet: "
                                    "searching for it"), ""
    return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=SUFFICIENT,
                         reason=f"no name within {NEAR} words of '{left.text}' in the evidence: "
                                "nothing left to resolve"), ""


def judge_chain(query: str, evidence: list[str], previous_queries: list[str],
                heuristics: ChainHeuristics = ChainHeuristics(),
                stored: EvidenceEntities = None) -> ChainJudgment:
    """Resolve, then ask (`_resolving_judgment`); else the judgment of
    `judge_with_entities`, whose bridge rewrites are expansion (labelled so)."""
    if stored is not None and len(stored) != len(evidence):
        stored = None
    judgment, why = _resolving_judgment(query, evidence, previous_queries, stored)
    if judgment is not None:
        return judgment
    judgment = judge_with_entities(query, evidence, previous_queries, heuristics, stored)
    if judgment.reason:
        return judgment
    if judgment.is_sufficient:
        return judgment.model_copy(update={"reason": why or "nothing left to search"})
    label = "expansion: the evidence's best entities with the question's words"
    return judgment.model_copy(update={"reason": f"{why}; {label}" if why else label})
