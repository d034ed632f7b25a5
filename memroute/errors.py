"""memroute's one error hierarchy, used by every layer.

Every error memroute raises on purpose is a `MemrouteError`. Each kind carries the process
exit code the CLI maps it to and the HTTP status the service maps it to, so both mappings are
declared here, once (`exit_code_for`, `http_status_for`).
"""

from __future__ import annotations


class MemrouteError(Exception):
    """Base class of every error memroute raises on purpose."""

    exit_code = 1
    http_status = 500


class InvalidInputError(MemrouteError, ValueError):
    """A query, scope, episode or parameter is malformed."""

    exit_code = 2
    http_status = 422


class FilterError(InvalidInputError):
    """A filter expression does not follow the documented dialect."""


class StoreUnavailableError(MemrouteError):
    """The database cannot be reached or the embedded server cannot start."""

    exit_code = 3
    http_status = 503


class StatementTimeoutError(MemrouteError):
    """A search statement ran past ``MEMROUTE_SEARCH_STATEMENT_TIMEOUT_MS`` and was cancelled
    by the database."""

    exit_code = 8
    http_status = 504


class ModelUnavailableError(MemrouteError):
    """A model's files are missing, corrupt or cannot be loaded."""

    exit_code = 4
    http_status = 503


class EmbedderMismatchError(MemrouteError):
    """The store was built with another embedder (name or dimension) than the one in use."""

    exit_code = 5


class NotAuthenticatedError(MemrouteError):
    """No API key, or one that is unknown, malformed or revoked."""

    exit_code = 6
    http_status = 401


class ScopeForbiddenError(MemrouteError):
    """The scope asked for lies outside the caller's key."""

    exit_code = 7
    http_status = 403


def _invalid_namespace_error() -> type[InvalidInputError]:
    """`InvalidNamespaceError`: an `InvalidInputError` that is also LangGraph's
    ``langgraph.store.base.InvalidNamespaceError`` (so LangGraph's callers catch it). Built on
    first use: LangGraph's store module takes most of a second to import, which the CLI and
    the service never pay unless they use the store."""
    from langgraph.store.base import InvalidNamespaceError as LangGraphInvalidNamespaceError

    class InvalidNamespaceError(InvalidInputError, LangGraphInvalidNamespaceError):
        """A LangGraph store namespace (or a namespace match condition) is malformed."""

    InvalidNamespaceError.__module__ = __name__
    InvalidNamespaceError.__qualname__ = "InvalidNamespaceError"
    return InvalidNamespaceError


def __getattr__(name: str) -> type:
    if name == "InvalidNamespaceError":
        globals()[name] = _invalid_namespace_error()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def exit_code_for(exc: BaseException) -> int:
    """The process exit code for ``exc``: its kind's code, 1 for anything unexpected."""
    return exc.exit_code if isinstance(exc, MemrouteError) else 1


def http_status_for(exc: BaseException) -> int:
    """The HTTP status for ``exc``: its kind's status, 500 for anything unexpected."""
    return exc.http_status if isinstance(exc, MemrouteError) else 500


__all__ = ["EmbedderMismatchError", "FilterError", "InvalidInputError", "InvalidNamespaceError",
           "MemrouteError",
           "ModelUnavailableError", "NotAuthenticatedError", "ScopeForbiddenError",
           "StatementTimeoutError", "StoreUnavailableError", "exit_code_for", "http_status_for"]
