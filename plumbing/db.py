"""Database helpers Django does not offer."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection, models

BULK_UPDATE_ROWS = 1000


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
                    *(f.get_db_prep_save(getattr(obj, f.attname), connection) for f in targets),
                )
            ]
            cursor.execute(sql.format(rows=", ".join([row_placeholder] * len(batch))), params)
            updated += cursor.rowcount
    return updated
