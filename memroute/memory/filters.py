"""The filter dialect, compiled to parameterized SQL.

A filter is a mapping. Each key is a field, or ``$and`` / ``$or`` with a list of filters:

    {"producer": "user"}                                  # equality
    {"topic": {"$in": ["billing", "refund"]}}             # metadata key "topic"
    {"$or": [{"priority": {"$gte": 2}}, {"vip": {"$exists": True}}]}
    {"produced_at": {"$gte": "2024-01-01T00:00:00Z"}}

Fields ``session_id``, ``producer`` and ``produced_at`` are columns; any other name is a key
of the episode's metadata (``a.b`` reaches into nested objects). In a search, ``mentions_day``
(``$in`` a list of ISO dates, or ``$eq`` one) keeps the sentences that name one of those days,
read against when each was said ("on Saturday", said on Tuesday 24 June 2025, names
"2025-06-28"; `memroute.time.expressions.days_named`). Operators: ``$eq``, ``$ne``,
``$in``, ``$nin``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$exists``. Values are always bound
as parameters; names are validated; anything else raises `FilterError`.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from memroute.errors import FilterError
from memroute.memory.models import json_text, text_problem
from memroute.time.expressions import day_key

MAX_DEPTH = 8
MAX_CLAUSES = 64
MAX_LIST = 1000
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}(?:\.[A-Za-z_][A-Za-z0-9_\-]{0,63}){0,7}$")
_COMPARE = {"$eq": "=", "$ne": "IS DISTINCT FROM", "$gt": ">", "$gte": ">=", "$lt": "<",
            "$lte": "<="}
_OPERATORS = frozenset([*_COMPARE, "$in", "$nin", "$exists"])
_TEXT_COLUMNS = frozenset(["session_id", "producer"])
_SCALAR = (str, int, float, bool, type(None))
MENTIONS_DAY = "mentions_day"
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class _Compiler:
    def __init__(self, alias: str, document: str, columns: bool, sentences: bool,
                 sentences_table: str) -> None:
        self.alias = alias
        self.document = document
        self.columns = columns
        self.sentences = sentences
        self.sentences_table = sentences_table
        self.params: list[Any] = []
        self.clauses = 0

    def compile(self, node: Any, depth: int) -> str:
        if depth > MAX_DEPTH:
            raise FilterError(f"filter is nested deeper than {MAX_DEPTH} levels")
        if not isinstance(node, dict) or not node:
            raise FilterError(f"a filter must be a non-empty mapping, got {node!r:.80}")
        parts = []
        for key, value in node.items():
            if not isinstance(key, str):
                raise FilterError(f"filter keys must be strings, got {key!r:.40}")
            if key in ("$and", "$or"):
                if not isinstance(value, list) or not value:
                    raise FilterError(f"{key} takes a non-empty list of filters")
                joined = f" {key[1:].upper()} ".join(self.compile(v, depth + 1) for v in value)
                parts.append(f"({joined})")
            elif key.startswith("$"):
                raise FilterError(f"unknown logical operator {key!r}: use $and or $or")
            else:
                parts.append(self.field(key, value))
        return "(" + " AND ".join(parts) + ")"

    def field(self, name: str, condition: Any) -> str:
        if not _KEY.fullmatch(name):
            raise FilterError(f"invalid field name {name!r:.80}")
        if isinstance(condition, dict):
            if not condition:
                raise FilterError(f"empty condition for {name!r}")
            return " AND ".join(self.operator(name, op, v) for op, v in condition.items())
        return self.operator(name, "$eq", condition)

    def operator(self, name: str, op: Any, value: Any) -> str:
        self.clauses += 1
        if self.clauses > MAX_CLAUSES:
            raise FilterError(f"filter has more than {MAX_CLAUSES} conditions")
        if op not in _OPERATORS:
            raise FilterError(f"unknown operator {op!r:.40} on {name!r}; use one of {sorted(_OPERATORS)}")
        if self.columns and name in _TEXT_COLUMNS:
            return self.text_column(name, op, value)
        if self.columns and name == "produced_at":
            return self.time_column(op, value)
        if self.columns and name == MENTIONS_DAY:
            return self.mentions_day(op, value)
        return self.metadata(name, op, value)

    def bind(self, value: Any) -> str:
        self.params.append(value)
        return "%s"

    def text_column(self, name: str, op: str, value: Any) -> str:
        column = f"{self.alias}.{name}"
        if op == "$exists":
            raise FilterError(f"$exists does not apply to the column {name!r}")
        if op in ("$in", "$nin"):
            values = [self.text(name, v) for v in self.list_of(name, op, value, str)]
            neg = "NOT " if op == "$nin" else ""
            return f"{neg}({column} = ANY({self.bind(values)}::text[]))"
        if not isinstance(value, str):
            raise FilterError(f"{name} compares with strings, got {type(value).__name__}")
        return f"{column} {_COMPARE[op]} {self.bind(self.text(name, value))}"

    def time_column(self, op: str, value: Any) -> str:
        column = f"{self.alias}.produced_at"
        if op in ("$exists", "$in", "$nin"):
            raise FilterError(f"{op} does not apply to produced_at")
        return f"{column} {_COMPARE[op]} {self.bind(parse_time(value))}"

    def mentions_day(self, op: str, value: Any) -> str:
        if not (self.sentences or self.sentences_table):
            raise FilterError(f"{MENTIONS_DAY} filters the sentences of a search, not episodes")
        if op not in ("$eq", "$in"):
            raise FilterError(f"{MENTIONS_DAY} takes $in (a list of ISO dates) or $eq (one)")
        days = self.list_of(MENTIONS_DAY, op, value, str) if op == "$in" else [value]
        keys = []
        for day in days:
            try:
                keys.append(day_key(datetime.fromisoformat(day)) if isinstance(day, str)
                            and _ISO_DAY.fullmatch(day) else None)
            except ValueError:
                keys.append(None)
            if keys[-1] is None:
                raise FilterError(f"{MENTIONS_DAY} takes ISO dates (2025-06-28), got {day!r:.40}")
        if self.sentences:
            return f"({self.alias}.entity_keys && {self.bind(keys)}::text[])"
        # an episode names a day when one of its sentences does
        return (f"EXISTS (SELECT 1 FROM {self.sentences_table} d WHERE d.scope_key = "
                f"{self.alias}.scope_key AND d.episode_uid = {self.alias}.uid "
                f"AND d.entity_keys && {self.bind(keys)}::text[])")

    def metadata(self, name: str, op: str, value: Any) -> str:
        path = name.split(".")

        def target() -> str:  # binds the path each time it appears in the SQL
            return f"({self.alias}.{self.document} #> {self.bind(path)}::text[])"

        if op == "$exists":
            if not isinstance(value, bool):
                raise FilterError(f"$exists takes true or false, got {value!r:.40}")
            return f"{target()} IS {'NOT ' if value else ''}NULL"
        if op in ("$in", "$nin"):
            values = [self.json(name, v) for v in self.list_of(name, op, value, _SCALAR)]
            neg = "NOT " if op == "$nin" else ""
            return f"{neg}coalesce({target()} = ANY({self.bind(values)}::jsonb[]), false)"
        if not isinstance(value, _SCALAR):
            raise FilterError(f"{name} {op} takes a string, number, boolean or null")
        if op in ("$eq", "$ne"):
            return f"{target()} {_COMPARE[op]} {self.bind(self.json(name, value))}::jsonb"
        if value is None or isinstance(value, bool):
            raise FilterError(f"{op} compares numbers or strings, not {value!r}")
        # jsonb orders across types; require the same type so 3 > "abc" is never true.
        kind = "number" if isinstance(value, (int, float)) else "string"
        typed = f"jsonb_typeof({target()}) = '{kind}'"
        return f"({typed} AND {target()} {_COMPARE[op]} {self.bind(self.json(name, value))}::jsonb)"

    @staticmethod
    def text(name: str, value: str) -> str:
        problem = text_problem(value)
        if problem:
            raise FilterError(f"the value for {name} {problem}")
        return value

    @staticmethod
    def json(name: str, value: Any) -> str:
        try:
            return json_text(value)
        except ValueError as exc:
            raise FilterError(f"the value for {name} {exc}") from None

    @staticmethod
    def list_of(name: str, op: str, value: Any, kinds: Any) -> list[Any]:
        if not isinstance(value, list) or not value or len(value) > MAX_LIST:
            raise FilterError(f"{name} {op} takes a non-empty list of at most {MAX_LIST} values")
        if not all(isinstance(v, kinds) and not isinstance(v, (dict, list)) for v in value):
            raise FilterError(f"{name} {op} has a value of the wrong type")
        return value


def parse_time(value: Any) -> datetime:
    """A timezone-aware datetime from a datetime or an ISO-8601 string."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise FilterError(f"produced_at takes ISO-8601 times, got {value!r:.40}") from exc
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    raise FilterError(f"produced_at takes a datetime or ISO-8601 string, got {type(value).__name__}")


def compile_filter(filters: dict[str, Any] | None, alias: str, *, document: str = "metadata",
                   columns: bool = True, sentences: bool = False,
                   sentences_table: str = "") -> tuple[str, list[Any]]:
    """SQL (``TRUE`` when there is no filter) and its parameters, for the table ``alias``:
    fields are keys of its jsonb column ``document``, and (``columns``) the names of the
    episode columns are those columns. ``sentences``: ``alias`` is the sentences table, whose
    rows know the days they name (``mentions_day``); else ``sentences_table`` (an episodes
    table's): an episode names the days its sentences name."""
    if filters is None or (isinstance(filters, dict) and not filters):
        return "TRUE", []
    compiler = _Compiler(alias, document, columns, sentences, sentences_table)
    return compiler.compile(filters, 1), compiler.params
