"""uvicorn's HTTP/1.1 protocol (h11) with a deadline on a request's headers.

uvicorn times out an idle keep-alive connection, but not one that is slow to send a
request's headers: a client trickling them holds its connection (and its file descriptor)
for as long as it likes. `HeaderDeadlineH11` closes a connection whose next request's
headers have not all arrived `HEADER_TIMEOUT_S` after the connection opened or its last
response ended; the rest of a body answered before it was read (a 401 sent from the
headers) counts as such, so it cannot hold the connection either. (A slow body the app
reads is timed out by the app: `memroute.service.app.BodyLimit`.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0


class HeaderDeadlineH11(H11Protocol):
    """`H11Protocol` that closes a connection whose request headers come too slowly."""

    header_timeout_s = HEADER_TIMEOUT_S

    @classmethod
    def with_timeout(cls, seconds: float) -> type[HeaderDeadlineH11]:
        """This protocol with a deadline of ``seconds`` (what uvicorn's ``http=`` takes)."""
        return type(cls.__name__, (cls,), {"header_timeout_s": seconds})

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._arm()

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._too_slow,
                                                      self.cycle)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self, cycle_when_armed: Any) -> None:
        self._header_timer = None
        if self.cycle is cycle_when_armed and not self.transport.is_closing():
            self.transport.close()  # no request began since: its headers are too late

    def data_received(self, data: bytes) -> None:
        if self._between_requests():
            self._arm()  # the first bytes of the next request: its headers' clock runs
        super().data_received(data)
        if not self._between_requests():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # idle now: uvicorn's keep-alive timeout applies until data comes

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
