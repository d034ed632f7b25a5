"""Entity bridging for the offline ChainOfQuery judge: which entity of the evidence to
search next, and the grounded rewrite that searches it."""

from __future__ import annotations

from dataclasses import dataclass, field

from memroute.memory.titles import split_title
from memroute.strategies.base import ChainJudgment
from memroute.planners.offline.entities import (
    capitalized_phrases,
    fold,
    key_terms,
    mentioned,
)

_DEMONYMS = frozenset(
    """american british english french german italian spanish russian chinese japanese korean
    indian canadian australian irish scottish welsh dutch swedish norwegian danish finnish
    polish greek turkish mexican brazilian argentine austrian swiss belgian portuguese
    hungarian czech israeli egyptian african european asian soviet roman latin new christian
    catholic jewish muslim democratic republican""".split()
)


@dataclass
class BridgeCandidate:
    entity: str
    score: float


def bridge_candidates(query: str, evidence: list[str], tried: list[str], *,
                      anchor_boost: float = 2.0, title_weight: float = 1.0,
                      decay: float = 1.0, fresh_from: int | None = None,
                      fresh_weight: float = 1.0) -> list[BridgeCandidate]:
    """Entities of the evidence that the question and earlier queries do not name, best first.

    An evidence item at rank r adds 1/(r+1)^decay to each of its phrases (times
    ``anchor_boost`` when its title is named by the question: a fact about the question's own
    subject points to the bridge) and ``title_weight`` times that to its title when the
    question does not name it. A lone surname ("Musschenbroek") counts for the full name
    it ends ("Pieter van Musschenbroek") when both occur.
    """
    scores: dict[str, float] = {}
    surface: dict[str, str] = {}
    seen_in = " \n ".join([query, *tried])

    def add(entity: str, weight: float) -> None:
        key = fold(entity)
        if (len(key) < 3 or key in _DEMONYMS or key.isdigit() or mentioned(entity, seen_in)):
            return
        scores[key] = scores.get(key, 0.0) + weight
        surface.setdefault(key, entity)

    for index, text in enumerate(evidence):
        fresh = fresh_from is not None and index >= fresh_from
        rank = index - fresh_from if fresh else index
        for line in text.splitlines() or [text]:
            title, sentence = split_title(line)
            weight = (fresh_weight if fresh else 1.0) / (rank + 1) ** decay
            anchored = title is not None and mentioned(title, query)
            if title is not None and not anchored:
                add(title, weight * title_weight)
            for phrase in capitalized_phrases(sentence):
                if title is not None and fold(phrase) == fold(title):
                    continue
                add(phrase, weight * (anchor_boost if anchored else 1.0))
    for key in [k for k in scores if " " not in k]:
        longer = [k for k in scores if k.endswith(" " + key)]
        if len(longer) == 1:
            scores[longer[0]] += scores.pop(key)
    ranked = sorted(scores, key=lambda k: -scores[k])
    return [BridgeCandidate(surface[k], scores[k]) for k in ranked]


def bridge_query(query: str, entity: str) -> str:
    """The bridge entity plus the question's relation words (named entities left out: the
    first hop already searched them)."""
    named = capitalized_phrases(query)
    words = [w for w in key_terms(query, drop=named) if not mentioned(w, entity)]
    return " ".join([entity, *words]).strip()


@dataclass(frozen=True)
class BridgeRanking:
    """How the parse-based judge reorders the surface bridge candidates with the entities of
    the evidence (stored by the index, else parsed). A candidate's score is multiplied by
    ``unvouched`` when no entity or title of the items naming it has its key (a capitalised
    word such as "Federal"), by ``titled`` when it is the title of an evidence item, by
    ``typed`` when its entity's label fits the hidden slot (`QuestionParse.hidden_labels`),
    by ``labels[label]`` for its entity's label, by ``subject`` when an item naming it also
    names the question's subject, by 1 + ``described`` x the question's description and
    predicate words its items state, and by 1 + ``near`` / d, d the fewest words between it
    and one of those words in a sentence ("owned by Accolade Wines": 1). Every factor 1
    (``described`` and ``near`` 0) keeps the surface order. Only the first rewrite's
    candidates are reordered unless ``later``; with ``subjects`` the first rewrite's bridge
    per compared subject (`ChainHeuristics.bridge_per_subject`) is chosen in this order too.
    Measured in docs/evaluation.md ("The first bridge"); ``unvouched=0.3`` and ``subjects``
    are the defaults of `ChainHeuristics.ranking`."""

    unvouched: float = 1.0
    titled: float = 1.0
    typed: float = 1.0
    labels: dict[str, float] = field(default_factory=dict)
    subject: float = 1.0
    described: float = 0.0
    near: float = 0.0
    later: bool = False
    subjects: bool = False

    @property
    def neutral(self) -> bool:
        """Whether it keeps the surface order."""
        return (self.unvouched == self.titled == self.typed == self.subject == 1.0
                and not self.described and not self.near
                and all(w == 1.0 for w in self.labels.values()))


@dataclass(frozen=True)
class ChainHeuristics:
    """How the offline judge bridges (defaults measured on the development data).

    ``bridges``: rewrites per question (the graph's default three hops allow two);
    ``keep``: evidence items selected per hop; ``fresh_weight``: weight of the latest hop's
    new hits against the runner-up entities of earlier hops; ``pack``: entities searched
    together by the last rewrite; ``first_pack``: by the first one (parse-based judge only);
    ``first_hop_stop``: whether the parse-based judge may find the first hop sufficient;
    ``stop_when_filled``: whether it may stop once a bridge hop filled the slot (else it
    uses its rewrites); ``attribute_rewrites``: rewrites (parse-based judge) for a question
    about a named subject's direct attribute (no hidden slot, no nested relation);
    ``attribute_rewrite``: what that rewrite searches, ``"bridge"`` (an entity of the
    evidence plus the predicate words), ``"predicate"`` (the predicate words alone) or
    ``"auto"`` (the predicate alone unless most top items are filed under a title);
    ``bridge_from`` (parse-based judge): bridge entities vouched for by the NER of the
    evidence (``"entities"``) or the surface candidates of `judge_evidence` (``"surface"``);
    ``attribute_hop_stop``: whether an attribute question may stop after its first search
    when a top item answers it (about the subject, by its text or its stored speaker);
    ``one_bridge_when_clear``: whether a bridge question stops after its first rewrite when
    that bridge was clearly the first hop's best (its stored-entity support at least
    ``clear_ratio`` times the runner-up's); ``own_turns``: whether a question naming exactly one
    speaker of the evidence (by its stored speakers) is judged as that speaker's attribute,
    its rewrite searching only that speaker's turns; ``own_query``: that rewrite's words,
    ``"first_person"`` (the question as the speaker would say it: "What did I research?") or
    ``"key_terms"`` (the question's content words without the name: "research"); first
    person was measured better on every LoCoMo question type, on the conversations tuned on
    and on those not (docs/evaluation.md, "LoCoMo multi-hop on conversations not tuned on");
    ``own_dated_search``: whether such a question that states a full date ("on 3 May, 2023",
    "in October 2023") gets one more search, its rewrite without the date among that
    speaker's turns of those days, ``date_pad_days`` either side (`dates.date_window`);
    its hits share the top k with the undated search's, rank by rank (measured in
    docs/evaluation.md, "LoCoMo multi-hop on conversations not tuned on");
    ``bridge_found_stop``:
    whether a bridge question stops after its first rewrite when that search brought up the
    bridge's own facts (a new item filed under the bridge's title); on since the final
    scorer rescues second-hop facts from the pool: searches per auto question HotpotQA 300
    2.61 -> 2.48, all 800 2.55 -> 2.39, 2Wiki 2.59 -> 2.39, MuSiQue 2.96 -> 2.78, recall
    -0.06 / -0.26 / 0.0 / -0.16 points, LoCoMo identical (docs/evaluation.md, "Fewer
    searches after the better final scorer"); ``typed_bridge_stop`` (off): whether a bridge
    question also stops after its first rewrite when that search found the page of a bridge
    whose entity fits the question's hidden slot by type (`parsed.typed_bridge_found`, the
    issue's "new entity of the expected type"; a comparison of alternatives needs each
    subject's bridge), with or without facts filed under the question's subject; off: it
    saves 0.02 / 0.02 / 0.09 / 0.03 searches per auto question (HotpotQA 300 / 2Wiki /
    MuSiQue / HotpotQA 800) for -0.11 / 0.0 / 0.0 / -0.01 points, far from the 0.2-0.6
    that <= 2.2 needs (docs/evaluation.md, "Telling a right first bridge from a wrong one");
    ``bridge_per_subject``: whether
    the first rewrite of a question whose first hop found facts filed under two or more of
    its named titles ("the director of A or of B") packs the best bridge of each;
    ``one_rewrite_in_sight``: whether a bridge question whose first hop already holds the
    bridge's own facts (`parsed.bridge_in_sight`) gets one rewrite, packing the best
    bridges, instead of ``bridges``; ``subjects_after_search``: whether a comparison of
    two named subjects (`parsed.compared_subjects`; a coordination stays a split) goes to a chain that
    searches the question first and then the sub-query of each subject it did not cover
    (`parsed.subjects_missed`), instead of a split searching the question and both (on:
    searches per auto question 2.91 -> 2.52 on HotpotQA 300, 2Wiki 2.93 -> 2.59, recall
    within noise, LoCoMo unchanged); ``fan_out``: whether searches that do not depend on
    each other's evidence go out in one hop, concurrently (`ChainJudgment.concurrent_searches`):
    the subjects a comparison's first search missed, and a speaker's own-turns search with
    its dated twin (``own_dated_search``), instead of one per hop: the same searches in
    fewer rounds (docs/evaluation.md, "A chain hop sends several searches at once").
    ``speakers_first_round``: when the scope's speakers are known (`Memory.speakers`) and
    the question names exactly one, the own-turns search and its dated twin go out beside the
    question's search, in the chain's first round, not after it (`parsed.first_round_searches`):
    the same searches and results, LoCoMo 2.02 -> 1.14 rounds per auto question (docs/evaluation.md,
    "A speaker's own turns in the first round").
    ``bridges_at_once`` (off): the first rewrite's runner-up bridges, packed, go out beside
    the first bridge instead of after its search (the same searches, one round less, but
    ranked without the first bridge's evidence: HotpotQA 300 -0.19 points, 2Wiki -1.65,
    its inference questions -8.5; same section).
    ``one_rewrite_in_sight`` is off: with the bridge
    ranking below it saved 0.13-0.19 searches and lost recall on every Wikipedia set
    (HotpotQA 800 -0.5 points, 2Wiki -0.7; docs/evaluation.md, "Where the searches go");
    ``ranking`` (parse-based judge, surface bridges): how the entities of the evidence
    reorder the bridge candidates (`BridgeRanking`; a dict of its fields is accepted).
    """

    bridges: int = 2
    keep: int = 10
    fresh_weight: float = 0.2
    pack: int = 3
    first_pack: int = 1
    first_hop_stop: bool = False
    stop_when_filled: bool = False
    attribute_rewrites: int = 1
    attribute_rewrite: str = "auto"
    bridge_from: str = "surface"
    attribute_hop_stop: bool = False
    one_bridge_when_clear: bool = False
    clear_ratio: float = 2.0
    own_turns: bool = True
    own_query: str = "first_person"
    own_dated_search: bool = True
    date_pad_days: int = 7
    bridge_found_stop: bool = True
    typed_bridge_stop: bool = False
    bridge_per_subject: bool = True
    one_rewrite_in_sight: bool = False
    subjects_after_search: bool = True
    fan_out: bool = True
    speakers_first_round: bool = True
    bridges_at_once: bool = False
    # an unvouched first bridge weighs 0.3, a compared subject's bridge too (docs/evaluation.md,
    # "The first bridge": auto 0.0 HotpotQA 300, +1.1 2Wiki, +0.7 MuSiQue, LoCoMo -0.05)
    ranking: BridgeRanking = field(
        default_factory=lambda: BridgeRanking(unvouched=0.3, subjects=True))

    def __post_init__(self) -> None:
        if isinstance(self.ranking, dict):  # from JSON (benchmarks, settings)
            object.__setattr__(self, "ranking", BridgeRanking(**self.ranking))


def judge_evidence(query: str, evidence: list[str], previous_queries: list[str],
                   heuristics: ChainHeuristics = ChainHeuristics()) -> ChainJudgment:
    """Bridge to the best untried entities while rewrites are left; otherwise sufficient.

    After the first hop the evidence is the items kept earlier, then the latest search's new
    hits; those are ranked from the top again (times ``fresh_weight``), so the next bridge
    comes from the runner-up entities of the first hop or from the latest hop."""
    h = heuristics
    indices = list(range(min(h.keep, len(evidence))))
    rewrites = max(0, len([q for q in previous_queries if q.strip()]) - 1)
    fresh_from = min(h.keep, len(evidence)) if rewrites else None
    candidates = bridge_candidates(query, evidence, previous_queries, fresh_from=fresh_from,
                                   fresh_weight=h.fresh_weight) if rewrites < h.bridges else []
    if not candidates:
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=0.9)
    last = rewrites + 1 == h.bridges
    entities = " ".join(c.entity for c in candidates[:h.pack if last else 1])
    return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                         new_query=bridge_query(query, entities), confidence=0.4)
