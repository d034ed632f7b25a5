"""The data the memory stores and returns: scopes, episodes and scored results."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memroute.errors import InvalidInputError
from memroute.memory.limits import DEFAULT_PROJECT, MAX_ID_CHARS
# declared without pydantic (a served CLI command prints them), importable from here too
from memroute.memory.results import ScoredResult, ShownWindow, disjoint_windows  # noqa: F401

MAX_CONTENT_CHARS = 1_000_000
# produced_at must lie in years 1..9999 once converted to UTC: the range both PostgreSQL's
# timestamptz and Python's datetime can hold, whatever the offset it was written with.
MIN_PRODUCED_AT = datetime.min.replace(tzinfo=timezone.utc)
MAX_PRODUCED_AT = datetime.max.replace(tzinfo=timezone.utc)
SCOPE_PART_PATTERN = r"^[\w.:@\-]{1,128}$"  # each id of a scope
# metadata keys only the LangGraph store face writes, on its items' episodes (their namespace,
# value and expiry, `memroute.memory.items`): another write naming one is refused, so no
# episode can pass for an item, nor hide itself or its scope behind a made-up expiry
STORE_METADATA_KEYS = ("store_ns", "store_value", "store_expires_at")


def reserved_metadata_problem(metadata: dict[str, Any]) -> str | None:
    """Why ``metadata`` cannot be written by a caller (it names a store key), or None."""
    taken = [key for key in STORE_METADATA_KEYS if key in metadata]
    return (f"metadata keys {taken} are reserved for the LangGraph store's items"
            if taken else None)
_SCOPE_PART = re.compile(SCOPE_PART_PATTERN)


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as PostgreSQL text (NUL byte, lone surrogate), or None."""
    if "\x00" in value:
        return "must not contain NUL bytes"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (it contains a lone surrogate)"
    return None


class _FloatsKeptEncoder(json.JSONEncoder):
    """JSON whose floats stay floats in jsonb. jsonb keeps a number as a decimal: ``1e+20``
    comes back as ``100000000000000000000``, which reads as an int; a float that Python
    prints with an exponent (1e16 and beyond) is written out in full, with ``.0``."""

    def iterencode(self, o: Any, _one_shot: bool = False) -> Any:
        def floatstr(value: float) -> str:
            text = float.__repr__(value)  # finite: `json_text` checked it first
            return f"{int(value)}.0" if "e+" in text else text

        encode = (json.encoder.py_encode_basestring_ascii if self.ensure_ascii
                  else json.encoder.py_encode_basestring)
        return json.encoder._make_iterencode(
            {} if self.check_circular else None, self.default, encode, self.indent,
            floatstr, self.key_separator, self.item_separator, self.sort_keys,
            self.skipkeys, _one_shot)(o, 0)


_FLOATS_KEPT = _FloatsKeptEncoder(allow_nan=False, ensure_ascii=False)


def json_text(value: Any) -> str:
    """``value`` as JSON that PostgreSQL's jsonb accepts, or ValueError saying why not
    (NaN/Infinity, NUL characters, lone surrogates, integers too long to print). Every
    write of jsonb goes through it, so a float comes back a float (`_FloatsKeptEncoder`)."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        if "e+" in text:  # maybe a float with an exponent (or only a string holding "e+")
            text = _FLOATS_KEPT.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"must be finite JSON: {exc}") from exc
    if "\\u0000" in text:
        raise ValueError("must not contain NUL characters")
    problem = text_problem(text)
    if problem:
        raise ValueError(problem)
    return text


def _reject_bad_text(value: str, what: str) -> str:
    problem = text_problem(value)
    if problem:
        raise ValueError(f"{what} {problem}")
    return value


class Scope(BaseModel):
    """Who a memory belongs to. Every read and write is confined to one scope."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    org_id: str
    project_id: str = DEFAULT_PROJECT
    user_id: str | None = None
    agent_id: str | None = None

    @field_validator("org_id", "project_id", "user_id", "agent_id")
    @classmethod
    def _check_part(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _SCOPE_PART.fullmatch(value):
            raise ValueError(
                "scope ids are 1-128 characters of letters, digits, '_', '-', '.', ':' or '@'"
            )
        return value

    @property
    def key(self) -> str:
        """A stable identifier of the scope, the column every statement filters (and shards) by."""
        raw = json.dumps([self.org_id, self.project_id, self.user_id, self.agent_id])
        return hashlib.sha256(raw.encode()).hexdigest()[:32]

    def as_dict(self) -> dict[str, str | None]:
        return self.model_dump()


class Episode(BaseModel):
    """One conversation turn or document passage."""

    model_config = ConfigDict(frozen=True)

    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    producer: str = Field(default="user", min_length=1, max_length=MAX_ID_CHARS)
    session_id: str = Field(default="default", min_length=1, max_length=MAX_ID_CHARS)
    produced_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    metadata: dict[str, Any] = Field(default_factory=dict)
    uid: str | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS)

    @field_validator("content", "producer", "session_id", "uid")
    @classmethod
    def _storable_text(cls, value: str | None) -> str | None:
        return None if value is None else _reject_bad_text(value, "text fields")

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content must not be blank")
        return value

    @field_validator("produced_at")
    @classmethod
    def _aware_in_range(cls, value: datetime) -> datetime:
        aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        try:
            aware.astimezone(timezone.utc)
        except OverflowError:
            raise ValueError(
                "produced_at must lie in years 1..9999 after conversion to UTC") from None
        return aware

    @field_validator("metadata")
    @classmethod
    def _json_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            json_text(value)
        except ValueError as exc:
            raise ValueError(f"metadata {exc}") from exc
        return value

    def with_uid(self, scope: Scope, occurrence: int = 0) -> Episode:
        """This episode with a uid: its own, else `default_uid`."""
        return self if self.uid else self.model_copy(
            update={"uid": default_uid(scope, self, occurrence)})


def default_uid(scope: Scope, episode: Episode, occurrence: int = 0) -> str:
    """The uid of an episode given without one: a hash of its scope, session, producer, time
    (as UTC) and content, so adding it again (a retry) stores it once. ``occurrence`` tells
    apart identical episodes of one call (the same words, in the same session, at the same
    time)."""
    raw = json.dumps([scope.key, episode.session_id, episode.producer,
                      episode.produced_at.astimezone(timezone.utc).isoformat(),
                      episode.content, occurrence])
    return "ep-" + hashlib.sha256(raw.encode()).hexdigest()[:32]


def coerce_scope(scope: Scope | dict[str, Any]) -> Scope:
    """A `Scope` from a scope or a mapping, or a typed error."""
    if isinstance(scope, Scope):
        return scope
    if isinstance(scope, dict):
        unknown = sorted(str(key) for key in scope if key not in Scope.model_fields)
        if unknown:
            raise InvalidInputError(
                f"unknown scope key(s) {unknown}: a scope has {list(Scope.model_fields)}")
        try:
            return Scope(**scope)
        except (ValidationError, TypeError) as exc:
            raise InvalidInputError(f"invalid scope: {exc}") from exc
    raise InvalidInputError(f"scope must be a Scope or a dict, not {type(scope).__name__}")


def coerce_episode(item: Episode | dict[str, Any], position: int) -> Episode:
    """An `Episode` from an episode or a mapping, or a typed error naming its position."""
    try:
        return item if isinstance(item, Episode) else Episode(**item)
    except (ValidationError, TypeError) as exc:
        raise InvalidInputError(f"episode #{position} is invalid: {exc}") from exc


def with_default_uids(scope: Scope, episodes: list[Episode]) -> list[Episode]:
    """The episodes, those without a uid given their `default_uid`."""
    seen: dict[str, int] = {}
    done = []
    for episode in episodes:
        if episode.uid is None:
            first = default_uid(scope, episode)
            episode = episode.with_uid(scope, seen.get(first, 0))
            seen[first] = seen.get(first, 0) + 1
        done.append(episode)
    return done


def flatten(results: list[ScoredResult]) -> list[Episode]:
    """The episodes of all results, deduplicated by uid, in chronological order."""
    seen: dict[str, Episode] = {}
    for result in results:
        for episode in result.episodes:
            seen.setdefault(episode.uid or "", episode)
    return sorted(seen.values(), key=lambda e: (e.produced_at, e.uid or ""))


@dataclass(frozen=True)
class StoredEpisode:
    """An episode as the store holds it, with when its uid was first written
    (``produced_at`` says when its current content was produced)."""

    episode: Episode
    created_at: datetime
    scope: Scope
