"""spaCy's greedy entity decoding for en_core_web_sm's ``ner``, one numpy step per token
position for a whole batch of texts.

spaCy decodes entities with a transition system (BILUO: begin, in, last, unit, out) whose
loop runs in Cython; in spaCy 3.8 every token lookup of that loop (`StateC.B_`) takes the
GIL. The loop was half of NER's CPU (~0.95 of ~1.9 ms per Wikipedia sentence on this
machine), mostly taking and dropping the GIL (perf: ~25 % of NER's samples in take_gil,
PyGILState_*, pthread locks), and each take contends with the embedder's and the event
loop's threads. `GreedyEntityDecoder` computes the same scores with the same code
(``ner``'s token encoder and precomputed features, spaCy's own feature sums, blis for the
output layer) and applies the same validity rules and moves, vectorised over the batch: the
same entities (tested; none of 63,122 Wikipedia and LoCoMo sentences differed) for half the
CPU (Wikipedia 2.07 -> 1.05 ms per sentence, LoCoMo 0.78 -> 0.41; docs/research.md,
"Ingestion with entities: spaCy's decoding loop replaced").

Only texts as the tokenizer makes them are decoded this way (no preset entities); anything
else, or a model built differently, is left to spaCy (`GreedyEntityDecoder.for_pipe`
returns ``None``, `decode` returns ``None`` for such a batch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from spacy.pipeline import EntityRecognizer
    from spacy.tokens import Doc, Span

_BEGIN, _IN, _LAST, _UNIT, _OUT = range(5)
_KINDS = {"B": _BEGIN, "I": _IN, "L": _LAST, "U": _UNIT}


class GreedyEntityDecoder:
    """Greedy BILUO decoding of one ``ner`` component over batches of fresh Docs."""

    def __init__(self, ner: EntityRecognizer) -> None:
        from spacy.attrs import ENT_IOB, IS_SPACE, SENT_START
        from thinc.api import NumpyOps

        self.ner = ner
        self._attrs = [IS_SPACE, SENT_START, ENT_IOB]
        self._blis = NumpyOps()  # the output layer's product as spaCy's loop computes it
        moves = ner.moves
        names = [moves.get_class_name(i) for i in range(moves.n_moves)]
        self.labels: list[str] = []
        kind, label = [], []
        for name in names:
            if name == "O":
                kind.append(_OUT)
                label.append(-1)
                continue
            move, _, text = name.partition("-")
            kind.append(_KINDS[move])
            if not text:  # label 0: valid only over preset annotations, never here
                label.append(-1)
                continue
            if text not in self.labels:
                self.labels.append(text)
            label.append(self.labels.index(text))
        self._kind = np.array(kind)
        self._label = np.array(label)
        self._label_hash = [ner.vocab.strings[text] for text in self.labels]
        labelled = self._label >= 0
        self._is = {k: self._kind == k for k in (_BEGIN, _IN, _LAST, _UNIT, _OUT)}
        self._begin = self._is[_BEGIN] & labelled
        self._unit = self._is[_UNIT] & labelled
        self._in = self._is[_IN] & labelled
        self._last = self._is[_LAST] & labelled

    @classmethod
    def for_pipe(cls, ner: EntityRecognizer) -> GreedyEntityDecoder | None:
        """A decoder for ``ner``, or ``None`` when it is not a greedy BILUO recogniser with
        the features this decoder computes (first word of the buffer, first and last word of
        the open entity) and an output layer."""
        try:
            from spacy.pipeline._parser_internals.ner import BiluoPushDown

            if not isinstance(ner.moves, BiluoPushDown) or ner.cfg.get("beam_width", 1) != 1:
                return None
            lower, upper = ner.model.get_ref("lower"), ner.model.get_ref("upper")
            if lower.get_dim("nF") != 3 or upper is None:
                return None
            return cls(ner)
        except (KeyError, ValueError, AttributeError, ImportError):
            return None

    def decode(self, docs: list[Doc]) -> list[list[Span]] | None:
        """The entity spans of each Doc (as ``ner`` would set them), or ``None`` when a Doc
        carries preset entity annotations (spaCy's loop must then honour them)."""
        from spacy.tokens import Span

        lengths = np.array([len(doc) for doc in docs])
        found: list[list[Span]] = [[] for _ in docs]
        if not lengths.any():
            return found
        arrays = [doc.to_array(self._attrs) for doc in docs]
        if any(a[:, 2].any() for a in arrays if len(a)):
            return None
        model = self.ner.model.predict(docs)
        try:
            self._run(model, lengths, arrays, docs, found, Span)
        finally:
            model.clear_memory()
        return found

    def _run(self, model, lengths, arrays, docs, found, Span) -> None:
        """Every state takes one move per step (each BILUO move consumes one word): the
        scores of the unfinished states, the moves the rules allow, the best of them (the
        first on a tie, as spaCy's ``arg_max_if_valid``); closed entities go to ``found``."""
        W, b = model.vec2scores.get_param("W"), model.vec2scores.get_param("b")
        unseen = model._class_mask == 0
        # states longest first, so the unfinished ones are always a prefix
        order = np.argsort(-lengths, kind="stable")
        n = lengths[order]
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])[order]
        flat = np.concatenate([a for a in arrays if len(a)])
        space = np.concatenate([flat[:, 0].astype(bool), [False]])
        # a sentence start on the next word (never the first word of a Doc) ends any entity
        starts = np.concatenate([flat[:, 1] == 1, [False]])
        count = len(order)
        open_label = np.full(count, -1)
        ent_start = np.zeros(count, dtype=np.int64)
        for pos in range(int(n.max())):
            while count and n[count - 1] <= pos:
                count -= 1
            k = count
            here = offsets[:k] + pos
            is_open = open_label[:k] >= 0
            ids = np.full((k, 3), -1, dtype="i")
            ids[:, 0] = here
            ids[is_open, 1] = offsets[:k][is_open] + ent_start[:k][is_open]
            ids[is_open, 2] = here[is_open] - 1
            scores = self._blis.gemm(model.state2vec.predict(ids), W, trans2=True)
            scores += b
            if unseen.any():
                scores[:, unseen] = np.nanmin(scores)
            two_left = (n[:k] - pos) >= 2
            next_starts = starts[here + 1] & two_left
            same = self._label[None, :] == open_label[:k, None]
            closed, free_word = ~is_open, ~is_open & ~space[here]
            valid = (self._begin[None, :] & (free_word & two_left & ~next_starts)[:, None])
            valid |= self._unit[None, :] & free_word[:, None]
            valid |= self._is[_OUT][None, :] & closed[:, None]
            valid |= self._in[None, :] & same & (two_left & ~next_starts)[:, None]
            valid |= self._last[None, :] & same
            move = np.where(valid, scores, -np.inf).argmax(axis=1)
            kind, label = self._kind[move], self._label[move]
            begins = kind == _BEGIN
            open_label[:k][begins] = label[begins]
            ent_start[:k][begins] = pos
            for i in np.flatnonzero((kind == _LAST) | (kind == _UNIT)):
                start = pos if kind[i] == _UNIT else int(ent_start[i])
                found[order[i]].append(Span(docs[order[i]], start, pos + 1,
                                            label=self._label_hash[label[i]]))
            open_label[:k][kind == _LAST] = -1
