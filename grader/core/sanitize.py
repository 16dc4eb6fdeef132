"""Text the student controls, made safe for each place it reaches.

What a submission prints, its exception messages and type names, its file names and the
notes about its cells end up in reports (JSON), on terminals, in CSV gradebooks and in
HTML pages. Each of those places has its own way to be abused, so each has a function
here, and every view of a report uses it:

- :func:`clean`: valid Unicode (a lone surrogate cannot be encoded as UTF-8, and would
  make writing the report fail) and, with ``limit``, a bounded length;
- :func:`for_terminal`: no control characters, so printed text cannot move the cursor,
  redraw a table or write the clipboard (OSC 52);
- :func:`for_csv`: a cell a spreadsheet will not run as a formula (:func:`csv_text`: rows of them).

HTML pages are templates rendered with autoescape, after :func:`for_terminal`
(:mod:`grader.views.html_templates`). JSON data (a report, a summary, Gradescope's results)
gets a rule for each of its strings with :func:`each_string`.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

# C0 controls but tab and newline, DEL, and C1 controls (0x80-0x9f: CSI, OSC and the rest).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_FORMULA_START = ("=", "+", "-", "@", "\t")  # and CR, which for_terminal has already replaced


def clean(text: str, limit: int | None = None) -> str:
    """``text`` as valid Unicode (lone surrogates become U+FFFD), at most ``limit`` characters
    with a note saying how many were cut."""
    text = _SURROGATE.sub("\ufffd", str(text))
    if limit is not None and len(text) > limit:
        note = f" [... {len(text) - limit} more characters cut]"
        text = text[: max(limit - len(note), 0)] + note
    return text


def for_terminal(text: str) -> str:
    """``text`` with every control character except newline and tab shown as ``?``: an
    escape sequence printed raw would be run by the terminal."""
    return _CONTROL.sub("?", clean(text))


def for_csv(cell: str) -> str:
    """A CSV cell that spreadsheets show as text: one that starts like a formula gets a
    leading apostrophe (OWASP's advice for CSV injection)."""
    cell = for_terminal(cell)
    return "'" + cell if cell.startswith(_FORMULA_START) else cell


def csv_text(rows: Iterable[Sequence[object]]) -> str:
    """Rows as CSV in which no cell is a formula (see :func:`for_csv`)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([for_csv(str(cell)) for cell in row] for row in rows)
    return buffer.getvalue()


def each_string(data: Any, rule: Callable[[str], str]) -> Any:
    """JSON-like ``data`` (dicts, lists, strings, numbers) with ``rule`` applied to every
    string in it, keys included."""
    if isinstance(data, str):
        return rule(data)
    if isinstance(data, dict):
        return {each_string(key, rule): each_string(value, rule) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [each_string(item, rule) for item in data]
    return data
