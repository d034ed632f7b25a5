"""Library loggers: structlog events written through stdlib ``logging``.

memroute never configures logging. Unconfigured, Python shows only warnings and errors (on
stderr), so library users see no debug chatter; an application that configures structlog
gets its processors, and one that configures ``logging`` gets memroute's events by logger
name (``memroute.memory.store``, ...). The CLI configures both: structlog through
`before_first_logger`, so a command that makes no library logger never imports it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import structlog

_pending: Callable[[], None] | None = None


def before_first_logger(configure: Callable[[], None]) -> None:
    """Run ``configure`` (which imports and configures structlog) now if structlog is loaded,
    else when the first memroute logger is made; a later call replaces a pending one."""
    global _pending
    if "structlog" in sys.modules:
        _pending = None
        configure()
    else:
        _pending = configure


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    global _pending
    import structlog

    if _pending is not None:
        configure, _pending = _pending, None
        configure()
    return structlog.wrap_logger(logging.getLogger(name))
