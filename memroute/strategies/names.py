"""The route and strategy names, importing nothing: the CLI checks ``--strategy`` before it
loads a model or pydantic."""

from typing import Literal

Route = Literal["direct", "split", "chain"]
"""A path through the graph, as chosen by ToolSelect (or forced by a strategy override)."""
Strategy = Literal["auto", "direct", "split", "chain"]
"""What a caller asks for: ``auto`` lets ToolSelect choose the route."""
STRATEGIES: tuple[Strategy, ...] = ("auto", "direct", "split", "chain")
