"""A fast, offline sentence splitter (rules only; no data downloads)."""

from __future__ import annotations

import re

from memroute.reading import vocabulary as V

# A boundary: terminal punctuation, optional closing quotes/brackets, whitespace, then
# something that can start a sentence.
_BOUNDARY = re.compile(r"(?<=[.!?])([\"'\u201d\u2019)\]]*)\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])")
_ABBREVIATIONS = V.ABBREVIATIONS.words | V.ABBREVIATIONS_MORE.words
MAX_SENTENCE_CHARS = 2000


def _ends_with_abbreviation(text: str) -> bool:
    word = text.rstrip(".!?\"')]\u201d\u2019").rsplit(None, 1)[-1] if text.strip() else ""
    word = word.lstrip("(\"'")
    if len(word) == 1 and word.isalpha():  # an initial: "J. R. R. Tolkien"
        return True
    if re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]?", word):  # "U.S", "e.g", "i.e"
        return True
    return word.lower() in _ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped; very long runs are cut into chunks."""
    text = text.strip()
    if not text:
        return []
    pieces: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        candidate = text[start : match.end(1)]
        if _ends_with_abbreviation(candidate):
            continue
        pieces.append(candidate)
        start = match.end()
    pieces.append(text[start:])
    sentences: list[str] = []
    for piece in pieces:
        piece = piece.strip()
        while len(piece) > MAX_SENTENCE_CHARS:
            cut = piece.rfind(" ", 0, MAX_SENTENCE_CHARS)
            cut = cut if cut > MAX_SENTENCE_CHARS // 2 else MAX_SENTENCE_CHARS
            sentences.append(piece[:cut].strip())
            piece = piece[cut:].strip()
        if piece:
            sentences.append(piece)
    return sentences
