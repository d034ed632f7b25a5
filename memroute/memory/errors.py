"""Typed errors raised by the memory layer."""

from __future__ import annotations


class MemrouteError(Exception):
    """Base class of every error memroute raises on purpose."""


class InvalidInputError(MemrouteError, ValueError):
    """A query, scope, episode or parameter is malformed."""


class FilterError(InvalidInputError):
    """A filter expression does not follow the documented dialect."""


class EmbedderMismatchError(MemrouteError):
    """The store was built with another embedder (name or dimension) than the one in use."""


class ModelUnavailableError(MemrouteError):
    """A model's files are missing, corrupt or cannot be loaded."""


class StoreUnavailableError(MemrouteError):
    """The database cannot be reached or the embedded server cannot start."""
