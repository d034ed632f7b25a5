"""Contents filed under a title (``"Title: text"``, e.g. a Wikipedia passage or sentence)."""

from __future__ import annotations

import re
from functools import lru_cache

from memroute.memory.splitter import split_sentences

# A title's trailing disambiguation: "Kiss and Tell (1945 film)"
_DISAMBIGUATION = re.compile(r"\s*\([^)]*\)\s*$")
# Characters a Wikipedia title cannot hold (MediaWiki's forbidden set); "[image: ...]" in a
# conversation turn is not a title.
_NOT_IN_TITLES = frozenset("[]{}|#<>")


def split_title(content: str) -> tuple[str | None, str]:
    """``"Title: sentence"`` -> ``("Title", "sentence")``; other text -> ``(None, text)``."""
    head, sep, tail = content.partition(": ")
    if sep and 0 < len(head) <= 120 and "\n" not in head and (head[:1].isupper() or head[:1].isdigit()):
        return head.strip(), tail.strip()
    return None, content.strip()


def without_disambiguation(title: str) -> str:
    """The name a title files facts under: ``"Kiss and Tell (1945 film)"`` -> ``"Kiss and
    Tell"``; other text unchanged."""
    return _DISAMBIGUATION.sub("", title)


@lru_cache(maxsize=16_384)
def titles_of(text: str) -> str:
    """The distinct titles of a candidate's lines (its episodes), joined by a space; ``""``
    when none is filed under a title. Stricter than `split_title`: a head that spans two
    sentences or holds a character titles cannot hold is a conversation turn's text
    ("Thanks! My advice: ...", "... [image: a photo]"). Cached per text: a search's
    candidate windows come back in the next hop's search and in the final rerank."""
    titles = (split_title(line)[0] for line in text.split("\n"))
    return " ".join(dict.fromkeys(
        t for t in titles
        if t and _NOT_IN_TITLES.isdisjoint(t) and len(split_sentences(t)) == 1))
