"""Which scopes each statement memroute sends can reach (docs/scaling.md).

`StatementLog` records every statement memroute's own code sends through psycopg while the
tests run (the test code's own SQL is not memroute's and is left out), with the memroute
function that sent it. `route` reads a statement with PostgreSQL's own parser (pglast) and
says whether it reaches one scope of the data tables, the way Citus routes a query to one
shard: every reference to a data table is pinned to one scope key by an equality with a
parameter, or with the scope key of a reference pinned already (a join on the distribution
column), through ANDs of its own query level or an enclosing one. A statement naming a
partition of the sentences table (memroute.memory.tiers) is a placement: moving a scope
between tiers, which on Citus is Citus's own tenant isolation.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import psycopg
from pglast import ast, enums, parse_sql

from memroute.memory.schema import DISTRIBUTION_COLUMN
from memroute.memory.tiers import PLACE_NAME

ONE_SCOPE = "one scope"  # every data table pinned to one scope key: one shard
PER_ROW = "per row"  # COPY into a data table: each row goes to its scope's shard
SCHEMA_CHANGE = "schema change"  # DDL and maintenance, run on every shard
NO_DATA = "no data table"
PLACEMENT = "placement"  # names a partition: a scope's move between tiers
MULTI_SCOPE = "multi-scope"

_LIBRARY_MODULES = re.compile(r"^(psycopg|psycopg_pool|asyncio|contextlib|statement_routes)"
                              r"(\.|$)")


def _caller() -> str | None:
    """``module:function`` of the innermost caller outside psycopg, when it is memroute's."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not _LIBRARY_MODULES.match(module):
            if module == "memroute" or module.startswith("memroute."):
                return f"{module}:{frame.f_code.co_qualname.split('.<locals>')[0]}"
            return None
        frame = frame.f_back
    return None


class StatementLog:
    """The distinct (statement, memroute caller) pairs sent through psycopg's cursors while
    installed."""

    def __init__(self, keep_params: int = 0) -> None:
        self.sent: dict[tuple[str, str], int] = {}
        # (statement, caller) -> the parameters of its first ``keep_params`` executions
        self.params: dict[tuple[str, str], list[object]] = {}
        self.keep_params = keep_params
        self._originals: list[tuple[type, str, object]] = []

    def _record(self, query: object, cursor: object, args: tuple = ()) -> None:
        caller = _caller()
        if caller is None:
            return
        if isinstance(query, bytes):
            query = query.decode()
        elif not isinstance(query, str):
            query = query.as_string(cursor)
        key = (query, caller)
        self.sent[key] = self.sent.get(key, 0) + 1
        kept = self.params.setdefault(key, [])
        if args and len(kept) < self.keep_params:
            kept.append(args[0])

    def install(self) -> None:
        log = self
        for cls in (psycopg.AsyncCursor, psycopg.Cursor):
            for name in ("execute", "executemany", "copy"):
                original = getattr(cls, name)
                self._originals.append((cls, name, original))
                setattr(cls, name, _recording(original, log))

    def uninstall(self) -> None:
        for cls, name, original in reversed(self._originals):
            setattr(cls, name, original)
        self._originals.clear()


# installed for the whole test session by conftest.py; tests/test_scaling.py reads it last
SESSION_LOG = StatementLog()


def _recording(original, log: StatementLog):
    def recording(self, query, *args, **kwargs):
        log._record(query, self, args or ((kwargs["params"],) if "params" in kwargs else ()))
        return original(self, query, *args, **kwargs)
    recording.__name__ = original.__name__
    return recording


_PLACEHOLDER = re.compile(r"%\(\w+\)s|%s|%%")


def postgres_text(query: str) -> str:
    """psycopg's placeholders (``%s``, ``%(name)s``) as PostgreSQL's (``$n``)."""
    numbers: dict[str, int] = {}

    def number(match: re.Match) -> str:
        if match.group() == "%%":
            return "%"
        name = match.group() if match.group() != "%s" else f"#{len(numbers)}"
        return f"${numbers.setdefault(name, len(numbers) + 1)}"

    return _PLACEHOLDER.sub(number, query)


def route(query: str, data_tables: set[str]) -> str:
    """How the statement(s) of ``query`` reach the data tables (``data_tables``: their
    names, in any schema): `ONE_SCOPE`, `PER_ROW`, `SCHEMA_CHANGE`, `NO_DATA` or
    `MULTI_SCOPE` (the widest of its statements)."""
    order = [NO_DATA, ONE_SCOPE, PER_ROW, SCHEMA_CHANGE, PLACEMENT, MULTI_SCOPE]
    found = [_route(raw.stmt, data_tables) for raw in parse_sql(postgres_text(query))]
    return max(found, key=order.index, default=NO_DATA)


def _sublinks(node: object) -> Iterator[ast.SubLink]:
    """The subqueries in an expression, not those nested in them."""
    if isinstance(node, tuple | list):
        for item in node:
            yield from _sublinks(item)
    elif isinstance(node, ast.SubLink):
        yield node
    elif isinstance(node, ast.Node) and not isinstance(node, ast.SelectStmt):
        for name in node:
            yield from _sublinks(getattr(node, name))


def _data_refs(node: object, data_tables: set[str]) -> Iterator[ast.RangeVar]:
    for child in _walk(node):
        if (isinstance(child, ast.RangeVar) and child.schemaname
                and child.relname in data_tables):
            yield child


def _walk(node: object) -> Iterator[object]:
    if isinstance(node, tuple | list):
        for item in node:
            yield from _walk(item)
    elif isinstance(node, ast.Node):
        yield node
        for name in node:
            yield from _walk(getattr(node, name))


def _place_refs(stmt: ast.Node) -> Iterator[str]:
    """The partitions of the sentences table a statement names (a DROP's names too)."""
    for child in _walk(stmt):
        if isinstance(child, ast.RangeVar) and child.schemaname and PLACE_NAME.match(
                child.relname):
            yield child.relname
    if isinstance(stmt, ast.DropStmt):
        for names in stmt.objects or ():
            if isinstance(names, tuple | list) and names and PLACE_NAME.match(names[-1].sval):
                yield names[-1].sval


def _route(stmt: ast.Node, data_tables: set[str]) -> str:
    if any(_place_refs(stmt)):
        return PLACEMENT
    if not any(_data_refs(stmt, data_tables)):
        return NO_DATA
    if isinstance(stmt, ast.CopyStmt):
        return PER_ROW if stmt.is_from and stmt.query is None else MULTI_SCOPE
    if not isinstance(stmt, ast.SelectStmt | ast.InsertStmt | ast.UpdateStmt | ast.DeleteStmt):
        return SCHEMA_CHANGE
    return ONE_SCOPE if _pinned(stmt, data_tables, set()) else MULTI_SCOPE


def _name(ref: ast.RangeVar) -> str:
    return ref.alias.aliasname if ref.alias else ref.relname


def _conjuncts(expr: object) -> Iterator[ast.Node]:
    if isinstance(expr, ast.BoolExpr) and expr.boolop == enums.BoolExprType.AND_EXPR:
        for arg in expr.args:
            yield from _conjuncts(arg)
    elif isinstance(expr, ast.Node):
        yield expr


def _level_items(stmt: ast.Node) -> tuple[list[ast.Node], list[object], list[ast.Node]]:
    """A query level's own FROM items (range references, join quals collected), its
    qualifications, and its sub-levels (CTEs, subqueries, set-operation arms)."""
    items: list[ast.Node] = []
    quals: list[object] = []
    subs: list[ast.Node] = []

    def from_item(item: object) -> None:
        if isinstance(item, ast.JoinExpr):
            from_item(item.larg)
            from_item(item.rarg)
            quals.append(item.quals)
        elif isinstance(item, ast.RangeSubselect):
            subs.append(item.subquery)
        elif isinstance(item, ast.Node):
            items.append(item)

    from_clause: tuple = ()
    if isinstance(stmt, ast.SelectStmt):
        if stmt.op != enums.SetOperation.SETOP_NONE:
            return [], [], [stmt.larg, stmt.rarg]
        from_clause = stmt.fromClause or ()
        quals.append(stmt.whereClause)
    elif isinstance(stmt, ast.UpdateStmt):
        from_clause = (stmt.relation, *(stmt.fromClause or ()))
        quals.append(stmt.whereClause)
    elif isinstance(stmt, ast.DeleteStmt):
        from_clause = (stmt.relation, *(stmt.usingClause or ()))
        quals.append(stmt.whereClause)
    elif isinstance(stmt, ast.InsertStmt) and stmt.selectStmt is not None:
        subs.append(stmt.selectStmt)
    for item in from_clause:
        from_item(item)
    with_clause = getattr(stmt, "withClause", None)
    if with_clause is not None:
        subs.extend(cte.ctequery for cte in with_clause.ctes)
    # subqueries in expressions (target list, quals, ...) are levels of their own
    for name in stmt:
        if name not in ("fromClause", "usingClause", "withClause", "whereClause", "larg",
                        "rarg", "selectStmt"):
            subs.extend(link.subselect for link in _sublinks(getattr(stmt, name)))
    subs.extend(link.subselect for q in quals for link in _sublinks(q))
    for item in items:
        if isinstance(item, ast.RangeFunction):
            subs.extend(f for f in _walk(item.functions) if isinstance(f, ast.SelectStmt))
    return items, quals, subs


def _column(node: object) -> tuple[str | None, str] | None:
    """(qualifier or None, column) of a column reference."""
    if not isinstance(node, ast.ColumnRef):
        return None
    names = [f.sval for f in node.fields if isinstance(f, ast.String)]
    if len(names) != len(node.fields):
        return None  # a star
    return (names[-2] if len(names) > 1 else None, names[-1])


def _pinned(stmt: ast.Node, data_tables: set[str], outer: set[str]) -> bool:
    """Whether every data-table reference in this level and its sub-levels is pinned to one
    scope key (``outer``: the pinned names of the enclosing levels)."""
    items, quals, subs = _level_items(stmt)
    refs = [i for i in items if isinstance(i, ast.RangeVar) and i.schemaname
            and i.relname in data_tables]
    if isinstance(stmt, ast.InsertStmt) and stmt.relation.relname in data_tables:
        if not _inserts_one_scope(stmt):
            return False
    pinned = set(outer)
    equalities = [c for q in quals for c in _conjuncts(q)
                  if isinstance(c, ast.A_Expr) and c.kind == enums.A_Expr_Kind.AEXPR_OP
                  and len(c.name) == 1 and c.name[0].sval == "="]
    changed = True
    while changed:
        changed = False
        for eq in equalities:
            for side, other in ((eq.lexpr, eq.rexpr), (eq.rexpr, eq.lexpr)):
                column = _column(side)
                if column is None or column[1] != DISTRIBUTION_COLUMN:
                    continue
                owner = column[0] if column[0] else (_name(refs[0]) if len(refs) == 1 else None)
                other_column = _column(other)
                anchored = isinstance(other, ast.ParamRef) or (
                    other_column is not None and other_column[1] == DISTRIBUTION_COLUMN
                    and other_column[0] in pinned)
                if owner and anchored and owner not in pinned:
                    pinned.add(owner)
                    changed = True
    if any(_name(ref) not in pinned for ref in refs):
        return False
    return all(_pinned(sub, data_tables, pinned) for sub in subs)


def _inserts_one_scope(stmt: ast.InsertStmt) -> bool:
    """An INSERT whose scope key column takes one parameter in every row."""
    columns = [c.name for c in stmt.cols or ()]
    if DISTRIBUTION_COLUMN not in columns or stmt.selectStmt is None:
        return False
    at = columns.index(DISTRIBUTION_COLUMN)
    select = stmt.selectStmt
    rows = ([row for row in select.valuesLists] if select.valuesLists
            else [[t.val for t in select.targetList or ()]])
    values = {row[at].number if isinstance(row[at], ast.ParamRef) else None for row in rows
              if len(row) > at}
    return len(values) == 1 and None not in values
