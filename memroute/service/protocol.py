"""How ``memroute serve`` runs uvicorn: its HTTP/1.1 protocol (h11) with a deadline on a
request's headers and JSON errors, and a server that says when it is ready.

uvicorn times out an idle keep-alive connection, but not one that is slow to send a
request's headers: a client trickling them holds its connection (and its file descriptor)
for as long as it likes. `HeaderDeadlineH11` closes a connection whose next request's
headers have not all arrived `HEADER_TIMEOUT_S` after the connection opened or its last
response ended; the rest of a body answered before it was read (a 401 sent from the
headers) counts as such, so it cannot hold the connection either. (A slow body the app
reads is timed out by the app: `memroute.service.app.BodyLimit`.)

A request h11 cannot parse never reaches the app: uvicorn answers it with a plain-text 400.
`HeaderDeadlineH11` answers with the service's JSON error body instead: 414 for a request
line over `H11_HEAD_LIMIT` (a long URL), 431 for headers over it, 400 for anything else
malformed.
"""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0
H11_HEAD_LIMIT = 16 * 1024  # uvicorn's default h11_max_incomplete_event_size
REFUSED_LINGER_S = 2.0
HEAD_SLICE = 1024  # bytes of a request's head h11 is given at a time


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
        self._refused: asyncio.TimerHandle | None = None  # closes a refused connection
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
        if self._refused is not None:
            return  # the rest of a refused request: read and dropped until the close
        if self._between_requests():
            self._arm()  # the first bytes of the next request: its headers' clock runs
        # h11 refuses a head over its limit only while the head is incomplete: one that
        # arrives in a single read passes whatever its size. Fed in slices, every head
        # over the limit (by more than a slice) is refused, however it arrives.
        while (len(data) > HEAD_SLICE and self.conn.their_state is h11.IDLE
               and self._refused is None and not self.transport.is_closing()):
            super().data_received(data[:HEAD_SLICE])
            data = data[HEAD_SLICE:]
        if self._refused is None:
            super().data_received(data)
        if not self._between_requests():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # idle now: uvicorn's keep-alive timeout applies until data comes

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._refused is not None:
            self._refused.cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 refused, as the service's JSON error."""
        status, kind, error = self._refusal()
        body = json.dumps({"error": error, "kind": kind}).encode()
        headers = [(b"content-type", b"application/json"), (b"connection", b"close"),
                   (b"content-length", str(len(body)).encode())]
        head = h11.Response(status_code=status, reason=HTTPStatus(status).phrase,
                            headers=headers)
        for event in (head, h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        # Closing now, with the rest of the request unread, would reset the connection and
        # could destroy the answer before the client reads it: stop sending, drop what
        # still comes, and close when the client does or after REFUSED_LINGER_S.
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._refused = self.loop.call_later(REFUSED_LINGER_S, self.transport.close)

    def _refusal(self) -> tuple[int, str, str]:
        """Why h11 refused the request: a head over its limit, or a malformed one."""
        limit = self.config.h11_max_incomplete_event_size or H11_HEAD_LIMIT
        head, _ = self.conn.trailing_data
        if len(head) > limit:
            if b"\r\n" not in head[:limit]:
                return 414, "URITooLong", f"request line over {limit} bytes: the URL is too long"
            return 431, "HeadersTooLarge", f"request headers over {limit} bytes"
        return 400, "BadRequest", "malformed HTTP request"


class AnnouncedServer(uvicorn.Server):
    """uvicorn's server, printing one line once it listens and its service (``app.state
    .opener``, opened in the background) is ready: where, the docs, MCP. A service that
    fails to open stops the server; `failed` says why."""

    def __init__(self, config: uvicorn.Config, *, mcp: bool, app: Any = None) -> None:
        super().__init__(config)
        self.mcp, self.app = mcp, app
        self.failed: Exception | None = None
        self._announcing: asyncio.Future[None] | None = None

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
            self._announcing = asyncio.ensure_future(self._announce(url))

    async def _announce(self, url: str) -> None:
        opener = getattr(getattr(self.app, "state", None), "opener", None)
        if opener is not None and await opener.wait() == "failed":
            if not self.should_exit:  # not stopped while it opened (a signal, a shutdown)
                self.failed = opener.error
                self.should_exit = True
            return
        mcp = f", MCP {url}/mcp" if self.mcp else ""
        print(f"memroute serve: ready on {url} (REST {url}/v1, docs {url}/docs{mcp})",
              flush=True)
