"""What a face says when a search finds nothing because its scope holds nothing.

A search of a scope nobody wrote to (a typo in the org, a missing ``--scope`` that searched
``default``) returns no results, as a search of a full scope may: `empty_scope_hint` tells
the two apart, naming the scope searched. A face asks only after a search came back empty,
so a search that finds something pays no extra round trip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memroute.memory.models import Scope, coerce_scope

if TYPE_CHECKING:
    from memroute.memory.store import Memory

HINT_HELP = ("With no results: why, when the scope searched holds no episodes at all "
             "('scope acme/support holds no episodes'); null otherwise.")
"""How a face's schema describes the hint (REST's responses, MCP's results)."""


async def empty_scope_hint(memory: Memory, scope: Scope | dict) -> str | None:
    """``"scope acme/support holds no episodes"`` when ``scope`` holds none, else ``None``
    (one count of the scope: call it only when a search found nothing)."""
    from memroute.memory.store import scope_path

    scope = coerce_scope(scope)
    if (await memory.count(scope))["episodes"]:
        return None
    return f"scope {scope_path(scope)} holds no episodes"
