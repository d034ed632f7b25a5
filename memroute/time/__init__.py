"""Time in memroute: when a question is asked (`as_of`), read the same way on every face.

Names load on first use: `memroute.time.limits` is read on the CLI's cold path, which must
not import pydantic."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["AS_OF_HELP", "AS_OF_RANGE", "AsOf", "as_of_text", "from_wall_clock", "parse_as_of",
           "wall_clock"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("memroute.time.as_of"), name)
    raise AttributeError(f"module 'memroute.time' has no attribute {name!r}")
