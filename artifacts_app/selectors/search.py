"""Search as SQL: ``q`` and ``where`` (parsed by ``artifacts_app.search``) compiled into a filter
on the artifact table, for SQLite and PostgreSQL (API.md "Search", DESIGN.md §15).

SQLite: an FTS5 table ``INDEX_TABLE`` (columns ``head``, ``tail``) whose rowid is the id of a row
of ``ROW_TABLE`` (``artifact_id`` → rowid; the artifact table's own rowid would change under
VACUUM); a trigger on the artifact table removes both when a record goes, however it goes.
PostgreSQL: the artifact table's ``search_words`` tsvector column (GIN), and ``data`` (jsonb, GIN
``jsonb_path_ops``) for ``where``'s equalities and ``$contains`` by containment.

User text never reaches either engine's query syntax: only words (letters and digits) do, quoted
as literals.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from django.db import connection
from django.db.models import QuerySet

from artifacts_app import search
from artifacts_app.models import Artifact
from artifacts_app.search import (
    All,
    Any_,
    Condition,
    Scalar,
    Term,
    TextQuery,
    Where,
)

INDEX_TABLE = "artifacts_app_artifact_fts"
ROW_TABLE = "artifacts_app_artifact_fts_row"
VECTOR_COLUMN = "search_words"

_OPS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
# SQLite: a record's words have a rowid in its agent's range (the agent's id times 2**40, plus a
# sequence), so that a search of one agent reads only that agent's part of each word's list (FTS5
# seeks a rowid range), however many other agents hold the word.
AGENT_ROWID_BITS = 40


def agent_rowids(agent_id: int) -> tuple[int, int]:
    """The first and last FTS rowid of an agent's records (SQLite)."""
    low = agent_id << AGENT_ROWID_BITS
    return low, low + (1 << AGENT_ROWID_BITS) - 1


@dataclass(frozen=True)
class Sql:
    sql: str
    params: tuple[object, ...] = ()


def _table() -> str:
    return connection.ops.quote_name(Artifact._meta.db_table)


# --- q ---------------------------------------------------------------------------------------------


def _fts_term(term: Term) -> str:
    if len(term.words) > 1:
        # A phrase, within the head (where PostgreSQL keeps positions too).
        return 'head : "' + " ".join(term.words) + '"'
    return f'"{term.words[0]}"' + ("*" if term.prefix else "")


def _ts_term(term: Term) -> str:
    if len(term.words) > 1:
        return "(" + " <-> ".join(f"'{word}'" for word in term.words) + ")"
    return f"'{term.words[0]}':*" if term.prefix else f"'{term.words[0]}'"


def _matched(agent_id: int | None) -> tuple[str, tuple[int, ...]]:
    """SQLite: the ids of the records whose words match an FTS5 expression (the first
    parameter), within ``agent_id``'s rowid range when given (its bounds: the rest)."""
    matched = (
        f"SELECT r.artifact_id FROM {INDEX_TABLE} f JOIN {ROW_TABLE} r ON r.id = f.rowid "
        f"WHERE {INDEX_TABLE} MATCH %s"
    )
    if agent_id is None:
        return matched, ()
    return matched + " AND f.rowid BETWEEN %s AND %s", agent_rowids(agent_id)


def text_match(expression: str, agent_id: int | None) -> Sql:
    """SQLite: the records whose words match the FTS5 ``expression`` (built of quoted words)."""
    matched, ranged = _matched(agent_id)
    return Sql(f"{_table()}.id IN ({matched})", (expression, *ranged))


def text_filter(query: TextQuery, agent_id: int | None = None) -> Sql:
    """The records whose words match ``query`` (of ``agent_id``'s, when given: on SQLite the
    index is then read within the agent's rowid range)."""
    table = _table()
    if connection.vendor == "postgresql":
        parts = [_ts_term(term) for term in query.include]
        parts += [f"!{_ts_term(term)}" for term in query.exclude]
        return Sql(f"{table}.{VECTOR_COLUMN} @@ %s::tsquery", (" & ".join(parts),))
    matched, ranged = _matched(agent_id)
    clauses: list[str] = []
    params: list[object] = []
    excluded = " OR ".join(_fts_term(term) for term in query.exclude)
    if query.include:
        expression = " AND ".join(_fts_term(term) for term in query.include)
        if excluded:
            expression = f"({expression}) NOT ({excluded})"
        clauses.append(f"{table}.id IN ({matched})")
        params += [expression, *ranged]
    else:
        # Only exclusions: records that have been indexed, less those that match.
        clauses.append(f"{table}.id IN (SELECT artifact_id FROM {ROW_TABLE})")
        clauses.append(f"{table}.id NOT IN ({matched})")
        params += [excluded, *ranged]
    return Sql(" AND ".join(clauses), tuple(params))


# --- where -----------------------------------------------------------------------------------------


def _json(value: object) -> str:
    return orjson.dumps(value).decode()


def _nested(path: tuple[str, ...], value: object) -> str:
    for segment in reversed(path):
        value = {segment: value}
    return _json(value)


class _SQLite:
    def __init__(self, column: str) -> None:
        self.column = column

    def path(self, path: tuple[str, ...]) -> str:
        return "$" + "".join(f'."{segment}"' for segment in path)

    def eq_on(self, typ: Sql, val: Sql, value: Scalar) -> Sql:
        if value is None:
            return Sql(f"{typ.sql} = 'null'", typ.params)
        if isinstance(value, bool):
            return Sql(f"{typ.sql} = '{'true' if value else 'false'}'", typ.params)
        kinds = "'text'" if isinstance(value, str) else "'integer', 'real'"
        return Sql(
            f"({typ.sql} IN ({kinds}) AND {val.sql} = %s)", (*typ.params, *val.params, value)
        )

    def types(self, value: Scalar) -> str:
        if value is None:
            return "'null'"
        if isinstance(value, bool):
            return "'true', 'false'"
        if isinstance(value, str):
            return "'text'"
        return "'integer', 'real'"

    def condition(self, cond: Condition) -> Sql:
        p = self.path(cond.path)
        typ = Sql(f"json_type({self.column}, %s)", (p,))
        val = Sql(f"json_extract({self.column}, %s)", (p,))
        op, value = cond.op, cond.value
        if op == "$exists":
            return Sql(f"{typ.sql} IS {'NOT ' if value else ''}NULL", typ.params)
        if op == "$eq":
            assert not isinstance(value, tuple)
            return self.eq_on(typ, val, value)
        if op == "$ne":
            assert not isinstance(value, tuple)
            eq = self.eq_on(typ, val, value)
            return Sql(
                f"({typ.sql} IN ({self.types(value)}) AND NOT {eq.sql})", (*typ.params, *eq.params)
            )
        if op in _OPS:
            assert isinstance(value, str | int | float)
            kinds = "'text'" if isinstance(value, str) else "'integer', 'real'"
            return Sql(f"({typ.sql} IN ({kinds}) AND {val.sql} {_OPS[op]} %s)", (p, p, value))
        if op in ("$in", "$nin"):
            assert isinstance(value, tuple)
            eqs = [self.eq_on(typ, val, item) for item in value]
            any_eq = Sql(
                "(" + " OR ".join(e.sql for e in eqs) + ")",
                tuple(x for e in eqs for x in e.params),
            )
            if op == "$in":
                return any_eq
            kinds = ", ".join(sorted({self.types(item) for item in value}))
            return Sql(
                f"({typ.sql} IN ({kinds}) AND NOT {any_eq.sql})", (*typ.params, *any_eq.params)
            )
        # $contains: an array holding the value (one of its own elements).
        assert not isinstance(value, tuple)
        eq = self.eq_on(Sql("e.type"), Sql("e.value"), value)
        return Sql(
            f"({typ.sql} = 'array' AND EXISTS (SELECT 1 FROM json_each({self.column}, %s) e "
            f"WHERE {eq.sql}))",
            (p, p, *eq.params),
        )


class _PostgreSQL:
    def __init__(self, column: str) -> None:
        self.column = column

    def eq(self, path: tuple[str, ...], value: Scalar) -> Sql:
        # Containment finds candidates in the GIN index; the equality is the rule (jsonb compares
        # numbers as numbers, strings exactly, and a value of another type is never equal).
        return Sql(
            f"({self.column} @> %s::jsonb AND {self.column} #> %s = %s::jsonb)",
            (_nested(path, value), list(path), _json(value)),
        )

    def types(self, value: Scalar) -> str:
        if value is None:
            return "'null'"
        if isinstance(value, bool):
            return "'boolean'"
        if isinstance(value, str):
            return "'string'"
        return "'number'"

    def condition(self, cond: Condition) -> Sql:
        path = list(cond.path)
        x = f"({self.column} #> %s)"
        op, value = cond.op, cond.value
        if op == "$exists":
            return Sql(f"{x} IS {'NOT ' if value else ''}NULL", (path,))
        if op == "$eq":
            assert not isinstance(value, tuple)
            return self.eq(cond.path, value)
        if op == "$ne":
            assert not isinstance(value, tuple)
            return Sql(
                f"(jsonb_typeof({x}) = {self.types(value)} AND {x} <> %s::jsonb)",
                (path, path, _json(value)),
            )
        if op in _OPS:
            if isinstance(value, str):
                # Code point order: the C collation orders UTF-8 by bytes.
                return Sql(
                    f"(jsonb_typeof({x}) = 'string' AND ({self.column} #>> %s) COLLATE \"C\" "
                    f"{_OPS[op]} %s)",
                    (path, path, value),
                )
            return Sql(
                f"(jsonb_typeof({x}) = 'number' AND {x} {_OPS[op]} %s::jsonb)",
                (path, path, _json(value)),
            )
        if op == "$in":
            assert isinstance(value, tuple)
            eqs = [self.eq(cond.path, item) for item in value]
            return Sql(
                "(" + " OR ".join(e.sql for e in eqs) + ")",
                tuple(x for e in eqs for x in e.params),
            )
        if op == "$nin":
            assert isinstance(value, tuple)
            kinds = ", ".join(sorted({self.types(item) for item in value}))
            values = ", ".join(["%s::jsonb"] * len(value))
            return Sql(
                f"(jsonb_typeof({x}) IN ({kinds}) AND {x} NOT IN ({values}))",
                (path, path, *(_json(item) for item in value)),
            )
        assert not isinstance(value, tuple)
        return Sql(
            f"({self.column} @> %s::jsonb AND jsonb_typeof({x}) = 'array' "
            f"AND {x} @> jsonb_build_array(%s::jsonb))",
            (_nested(cond.path, [value]), path, path, _json(value)),
        )


def _needed_words(where: Where) -> list[str]:
    """FTS5 expressions that every record ``where`` finds must match: the words of the strings it
    requires equal (``$eq``, ``$contains``, ``$in`` as alternatives) outside ``$or``. Every string
    in ``data`` is indexed as words, so they narrow a search of one agent to the few records that
    hold them before the JSON is read (SQLite has no index over JSON paths)."""
    if isinstance(where, All):
        return [needed for part in where.parts for needed in _needed_words(part)]
    if not isinstance(where, Condition):
        return []
    values = where.value if where.op == "$in" else (where.value,)
    if where.op not in ("$eq", "$contains", "$in") or not isinstance(values, tuple):
        return []
    alternatives = []
    for value in values:
        found = search.words(value) if isinstance(value, str) else []
        if not found:
            return []  # a value without words (a number, "", "—") narrows nothing
        alternatives.append("(" + " AND ".join(f'"{word}"' for word in found) + ")")
    return ["(" + " OR ".join(alternatives) + ")"]


def where_filter(where: Where, agent_id: int | None = None) -> Sql:
    """The records whose ``data`` satisfies ``where``."""
    column = f"{_table()}.{connection.ops.quote_name('data')}"
    compiler = _PostgreSQL(column) if connection.vendor == "postgresql" else _SQLite(column)

    def walk(node: Where) -> Sql:
        if isinstance(node, Condition):
            return compiler.condition(node)
        parts = [walk(part) for part in node.parts]
        joiner = " AND " if isinstance(node, All) else " OR "
        assert isinstance(node, All | Any_)
        return Sql(
            "(" + joiner.join(p.sql for p in parts) + ")",
            tuple(x for p in parts for x in p.params),
        )

    compiled = walk(where)
    needed = _needed_words(where) if agent_id is not None else []
    if connection.vendor == "sqlite" and needed:
        narrowed = text_match(" AND ".join(needed), agent_id)
        compiled = Sql(f"{narrowed.sql} AND {compiled.sql}", (*narrowed.params, *compiled.params))
    return compiled


def search_filter(
    qs: QuerySet[Artifact],
    *,
    text: TextQuery | None,
    where: Where | None,
    agent_id: int | None = None,
) -> QuerySet[Artifact]:
    """``qs`` narrowed to the records ``text`` and ``where`` find (``agent_id``: ``qs`` holds
    only that agent's records)."""
    clauses: list[str] = []
    params: list[object] = []
    for compiled in (
        text_filter(text, agent_id) if text is not None else None,
        where_filter(where, agent_id) if where is not None else None,
    ):
        if compiled is not None:
            clauses.append(compiled.sql)
            params.extend(compiled.params)
    if not clauses:
        return qs
    return qs.extra(where=clauses, params=params)  # noqa: S610 (parameters only; words quoted)
