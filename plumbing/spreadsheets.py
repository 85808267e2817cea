"""CSV for people's spreadsheets: cells that users and jobs wrote stay text, and long tables
stream instead of filling memory."""

from __future__ import annotations

import csv
from collections.abc import Iterable

from django import forms
from django.http import HttpResponseBadRequest, StreamingHttpResponse

# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def inert(cell: object) -> object:
    """The cell as a spreadsheet should show it: a would-be formula quoted, None empty."""
    if cell is None:
        return ""
    if isinstance(cell, str) and cell.startswith(FORMULA_START):
        return "'" + cell
    return cell


class _Echo:
    """A file-like object whose write() hands the line back, for streaming CSV."""

    def write(self, value: str) -> str:
        return value


def stream_csv(rows: Iterable[Iterable[object]], filename: str) -> StreamingHttpResponse:
    """Rows (the header first) as a streamed CSV download, every cell inert."""
    writer = csv.writer(_Echo())
    response = StreamingHttpResponse(
        (writer.writerow([inert(cell) for cell in row]) for row in rows),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def invalid_parameters(form: forms.Form) -> HttpResponseBadRequest:
    """A CSV export asked with parameters the form refuses: what is wrong, as plain text."""
    problems = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
    return HttpResponseBadRequest(
        f"The report's parameters are not valid. {problems}",
        content_type="text/plain; charset=utf-8",
    )
