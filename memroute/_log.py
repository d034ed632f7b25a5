"""Library loggers: structlog events written through stdlib ``logging``.

memroute never configures logging. Unconfigured, Python shows only warnings and errors (on
stderr), so library users see no debug chatter; an application that configures structlog
gets its processors, and one that configures ``logging`` gets memroute's events by logger
name (``memroute.memory.store``, ...). The CLI configures both.
"""

from __future__ import annotations

import logging

import structlog


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.wrap_logger(logging.getLogger(name))
