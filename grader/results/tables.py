"""The CSV files an instructor writes for ``grade batch`` (the roster, the overrides), read
alike: UTF-8 with or without Excel's byte-order mark, separated by commas or by the semicolons
or tabs Excel may save, a first row that names the columns in any case and spacing.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path

MAX_TABLE_BYTES = 10 * 2**20


class TableError(Exception):
    """The file cannot be used: the message says which row and why."""


def read_table(path: Path, what: str, error: type[TableError] = TableError) -> str:
    """The text of the ``what`` (e.g. "roster") at ``path``; ``error`` says why it cannot be read."""
    try:
        if path.stat().st_size > MAX_TABLE_BYTES:
            raise error(f"{path} is over {MAX_TABLE_BYTES // 2**20} MiB: not a {what}")
        text = path.read_text(encoding="utf-8-sig")  # Excel writes a byte-order mark
    except OSError as exc:
        raise error(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise error(f"{path} is not UTF-8 text: save the {what} as CSV UTF-8") from None
    return text


def table_rows(text: str, columns: tuple[str, ...], error: type[TableError] = TableError,
               source: str = "the file") -> tuple[list[str], Iterator[tuple[int, dict[str, str]]]]:
    """The header, as ``columns`` spell it, and each row that is not blank: its number as a
    spreadsheet shows it (the header is row 1) and its values in ``columns``, stripped. A row
    with a value beyond the header's columns is an ``error``: a cell would be lost unread."""
    text = text.removeprefix("\ufeff")
    # Rows end where CSV says (quoted cells may hold line breaks), never at U+2028 and the like.
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(text.split("\n", 1)[0]))
    header = [_column(name) for name in next(reader, [])]

    def rows() -> Iterator[tuple[int, dict[str, str]]]:
        for number, row in enumerate(reader, start=2):
            if any(value.strip() for value in row[len(header):]):
                raise error(f"{source}, row {number}: {len(row)} cells, but the first row names {len(header)} "
                            "columns; quote a cell that holds the separator")
            values = {column: value.strip() for column, value in zip(header, row) if column in columns}
            if any(values.values()):
                yield number, values

    return header, rows()


def _delimiter(header: str) -> str:
    """The separator, read from the header: Excel saves "CSV" with ``;`` where the decimal mark
    is a comma, and "Text" with tabs. A one-column file has none: ``,``."""
    return max(",;\t", key=header.count)


def _column(name: str) -> str:
    """A header as the columns are spelt: "SIS User ID" is sis_user_id; "ID", as Canvas's
    export names the Canvas user id, is canvas_id."""
    column = re.sub(r"[\s-]+", "_", name.strip().lower())
    return "canvas_id" if column == "id" else column
