"""Contents filed under a title (``"Title: text"``, e.g. a Wikipedia passage or sentence)."""

from __future__ import annotations


def split_title(content: str) -> tuple[str | None, str]:
    """``"Title: sentence"`` -> ``("Title", "sentence")``; other text -> ``(None, text)``."""
    head, sep, tail = content.partition(": ")
    if sep and 0 < len(head) <= 120 and "\n" not in head and (head[:1].isupper() or head[:1].isdigit()):
        return head.strip(), tail.strip()
    return None, content.strip()


def titles_of(text: str) -> str:
    """The distinct titles of a candidate's lines (its episodes), joined by a space; ``""``
    when none of them is filed under a title (e.g. conversation turns)."""
    titles = (split_title(line)[0] for line in text.split("\n"))
    return " ".join(dict.fromkeys(t for t in titles if t))
