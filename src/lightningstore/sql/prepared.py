"""Prepared: a hot statement compiled once per dialect; on SQLite run straight on the driver's cursor.

A prebuilt statement still costs several times the sqlite3 driver's own call per execution in
SQLAlchemy (execution context, parameter and result processing, event dispatch), and the writer's
share of the GIL is what bounds SQLite throughput. So on SQLite the statement is
compiled once, its parameter and result processors are looked up once (the same ones SQLAlchemy
would use: JSON through the engine's serializer, floats, booleans) and each execution is one
driver call. On other dialects, and for statements with expanding IN lists, it is an ordinary
`conn.execute`. Driver errors are wrapped as SQLAlchemy's, as `conn.execute` would; engine
events (and `echo`) do not see the driver calls.
"""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from lightningstore.errors import InvalidInputError

Row = Mapping[str, Any]
_Processor = Callable[[Any], Any] | None


@dataclass
class Result:
    rows: list[Row]
    rowcount: int

    def first(self) -> Row | None:
        return self.rows[0] if self.rows else None


@dataclass
class _SqliteForm:
    """The statement as compiled for one SQLite dialect, with its processors resolved."""

    sql: str
    params: list[tuple[str, _Processor, Any]]
    """Per placeholder: parameter name, bind processor, and the value of a constant in the
    statement (`_GIVEN` when the caller supplies it)."""
    columns: list[str]
    processors: list[tuple[int, Callable[[Any], Any]]]

    def args(self, given: Row) -> tuple[Any, ...]:
        values = []
        for name, process, constant in self.params:
            value = given[name] if constant is _GIVEN else constant
            try:
                values.append(process(value) if process is not None else value)
            except InvalidInputError as exc:  # a value the column cannot hold: name the column
                raise InvalidInputError(name.removeprefix("p_"), exc.reason) from exc
        return tuple(values)

    def execute(self, driver: Any, given: Row) -> Result:
        args = self.args(given)
        try:
            cursor = driver.execute(self.sql, args)
            raw_rows = cursor.fetchall() if self.columns else []
        except sqlite3.Error as exc:
            raise _wrap(self.sql, args, exc) from exc
        return Result([self.row(raw) for raw in raw_rows], cursor.rowcount)

    def row(self, raw: Sequence[Any]) -> Row:
        values = list(raw)
        for index, process in self.processors:
            values[index] = process(values[index])
        return dict(zip(self.columns, values, strict=True))


_GIVEN = object()


class Prepared:
    """`Prepared(stmt).run(conn, params)`; `column_keys` names the parameters of a bare INSERT."""

    def __init__(self, stmt: sa.Executable, *, column_keys: Sequence[str] | None = None) -> None:
        self.stmt = stmt
        self._column_keys = list(column_keys) if column_keys is not None else None
        self._forms: weakref.WeakKeyDictionary[Dialect, _SqliteForm | None] = weakref.WeakKeyDictionary()

    def run(self, conn: sa.Connection, params: Row | list[Row] | None = None) -> Result:
        """Execute with one parameter set, or once per set of a list (an executemany); the rows
        it returns (SELECT or RETURNING) come back as mappings."""
        form = self._form(conn.dialect)
        if form is None:
            given: Any = [dict(p) for p in params] if isinstance(params, list) else dict(params or {})
            result = conn.execute(self.stmt, given)
            if not result.returns_rows:
                return Result([], result.rowcount)
            rows = [row._mapping for row in result]
            return Result(rows, len(rows))
        driver = conn.connection.driver_connection
        assert driver is not None
        if not isinstance(params, list):
            return form.execute(driver, params or {})
        if not form.columns:  # nothing comes back: one driver call for every set
            args = [form.args(p) for p in params]
            try:
                cursor = driver.executemany(form.sql, args)
            except sqlite3.Error as exc:
                raise _wrap(form.sql, args, exc) from exc
            return Result([], cursor.rowcount)
        rows: list[Row] = []
        count = 0
        for one in params:
            result = form.execute(driver, one)
            rows.extend(result.rows)
            count += result.rowcount
        return Result(rows, count)

    def _form(self, dialect: Dialect) -> _SqliteForm | None:
        try:
            return self._forms[dialect]
        except KeyError:
            form = self._compile(dialect) if dialect.name == "sqlite" else None
            self._forms[dialect] = form
            return form

    def _compile(self, dialect: Dialect) -> _SqliteForm | None:
        compiled: Any = self.stmt.compile(dialect=dialect, column_keys=self._column_keys)
        binds = compiled.binds
        if compiled.positiontup is None or "__[POSTCOMPILE_" in compiled.string:
            return None  # a named paramstyle, or IN lists rendered per execution: SQLAlchemy's job
        params: list[tuple[str, _Processor, Any]] = []
        for name in compiled.positiontup:
            bind = binds[name]
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if bind.required:
                params.append((name, process, _GIVEN))
            else:  # a constant of the statement: processed once, here
                value = bind.effective_value
                params.append((name, None, process(value) if process is not None else value))
        columns: list[str] = []
        processors: list[tuple[int, Callable[[Any], Any]]] = []
        exported = getattr(self.stmt, "exported_columns", None)
        for index, column in enumerate(exported if exported is not None else []):
            columns.append(column.key)
            process = column.type.dialect_impl(dialect).result_processor(dialect, None)
            if process is not None:
                processors.append((index, process))
        return _SqliteForm(compiled.string, params, columns, processors)


def _wrap(sql: str, args: Any, exc: sqlite3.Error) -> sa.exc.DBAPIError:
    """The SQLAlchemy error (IntegrityError, OperationalError, ...) `conn.execute` would raise."""
    return sa.exc.DBAPIError.instance(sql, args, exc, sqlite3.Error)
