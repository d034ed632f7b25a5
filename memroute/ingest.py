"""Read episodes from files (JSON Lines, benchmark data sets) and store them in batches.

Besides JSON Lines, a format is a reader that an installed package registers as an entry
point in the ``memroute.ingest_formats`` group (memroute's evaluation registers hotpotqa,
2wiki, musique and locomo): ``reader(path, *, limit, seed)`` returns
``(conversation, episodes)`` pairs.

JSON Lines: one episode per line, an object with ``content`` and optionally ``producer``,
``session_id``, ``produced_at`` (ISO-8601), ``metadata`` and ``uid``. A line without a uid
gets a stable one derived from its fields (and its occurrence among identical lines), so
ingesting the same file twice stores it once.

Every line is validated before anything is written: `read_jsonl` returns the valid episodes
and the bad lines with their numbers, and `store_batches` writes whole batches, each in one
atomic `Memory.add`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memroute.errors import InvalidInputError
from memroute.memory.models import Episode, Scope

FORMAT_ENTRY_POINTS = "memroute.ingest_formats"
EPISODE_FIELDS = frozenset(["content", "producer", "session_id", "produced_at", "metadata", "uid"])
DEFAULT_BATCH_SIZE = 256


@dataclass(frozen=True)
class LineError:
    """A line of an input file that is not a valid episode."""

    line: int
    message: str


@dataclass
class ParsedFile:
    """The valid episodes of a file, the bad lines, and how many lines held a record."""

    episodes: list[Episode] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)
    records: int = 0


def stable_uid(record: dict[str, Any], occurrence: int) -> str:
    """A uid from an episode's own fields, so re-ingesting a file is idempotent."""
    raw = json.dumps([record, occurrence], sort_keys=True, default=str)
    return "ep-" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "episode"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def parse_jsonl_line(text: str, seen: Counter[str]) -> Episode:
    """One JSON Lines record as an `Episode`; raises `InvalidInputError` naming the problem."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"not valid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(record, dict):
        raise InvalidInputError(f"expected a JSON object, got {type(record).__name__}")
    unknown = sorted(set(record) - EPISODE_FIELDS)
    if unknown:
        raise InvalidInputError(
            f"unknown field(s) {', '.join(unknown)}; put extra data under 'metadata'")
    if record.get("uid") is None:
        key = json.dumps(record, sort_keys=True, default=str)
        record = {**record, "uid": stable_uid(record, seen[key])}
        seen[key] += 1
    try:
        return Episode(**record)
    except ValidationError as exc:
        raise InvalidInputError(_validation_message(exc)) from exc


def read_jsonl(path: Path) -> ParsedFile:
    """Parse and validate every line of a JSON Lines file (blank lines are skipped)."""
    parsed = ParsedFile()
    seen: Counter[str] = Counter()
    try:
        handle = Path(path).open(encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                parsed.records += 1
                try:
                    parsed.episodes.append(parse_jsonl_line(text, seen))
                except InvalidInputError as exc:
                    parsed.errors.append(LineError(number, str(exc)))
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f"{path} is not UTF-8 text: {exc.reason}") from exc
    return parsed


def ingest_formats() -> tuple[str, ...]:
    """``jsonl`` and the formats installed packages register."""
    return ("jsonl", *(ep.name for ep in entry_points(group=FORMAT_ENTRY_POINTS)))


def check_format(fmt: str) -> None:
    """Raise `InvalidInputError` unless ``fmt`` is one of `ingest_formats`."""
    formats = ingest_formats()
    if fmt not in formats:
        raise InvalidInputError(f"unknown --format {fmt!r}: use one of {', '.join(formats)}")


def read_dataset(path: Path, fmt: str, *, limit: int | None = None,
                 seed: int = 0) -> list[tuple[str | None, list[Episode]]]:
    """The episodes of a data file in a registered format, as ``(conversation, episodes)``
    pairs: ``None`` for one pooled scope, else a conversation id whose turns form one scope.
    """
    found = tuple(entry_points(group=FORMAT_ENTRY_POINTS, name=fmt))
    if not found:
        raise InvalidInputError(f"no data set reader is registered for --format {fmt!r}")
    return found[0].load()(Path(path), limit=limit, seed=seed)


def conversation_scope(scope: Scope, conversation: str | None) -> Scope:
    """The caller's scope, or for one LoCoMo conversation: that scope with ``user_id`` set
    to the conversation id."""
    if conversation is None:
        return scope
    return Scope(**{**scope.as_dict(), "user_id": conversation})


def batched(items: list[Episode], size: int) -> Iterator[list[Episode]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


async def store_batches(memory: Any, scope: Scope, episodes: Iterable[Episode], *,
                        batch_size: int = DEFAULT_BATCH_SIZE,
                        on_batch: Callable[[int], None] | None = None) -> int:
    """Store validated episodes, one atomic batch at a time (`Memory.add_batches`: the next
    batch is embedded while the previous one is written); returns how many were sent.

    Re-sending episodes whose uid is stored already is a no-op (``Memory.add`` is
    idempotent by uid), so an interrupted ingestion can simply be run again.
    """
    sent = 0
    async for uids in memory.add_batches(scope, batched(list(episodes), batch_size)):
        sent += len(uids)
        if on_batch is not None:
            on_batch(len(uids))
    return sent
