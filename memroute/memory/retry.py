"""Retrying the store's idempotent operations across connection failures."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from psycopg import OperationalError
from psycopg.errors import QueryCanceled
from psycopg_pool import PoolTimeout
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from memroute.errors import StatementTimeoutError, StoreUnavailableError

T = TypeVar("T")


def _transient(exc: BaseException) -> bool:
    """Connection-level failures (server restart, killed backend); not a statement cancelled
    by its ``statement_timeout``, which would only time out again, nor a `PoolTimeout`: the
    pool has waited its whole timeout already (after its guard found the server alive), and
    waiting again would make one call take a multiple of the configured timeout."""
    return isinstance(exc, OperationalError) and not isinstance(exc, (QueryCanceled, PoolTimeout))


async def with_retry(operation: Callable[[], Awaitable[T]], what: str) -> T:
    """Run ``operation`` (a coroutine function), retrying connection failures.

    Safe because every retried operation is idempotent: reads, deletes and `add` (by uid).
    """
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(_transient), stop=stop_after_attempt(4),
            wait=wait_exponential(multiplier=0.2, max=3), reraise=True,
        ):
            with attempt:
                return await operation()
    except QueryCanceled as exc:
        raise StatementTimeoutError(f"{what} cancelled by the database: {exc}") from exc
    except OperationalError as exc:
        raise StoreUnavailableError(f"{what} failed, database unavailable: {exc}") from exc
    raise AssertionError("unreachable")
