"""Database helpers Django does not offer."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, time
from decimal import Decimal
from typing import TypeVar
from uuid import UUID

from django.db import connection, models, transaction
from django.db.models.base import ModelState
from django.db.models.expressions import DatabaseDefault, Value

BULK_UPDATE_ROWS = 1000
T = TypeVar("T")
R = TypeVar("R")


def bulk_update_rows(model: type[models.Model], objects: Sequence[models.Model], fields) -> int:
    """Write `fields` of many rows: one `UPDATE ... FROM (VALUES ...)` per 1,000 rows.

    Django's bulk_update builds a `CASE WHEN` per field and row; at thousands of rows
    building that statement costs seconds of Python, this a few milliseconds. Values go
    to PostgreSQL as parameters, never as SQL text. Returns the number of rows updated.
    """
    if not objects:
        return 0
    meta = model._meta
    targets = [meta.get_field(name) for name in fields]
    pk = meta.pk
    quote = connection.ops.quote_name
    assignments = ", ".join(
        f"{quote(field.column)} = v.{quote(field.column)}::{field.cast_db_type(connection)}"
        for field in targets
    )
    columns = ", ".join(quote(column) for column in [pk.column, *(f.column for f in targets)])
    sql = (
        f"UPDATE {quote(meta.db_table)} AS t SET {assignments} "  # noqa: S608 (names from _meta)
        "FROM (VALUES {rows}) "
        f"AS v ({columns}) "
        f"WHERE t.{quote(pk.column)} = v.{quote(pk.column)}::{pk.cast_db_type(connection)}"
    )
    row_placeholder = "(" + ", ".join(["%s"] * (len(targets) + 1)) + ")"
    updated = 0
    with connection.cursor() as cursor:
        for start in range(0, len(objects), BULK_UPDATE_ROWS):
            batch = objects[start : start + BULK_UPDATE_ROWS]
            params = [
                value
                for obj in batch
                for value in (
                    obj.pk,
                    *(_prepared(f, getattr(obj, f.attname)) for f in targets),
                )
            ]
            cursor.execute(sql.format(rows=", ".join([row_placeholder] * len(batch))), params)
            updated += cursor.rowcount
    return updated


def instances_of(queryset: models.QuerySet, fields: Sequence[str]) -> list[models.Model]:
    """The rows `queryset` selects as model instances with only `fields` (and the key)
    loaded; the others load on first access, as with QuerySet.only.

    Built from plain value rows, without Model.__init__: at 10,000 rows Django's building
    of instances cost more than reading the rows (docs/benchmarks.md). No pre_init or
    post_init signal is sent (nothing here listens to them), and the values are those
    Django's own reading would give: values_list applies the same field converters.
    """
    model = queryset.model
    meta = model._meta
    attnames = [meta.pk.attname]
    attnames += [
        meta.get_field(name).attname
        for name in fields
        if name != "pk" and meta.get_field(name) is not meta.pk
    ]
    new, database, instances = model.__new__, queryset.db, []
    for row in queryset.values_list(*attnames):
        instance = new(model)
        instance.__dict__.update(zip(attnames, row, strict=True))
        state = instance._state = ModelState()
        state.adding, state.db = False, database
        instances.append(instance)
    return instances


def new_instances(
    model: type[models.Model], rows: Iterable[Mapping[str, object]], **common
) -> list[models.Model]:
    """For each row, the unsaved instance `model(**common, **row)` would make.

    Model.__init__ runs once, for `common`; each instance is a copy of that one with its
    row's fields set (plain fields, by name) and every default that is computed (a fresh
    UUID, a new dict) computed again for it. At 10,000 instances Django's building of each
    cost more than writing them (docs/benchmarks.md). No pre_init or post_init signal is
    sent for the copies (nothing here listens to them).
    """
    template = model(**common)
    meta = model._meta
    plain = {field.name for field in meta.concrete_fields if not field.is_relation}
    given = {meta.get_field(name).attname for name in common if name != "pk"}
    computed = [
        field
        for field in meta.concrete_fields
        if field.attname not in given and field.has_default() and callable(field.default)
    ]
    base = {key: value for key, value in vars(template).items() if key != "_state"}
    cached = template._state.fields_cache
    new, instances = model.__new__, []
    for row in rows:
        unknown = row.keys() - plain
        if unknown:
            raise TypeError(f"{model.__name__} has no plain field {sorted(unknown)[0]!r}")
        instance = new(model)
        fields = instance.__dict__
        fields.update(base)
        for field in computed:
            fields[field.attname] = field.default()
        fields.update(row)
        instance._state = ModelState()
        instance._state.fields_cache = dict(cached)
        instances.append(instance)
    return instances


# What get_db_prep_save gives for the fields COPY writes here, whose str() PostgreSQL reads.
COPY_TYPES = (str, int, float, Decimal, UUID, date, time)


def _copy_text(value) -> str:
    """A value in COPY's text format: NULL as \\N, and the characters it escapes escaped."""
    kind = type(value)
    # The commonest first: a COPY of thousands of rows calls this for every value.
    if kind is int:
        return str(value)
    if value is None:
        return "\\N"
    if kind is bool:
        return "t" if value else "f"
    if kind is not str and not isinstance(value, COPY_TYPES):
        # An adapter (bytes, arrays, ranges...) has no plain text form here: say so.
        raise TypeError(f"COPY cannot write a {kind.__name__} here")
    return (
        (value if kind is str else str(value))
        .replace("\\", "\\\\")
        .replace("\t", "\\t")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
    )


def _copy_value(field: models.Field, obj: models.Model, *, add: bool):
    value = field.pre_save(obj, add) if add else getattr(obj, field.attname)
    if isinstance(value, DatabaseDefault):
        value = field.db_default
        if isinstance(value, Value):
            value = value.value
        elif hasattr(value, "resolve_expression"):
            raise TypeError(f"{field.name}'s database default is computed by the database.")
    if isinstance(field, models.JSONField):
        return None if value is None else json.dumps(value, cls=field.encoder)
    return _prepared(field, value)


def _prepared(field: models.Field, value):
    """`value` as the database takes it for `field`."""
    if not isinstance(field, models.JSONField) and (
        value is None
        or type(value) in (str, int)
        or (type(value) is datetime and value.tzinfo is not None)
    ):
        # Nothing to prepare (PostgreSQL checks an integer's range): at thousands of rows
        # Django's preparing costs seconds.
        return value
    return field.get_db_prep_save(value, connection)


def _copy_rows(cursor, table: str, columns: list[str], rows) -> None:
    quote = connection.ops.quote_name
    stream = io.StringIO()
    for row in rows:
        stream.write("\t".join(map(_copy_text, row)))
        stream.write("\n")
    stream.seek(0)
    cursor.copy_expert(
        f"COPY {quote(table)} ({', '.join(quote(c) for c in columns)}) FROM STDIN", stream
    )


def copy_insert(model: type[models.Model], objects: Sequence[models.Model]) -> None:
    """Insert many new rows with PostgreSQL's COPY, setting each object's primary key (an
    automatic one: its table's sequence gives it).

    At thousands of rows Django's bulk_create spends most of its time composing one
    parameterised INSERT; COPY streams the rows as data. The keys come first from the
    table's sequence, in one query, so that other rows can refer to these. Values are
    data in the stream, never SQL text; defaults and auto_now_add apply as in save().
    """
    if not objects:
        return
    meta = model._meta
    if not isinstance(meta.pk, models.AutoField | models.BigAutoField | models.SmallAutoField):
        raise TypeError(f"{model.__name__}'s key is not one a sequence gives")
    quote = connection.ops.quote_name
    fields = [field for field in meta.concrete_fields if not field.primary_key]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(sequence) FROM (SELECT pg_get_serial_sequence(%s, %s)::regclass "
            "AS sequence) AS s, generate_series(1, %s)",
            [quote(meta.db_table), meta.pk.column, len(objects)],
        )
        for obj, (pk,) in zip(objects, cursor.fetchall(), strict=True):
            obj.pk = pk
        _copy_rows(
            cursor,
            meta.db_table,
            [meta.pk.column, *(field.column for field in fields)],
            ([obj.pk, *(_copy_value(field, obj, add=True) for field in fields)] for obj in objects),
        )
    for obj in objects:
        obj._state.adding = False
        obj._state.db = connection.alias


def copy_update(model: type[models.Model], objects: Sequence[models.Model], fields) -> int:
    """Write `fields` of many rows through COPY into a temporary table and one UPDATE ...
    FROM it: bulk_update_rows' work without composing parameters, for tens of thousands of
    rows. Returns the number of rows updated."""
    if not objects:
        return 0
    meta = model._meta
    targets = [meta.get_field(name) for name in fields]
    quote = connection.ops.quote_name
    staging = f"copy_update_{meta.db_table}"
    columns = [meta.pk.column, *(field.column for field in targets)]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMPORARY TABLE {quote(staging)} ON COMMIT DROP AS "  # noqa: S608
            f"SELECT {', '.join(quote(c) for c in columns)} FROM {quote(meta.db_table)} "
            "WITH NO DATA"
        )
        _copy_rows(
            cursor,
            staging,
            columns,
            (
                [obj.pk, *(_copy_value(field, obj, add=False) for field in targets)]
                for obj in objects
            ),
        )
        assignments = ", ".join(f"{quote(c)} = v.{quote(c)}" for c in columns[1:])
        pk = quote(meta.pk.column)
        cursor.execute(
            f"UPDATE {quote(meta.db_table)} AS t SET {assignments} "  # noqa: S608 (names from _meta)
            f"FROM {quote(staging)} AS v WHERE t.{pk} = v.{pk}"
        )
        updated = cursor.rowcount
        cursor.execute(f"DROP TABLE {quote(staging)}")
    return updated


def in_threads(call: Callable[[T], R], items: Sequence[T], *, threads: int) -> list[R]:
    """`call(item)` for each item, its results in order, the items shared out over `threads`
    threads (the caller's and new ones with a database connection each, closed when done),
    where each call is its own transaction: one thread's Python runs while PostgreSQL works
    for another's. Only in the caller's thread inside an atomic block (a test's transaction,
    which other connections cannot see). What a call raises reaches the caller, once every
    thread has ended."""
    if threads < 2 or len(items) < 2 or connection.in_atomic_block:
        return [call(item) for item in items]
    shares = min(threads, len(items))
    results: list = [None] * len(items)
    errors: list[BaseException] = []

    def share(offset: int) -> None:
        try:
            results[offset::shares] = [call(item) for item in items[offset::shares]]
        except BaseException as exc:  # noqa: BLE001 (raised again in the caller's thread)
            errors.append(exc)

    def share_in_own_thread(offset: int) -> None:
        try:
            share(offset)
        finally:
            connection.close()

    others = [
        threading.Thread(target=share_in_own_thread, args=(offset,)) for offset in range(1, shares)
    ]
    for thread in others:
        thread.start()
    share(0)
    for thread in others:
        thread.join()
    if errors:
        raise errors[0]
    return results
