"""memroute's one error hierarchy, used by every layer.

Every error memroute raises on purpose is a `MemrouteError`. Each kind carries the process
exit code the CLI (and any other face) maps it to, so the mapping is declared here, once:
`exit_code_for`.
"""

from __future__ import annotations


class MemrouteError(Exception):
    """Base class of every error memroute raises on purpose."""

    exit_code = 1


class InvalidInputError(MemrouteError, ValueError):
    """A query, scope, episode or parameter is malformed."""

    exit_code = 2


class FilterError(InvalidInputError):
    """A filter expression does not follow the documented dialect."""


class StoreUnavailableError(MemrouteError):
    """The database cannot be reached or the embedded server cannot start."""

    exit_code = 3


class ModelUnavailableError(MemrouteError):
    """A model's files are missing, corrupt or cannot be loaded."""

    exit_code = 4


class EmbedderMismatchError(MemrouteError):
    """The store was built with another embedder (name or dimension) than the one in use."""

    exit_code = 5


def exit_code_for(exc: BaseException) -> int:
    """The process exit code for ``exc``: its kind's code, 1 for anything unexpected."""
    return exc.exit_code if isinstance(exc, MemrouteError) else 1


__all__ = ["EmbedderMismatchError", "FilterError", "InvalidInputError", "MemrouteError",
           "ModelUnavailableError", "StoreUnavailableError", "exit_code_for"]
