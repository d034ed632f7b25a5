"""Per-question retrieval and answer metrics, exactly as the evaluation protocol defines them."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
MM_MIN_TOKENS = 5
MM_TOKEN_LEN = 3
MM_OVERLAP = 0.6


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text.lower()).strip()


def sf_recall(gold_facts: Sequence[str], returned: Sequence[str]) -> float:
    """Fraction of gold facts present among the returned contents (exact match)."""
    if not gold_facts:
        return 0.0
    present = set(returned)
    return sum(1 for g in gold_facts if g in present) / len(gold_facts)


def all_sf(gold_facts: Sequence[str], returned: Sequence[str]) -> float:
    """1.0 when every gold fact was returned."""
    present = set(returned)
    return float(bool(gold_facts) and all(g in present for g in gold_facts))


def _long_tokens(text: str) -> list[str]:
    return [t for t in _WORD.findall(text) if len(t) >= MM_TOKEN_LEN]


def mm_fact_hit(fact: str, returned: Sequence[str]) -> bool:
    """MemMachine's lenient match of one fact against the returned lines.

    Hit if the normalized fact (or its part after the first ':') is a substring of the
    normalized returned text; or, when the fact has >= 5 word tokens of length >= 3, if
    >= 60% of those occur in one returned line that itself has >= 5 tokens.
    """
    lines = [_norm(r) for text in returned for r in text.splitlines() if r.strip()]
    joined = "\n".join(lines)
    whole = _norm(fact)
    tail = _norm(fact.split(":", 1)[1]) if ":" in fact else whole
    if (whole and whole in joined) or (tail and tail in joined):
        return True
    tokens = _long_tokens(tail)  # the sentence, as MemMachine's facts carry no title
    if len(tokens) < MM_MIN_TOKENS:
        return False
    for line in lines:
        line_tokens = _WORD.findall(line)
        if len(line_tokens) < MM_MIN_TOKENS:
            continue
        have = set(line_tokens)
        if sum(1 for t in tokens if t in have) >= MM_OVERLAP * len(tokens):
            return True
    return False


def mm_recall(gold_facts: Sequence[str], returned: Sequence[str]) -> float:
    if not gold_facts:
        return 0.0
    return sum(mm_fact_hit(g, returned) for g in gold_facts) / len(gold_facts)


def para_recall(gold_titles: Sequence[str], returned_titles: Sequence[str]) -> float:
    """Fraction of gold paragraphs (titles) with at least one returned sentence."""
    if not gold_titles:
        return 0.0
    present = set(returned_titles)
    return sum(1 for t in gold_titles if t in present) / len(gold_titles)


def top_passages(returned: Sequence[str], k: int) -> list[str]:
    """The first ``k`` distinct passages of a ranked list (k counts passages, not rows)."""
    return list(dict.fromkeys(returned))[:k]


def passage_recall(gold_passages: Sequence[str], returned: Sequence[str], k: int) -> float:
    """Share of a question's distinct supporting passages among the top ``k`` returned
    passages (exact match on the passage content), as in HippoRAG 2's recall@k."""
    gold = set(gold_passages)
    if not gold:
        return 0.0
    return len(gold & set(top_passages(returned, k))) / len(gold)


def all_passages(gold_passages: Sequence[str], returned: Sequence[str], k: int) -> float:
    """1.0 when every supporting passage is among the top ``k`` returned passages."""
    return float(passage_recall(gold_passages, returned, k) == 1.0)


def evidence_recall(gold_ids: Sequence[str], unresolved: Sequence[str],
                    returned_ids: Sequence[str]) -> float | None:
    """LoCoMo: fraction of evidence dia_ids returned. Unresolved ids count as misses;
    a question with no evidence at all has no recall (``None``)."""
    total = len(gold_ids) + len(unresolved)
    if total == 0:
        return None
    present = set(returned_ids)
    return sum(1 for g in gold_ids if g in present) / total


# -- answers (SQuAD normalization) --------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD: lowercase, drop punctuation and articles, collapse whitespace."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in golds if str(g).strip()))


def _f1(prediction: str, gold: str) -> float:
    norm_pred, norm_gold = normalize_answer(prediction), normalize_answer(gold)
    if {norm_pred, norm_gold} & {"yes", "no"} and norm_pred != norm_gold:
        return 0.0  # HotpotQA's rule: a yes/no answer is all or nothing
    pred, ref = norm_pred.split(), norm_gold.split()
    if not pred or not ref:
        return float(pred == ref)
    common = Counter(pred) & Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """Best SQuAD token F1 over the gold answer and its aliases."""
    scores = [_f1(prediction, g) for g in golds if str(g).strip()]
    return max(scores) if scores else 0.0
