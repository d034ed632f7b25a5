"""Golden reasons, kept where the words are the contract: a route's or a hop's reason names
what decided it (issue 46: "every route and hop reason names what decided it"). Tests assert
the decisive words, never the prose around them, which is free to change."""

from __future__ import annotations


def names(reason: str, *decisive: str) -> bool:
    """Whether ``reason`` names every one of the ``decisive`` words (case aside)."""
    said = reason.casefold()
    return bool(decisive) and all(word.casefold() in said for word in decisive)
