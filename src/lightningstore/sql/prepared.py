"""Prepared: a hot statement compiled once per dialect and run straight on the driver's cursor.

A prebuilt statement still costs several times the driver's own call per execution in SQLAlchemy
(execution context, parameter and result processing, event dispatch): on SQLite the writer's share
of the GIL is what bounds throughput, and on PostgreSQL the one writer thread of group commit runs
every statement of a group. So the statement is compiled once, its parameter and result processors
are looked up once (the same ones SQLAlchemy would use: JSON through the engine's serializer,
floats, booleans, psycopg's JSON wrapper) and each execution is one driver call (psycopg prepares
a statement on the server after a few executions). Statements with expanding IN lists, and on
PostgreSQL a list of several parameter sets (SQLAlchemy sends those as one multi-row INSERT), go
through an ordinary `conn.execute`. Driver errors are wrapped as SQLAlchemy's, as `conn.execute`
would, and a connection the driver lost is invalidated; engine events (and `echo`) do not see the
driver calls.
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


def _driver_error(dialect: Dialect) -> type[Exception] | None:
    """The base class of the dialect's driver errors (None where Prepared leaves it to SQLAlchemy)."""
    if dialect.driver == "pysqlite":
        return sqlite3.Error
    if dialect.driver == "psycopg":
        import psycopg

        return psycopg.Error
    return None


@dataclass
class Result:
    rows: list[Row]
    rowcount: int

    def first(self) -> Row | None:
        return self.rows[0] if self.rows else None


@dataclass
class _DriverForm:
    """The statement as compiled for one dialect, with its processors resolved."""

    sql: str
    params: list[tuple[str, _Processor, Any]]
    """Per placeholder: parameter name, bind processor, and the value of a constant in the
    statement (`_GIVEN` when the caller supplies it)."""
    columns: list[str]
    column_types: list[sa.types.TypeEngine[Any]]
    dialect: Dialect
    named: bool
    """Parameters go to the driver as a mapping (psycopg's pyformat), not a tuple (sqlite3's qmark)."""
    driver_error: type[Exception]
    processors: list[tuple[int, Callable[[Any], Any]]] | None = None
    """Per result column that needs one, its result processor: looked up on the first execution,
    from the driver's column types (PostgreSQL's numeric processors depend on them)."""

    def args(self, given: Row) -> tuple[Any, ...] | dict[str, Any]:
        values = []
        for name, process, constant in self.params:
            value = given[name] if constant is _GIVEN else constant
            try:
                values.append(process(value) if process is not None else value)
            except InvalidInputError as exc:  # a value the column cannot hold: name the column
                raise InvalidInputError(name.removeprefix("p_"), exc.reason) from exc
        if self.named:
            return {name: value for (name, _, _), value in zip(self.params, values, strict=True)}
        return tuple(values)

    def execute(self, conn: sa.Connection, driver: Any, given: Row) -> Result:
        args = self.args(given)
        try:
            if self.named:  # psycopg: its one reused cursor (sqlite3 makes a cursor in C, cheaply)
                cursor = _cursor(driver)
                cursor.execute(self.sql, args)
            else:
                cursor = driver.execute(self.sql, args)
            raw_rows = cursor.fetchall() if self.columns else []
        except self.driver_error as exc:
            raise _wrap(conn, self.sql, args, exc, self.driver_error) from exc
        if self.columns and self.processors is None:
            self.processors = self._result_processors([column[1] for column in cursor.description])
        return Result([self.row(raw) for raw in raw_rows], cursor.rowcount)

    def _result_processors(self, type_codes: list[Any]) -> list[tuple[int, Callable[[Any], Any]]]:
        found = []
        for index, (kind, code) in enumerate(zip(self.column_types, type_codes, strict=True)):
            process = kind.dialect_impl(self.dialect).result_processor(self.dialect, code)
            if process is not None:
                found.append((index, process))
        return found

    def row(self, raw: Sequence[Any]) -> Row:
        values = list(raw)
        for index, process in self.processors or ():
            values[index] = process(values[index])
        return dict(zip(self.columns, values, strict=True))


_GIVEN = object()
_CURSORS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _cursor(driver: Any) -> Any:
    """The psycopg connection's one reused cursor (`connection.execute` builds a new cursor object each time)."""
    cursor = _CURSORS.get(driver)
    if cursor is None:
        cursor = _CURSORS[driver] = driver.cursor()
    return cursor


class Prepared:
    """`Prepared(stmt).run(conn, params)`; `column_keys` names the parameters of a bare INSERT."""

    def __init__(self, stmt: sa.Executable, *, column_keys: Sequence[str] | None = None) -> None:
        self.stmt = stmt
        self._column_keys = list(column_keys) if column_keys is not None else None
        self._forms: weakref.WeakKeyDictionary[Dialect, _DriverForm | None] = weakref.WeakKeyDictionary()

    def run(self, conn: sa.Connection, params: Row | list[Row] | None = None) -> Result:
        """Execute with one parameter set, or once per set of a list (an executemany); the rows
        it returns (SELECT or RETURNING) come back as mappings."""
        form = self._form(conn.dialect)
        several = isinstance(params, list) and len(params) != 1
        if form is None or (several and form.named):
            given: Any = [dict(p) for p in params] if isinstance(params, list) else dict(params or {})
            result = conn.execute(self.stmt, given)
            if not result.returns_rows:
                return Result([], result.rowcount)
            rows = [row._mapping for row in result]
            return Result(rows, len(rows))
        driver = conn.connection.driver_connection
        assert driver is not None
        if not isinstance(params, list):
            return form.execute(conn, driver, params or {})
        if not form.columns:  # nothing comes back: one driver call for every set
            args = [form.args(p) for p in params]
            try:
                cursor = driver.cursor()
                cursor.executemany(form.sql, args)
            except form.driver_error as exc:
                raise _wrap(conn, form.sql, args, exc, form.driver_error) from exc
            return Result([], cursor.rowcount)
        rows: list[Row] = []
        count = 0
        for one in params:
            result = form.execute(conn, driver, one)
            rows.extend(result.rows)
            count += result.rowcount
        return Result(rows, count)

    def _form(self, dialect: Dialect) -> _DriverForm | None:
        try:
            return self._forms[dialect]
        except KeyError:
            driver_error = _driver_error(dialect)
            form = self._compile(dialect, driver_error) if driver_error is not None else None
            self._forms[dialect] = form
            return form

    def _compile(self, dialect: Dialect, driver_error: type[Exception]) -> _DriverForm | None:
        compiled: Any = self.stmt.compile(dialect=dialect, column_keys=self._column_keys)
        binds = compiled.binds
        named = compiled.positiontup is None
        if "__[POSTCOMPILE_" in compiled.string or (named and compiled.escaped_bind_names):
            return None  # IN lists rendered per execution, or renamed parameters: SQLAlchemy's job
        params: list[tuple[str, _Processor, Any]] = []
        for name in list(binds) if named else compiled.positiontup:
            bind = binds[name]
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if bind.required:
                params.append((name, process, _GIVEN))
            else:  # a constant of the statement: processed once, here
                value = bind.effective_value
                params.append((name, None, process(value) if process is not None else value))
        exported = list(getattr(self.stmt, "exported_columns", None) or [])
        columns = [column.key for column in exported]
        column_types = [column.type for column in exported]
        return _DriverForm(compiled.string, params, columns, column_types, dialect, named, driver_error)


def _wrap(
    conn: sa.Connection, sql: str, args: Any, exc: Exception, driver_error: type[Exception]
) -> sa.exc.DBAPIError:
    """The SQLAlchemy error (IntegrityError, OperationalError, ...) `conn.execute` would raise; a
    connection the driver lost is invalidated, as SQLAlchemy would, so that the next one is fresh."""
    lost = conn.dialect.is_disconnect(exc, conn.connection.dbapi_connection, None)
    if lost:
        conn.invalidate(exc)
    return sa.exc.DBAPIError.instance(
        sql, args, exc, driver_error, connection_invalidated=lost, dialect=conn.dialect
    )
