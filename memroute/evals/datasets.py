"""Loaders for the four evaluation sets, into one shape the store builder and metrics share.

Formats are those of ``shared/data/README.md``: HotpotQA (JSON Lines in the Hugging Face
layout, or the original JSON list), 2WikiMultihopQA (JSON list), MuSiQue (JSON Lines) and
LoCoMo (JSON list of conversations).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

from memroute.errors import InvalidInputError
from memroute.memory.splitter import split_sentences

DatasetName = Literal["hotpotqa", "2wiki", "musique", "locomo"]
DATASETS: tuple[str, ...] = ("hotpotqa", "2wiki", "musique", "locomo")
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
                     5: "adversarial"}


@dataclass(frozen=True)
class Paragraph:
    """A titled Wikipedia paragraph as a list of sentences."""

    title: str
    sentences: tuple[str, ...]

    def contents(self) -> list[str]:
        """The episode contents the protocol stores: ``"{title}: {sentence}"``, stripped."""
        return [fact_content(self.title, s) for s in self.sentences if s.strip()]

    def passage(self) -> str:
        """The passage protocol's episode: ``"{title}: {text}"``, sentences joined by a space."""
        return fact_content(self.title, " ".join(s.strip() for s in self.sentences if s.strip()))


@dataclass(frozen=True)
class Turn:
    """One LoCoMo dialogue turn, ready to store as an episode."""

    uid: str
    dia_id: str
    speaker: str
    text: str
    session_id: str
    produced_at: datetime


@dataclass
class Question:
    """One evaluation question and its gold evidence.

    Wikipedia sets: ``gold_facts`` are episode contents (``"{title}: {sentence}"``) and
    ``gold_titles`` the supporting paragraphs, ``gold_passages`` their passage contents
    (`Paragraph.passage`). LoCoMo: ``gold_ids`` are the resolved
    ``dia_id`` values, ``unresolved`` the evidence entries that name no turn.
    """

    id: str
    question: str
    answer: str
    type: str
    gold_facts: list[str] = field(default_factory=list)
    gold_titles: list[str] = field(default_factory=list)
    gold_passages: list[str] = field(default_factory=list)
    gold_ids: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    answer_aliases: list[str] = field(default_factory=list)
    conversation: str | None = None
    paragraphs: list[Paragraph] = field(default_factory=list)
    # when the question is asked (the retrieval's ``as_of``); None: now. LoCoMo: the end of
    # its conversation's last session
    as_of: datetime | None = None


@dataclass
class Dataset:
    """Questions plus what the store holds for them (paragraphs, or conversations' turns)."""

    name: str
    questions: list[Question]
    store_key: str  # hash of exactly the records the store is built from
    file_sha256: str = ""
    conversations: dict[str, list[Turn]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def is_conversational(self) -> bool:
        return self.name == "locomo"


def fact_content(title: str, sentence: str) -> str:
    return f"{title.strip()}: {sentence.strip()}"


def _slice_hash(name: str, records: list[Any]) -> str:
    blob = json.dumps([name, records], sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


def _read_records(path: Path) -> list[dict[str, Any]]:
    """A JSON list, or JSON Lines (one object per line)."""
    if not path.is_file():
        raise InvalidInputError(f"data file not found: {path}")
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            records = json.loads(stripped)
        else:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{path} is neither a JSON list nor JSON Lines: {exc}") from exc
    if not all(isinstance(r, dict) for r in records):
        raise InvalidInputError(f"{path}: every record must be a JSON object")
    return records


def _pairs(value: Any, what: str) -> list[tuple[Any, Any]]:
    """``[[a, b], ...]`` or the Hugging Face column layout ``{"a": [...], "b": [...]}``."""
    if isinstance(value, dict):
        keys = list(value)
        if len(keys) != 2:
            raise InvalidInputError(f"{what}: expected two parallel lists, got keys {keys}")
        return list(zip(value[keys[0]], value[keys[1]], strict=True))
    return [(a, b) for a, b in value]


def _paragraph_index(paragraphs: list[Paragraph]) -> dict[str, list[Paragraph]]:
    index: dict[str, list[Paragraph]] = {}
    for p in paragraphs:
        index.setdefault(p.title, []).append(p)
    return index


def _resolve_facts(qid: str, paragraphs: list[Paragraph],
                   facts: list[tuple[str, int]]) -> list[str]:
    index = _paragraph_index(paragraphs)
    gold: list[str] = []
    for title, sent_id in facts:
        match = next((p for p in index.get(title, []) if 0 <= int(sent_id) < len(p.sentences)),
                     None)
        if match is None:
            raise InvalidInputError(
                f"question {qid}: supporting fact ({title!r}, {sent_id}) is not in its context")
        gold.append(fact_content(title, match.sentences[int(sent_id)]))
    return list(dict.fromkeys(gold))


def _wiki_question(record: dict[str, Any], qid: str, qtype: str, *, context_key: str = "context",
                   facts_key: str = "supporting_facts") -> Question:
    paragraphs = [Paragraph(str(t), tuple(str(s) for s in sents))
                  for t, sents in _pairs(record[context_key], f"{qid}.{context_key}")]
    facts = [(str(t), int(s)) for t, s in _pairs(record[facts_key], f"{qid}.{facts_key}")]
    titles = list(dict.fromkeys(t for t, _ in facts))
    return Question(
        id=qid, question=str(record["question"]).strip(), answer=str(record.get("answer", "")),
        type=qtype, gold_facts=_resolve_facts(qid, paragraphs, facts), gold_titles=titles,
        gold_passages=list(dict.fromkeys(p.passage() for p in paragraphs if p.title in titles)),
        paragraphs=paragraphs,
    )


def load_hotpotqa(records: list[dict[str, Any]]) -> list[Question]:
    """Both layouts: Hugging Face (``id``, column dicts) and original (``_id``, pair lists)."""
    out = []
    for r in records:
        qid = str(r.get("id") or r.get("_id") or "")
        if not qid or "question" not in r or "context" not in r:
            raise InvalidInputError("a HotpotQA record needs id/_id, question and context")
        out.append(_wiki_question(r, qid, str(r.get("type", "unknown"))))
    return out


def load_2wiki(records: list[dict[str, Any]]) -> list[Question]:
    out = []
    for r in records:
        qid = str(r.get("_id") or "")
        if not qid or "question" not in r or "context" not in r:
            raise InvalidInputError("a 2WikiMultihopQA record needs _id, question and context")
        out.append(_wiki_question(r, qid, str(r.get("type", "unknown"))))
    return out


def musique_hops(qid: str) -> str:
    """``"2hop__..."`` -> ``"2hop"``; ``"3hop1__..."`` -> ``"3hop"``."""
    match = re.match(r"^(\d)hop", qid)
    return f"{match.group(1)}hop" if match else "unknown"


def load_musique(records: list[dict[str, Any]]) -> list[Question]:
    """Paragraphs are split with memroute's sentence splitter; every sentence of a
    supporting paragraph is gold."""
    out = []
    for r in records:
        qid = str(r.get("id") or "")
        if not qid or "paragraphs" not in r:
            raise InvalidInputError("a MuSiQue record needs id and paragraphs")
        paragraphs, gold, titles, passages = [], [], [], []
        for p in r["paragraphs"]:
            para = Paragraph(str(p["title"]), tuple(split_sentences(str(p["paragraph_text"]))))
            paragraphs.append(para)
            if p.get("is_supporting"):
                gold.extend(para.contents())
                titles.append(para.title)
                passages.append(para.passage())
        out.append(Question(
            id=qid, question=str(r["question"]).strip(), answer=str(r.get("answer", "")),
            type=musique_hops(qid), gold_facts=list(dict.fromkeys(gold)),
            gold_titles=list(dict.fromkeys(titles)), gold_passages=list(dict.fromkeys(passages)),
            paragraphs=paragraphs, answer_aliases=[str(a) for a in r.get("answer_aliases", [])],
        ))
    return out


def parse_evidence(raw: list[Any] | str) -> list[str]:
    """LoCoMo evidence entries as dia_id-shaped tokens, parsed leniently.

    Splits on ``,``, ``;`` and whitespace and repairs ``D:11:26`` to ``D11:26``; tokens that
    still do not look like ``D<session>:<turn>`` are kept as they are (so they count as
    unresolved rather than vanish).
    """
    items = [raw] if isinstance(raw, str) else list(raw or [])
    tokens: list[str] = []
    for item in items:
        for token in re.split(r"[,;\s]+", str(item)):
            token = token.strip()
            if not token:
                continue
            token = re.sub(r"^D:(\d+):(\d+)$", r"D\1:\2", token)
            tokens.append(token)
    return list(dict.fromkeys(tokens))


def _locomo_time(value: str, fallback: datetime) -> datetime:
    for fmt in ("%I:%M %p on %d %B, %Y", "%H:%M on %d %B, %Y"):
        try:
            return datetime.strptime(value.strip(), fmt).replace(tzinfo=timezone.utc)
        except (ValueError, AttributeError):
            continue
    return fallback


def load_locomo(records: list[dict[str, Any]]) -> tuple[list[Question], dict[str, list[Turn]],
                                                       int]:
    """Questions (category 5 skipped), each conversation's turns, and the skipped count."""
    questions: list[Question] = []
    conversations: dict[str, list[Turn]] = {}
    skipped = 0
    for sample in records:
        cid = str(sample.get("sample_id") or "")
        conv = sample.get("conversation")
        if not cid or not isinstance(conv, dict) or "qa" not in sample:
            raise InvalidInputError("a LoCoMo sample needs sample_id, conversation and qa")
        numbers = sorted(int(m.group(1)) for key in conv
                         if (m := re.fullmatch(r"session_(\d+)", key)))
        turns: list[Turn] = []
        previous = datetime(2000, 1, 1, tzinfo=timezone.utc)
        for n in numbers:
            start = _locomo_time(str(conv.get(f"session_{n}_date_time", "")),
                                 previous + timedelta(hours=1))
            for i, turn in enumerate(conv[f"session_{n}"]):
                text = str(turn.get("text", ""))
                if turn.get("blip_caption"):
                    text = f"{text} [image: {turn['blip_caption']}]"
                if not text.strip():
                    continue
                turns.append(Turn(uid=f"{cid}-s{n}-t{i}", dia_id=str(turn.get("dia_id", "")),
                                  speaker=str(turn.get("speaker") or "unknown"), text=text,
                                  session_id=f"{cid}-session_{n}",
                                  produced_at=start + timedelta(seconds=i)))
            previous = start
        conversations[cid] = turns
        known = {t.dia_id for t in turns}
        asked = max((t.produced_at for t in turns), default=None)
        for j, qa in enumerate(sample["qa"]):
            category = int(qa.get("category", 0))
            if category == 5:
                skipped += 1
                continue
            evidence = parse_evidence(qa.get("evidence", []))
            questions.append(Question(
                id=f"{cid}-q{j}", question=str(qa["question"]).strip(),
                answer=str(qa.get("answer", "")),
                type=LOCOMO_CATEGORIES.get(category, f"category-{category}"),
                gold_ids=[e for e in evidence if e in known],
                unresolved=[e for e in evidence if e not in known], conversation=cid,
                as_of=asked,
            ))
    return questions, conversations, skipped


def load_dataset(name: str, path: str | Path, limit: int | None = None) -> Dataset:
    """Read ``path`` as data set ``name``, keeping the first ``limit`` questions (LoCoMo: the
    first ``limit`` conversations' questions) and only what their store needs."""
    if name not in DATASETS:
        raise InvalidInputError(f"unknown data set {name!r}: use one of {', '.join(DATASETS)}")
    if limit is not None and limit < 1:
        raise InvalidInputError("--limit must be a positive number of questions")
    records = _read_records(Path(path))
    file_sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if name == "locomo":
        questions, conversations, skipped = load_locomo(records)
        if limit is not None:
            questions = questions[:limit]
            keep = {q.conversation for q in questions}
            conversations = {c: t for c, t in conversations.items() if c in keep}
            kept_records = [r for r in records if r.get("sample_id") in keep]
        else:
            kept_records = records
        return Dataset(name, questions, _slice_hash(name, kept_records), file_sha,
                       conversations, {"adversarial": skipped})
    records = records[:limit] if limit is not None else records
    loader = {"hotpotqa": load_hotpotqa, "2wiki": load_2wiki, "musique": load_musique}[name]
    return Dataset(name, loader(records), _slice_hash(name, records), file_sha)


WIKI_DATASETS: tuple[str, ...] = ("hotpotqa", "2wiki", "musique")


def parse_pool_entry(entry: str) -> tuple[str, Path]:
    """``"NAME=PATH"`` (a ``--pool`` value) -> ``(name, path)`` of a Wikipedia data set."""
    name, sep, path = entry.partition("=")
    name = name.strip()
    if not sep or name not in WIKI_DATASETS or not path.strip():
        raise InvalidInputError(
            f"--pool takes NAME=FILE with NAME one of {', '.join(WIKI_DATASETS)}, not {entry!r}")
    return name, Path(path.strip())
