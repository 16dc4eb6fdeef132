"""Read a submission (a ``.py`` file or a Jupyter notebook) into a :class:`Program`.

Nothing here runs student code: files are read, decoded and parsed only. A file that cannot
be graded at all raises :class:`Ungradable` with a message for the student; a notebook cell
that cannot run is dropped with a note, and the other cells still run.

The trusted grader reads submissions only through :func:`read_submission`: hashing, picking,
parsing and shipping a submission all start from the bytes it returns.
"""

from __future__ import annotations

import ast
import codecs
import errno
import functools
import hashlib
import io
import json
import os
import re
import stat
import tokenize
import warnings
from dataclasses import dataclass, field
from pathlib import Path

MAX_SOURCE_BYTES = 4 * 2**20
# Real notebooks, plots and all, take a few MiB. json.loads, which runs in the grader, can take
# 20 times a file's size in memory (a file of empty lists: 0.64 GiB at this limit, 2.4 GiB at 64 MiB).
MAX_NOTEBOOK_BYTES = 32 * 2**20
# Real notebooks have tens or hundreds of cells; each costs the grader time before any sandbox.
MAX_NOTEBOOK_CELLS = 5000
SKIP_TAG = "grader-skip"
# Cell magics whose body is still Python; any other cell magic (%%bash, %%html, ...) is not.
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun"}
_MAGIC_LINE = re.compile(r"^(\s*)[%!]")


class Ungradable(Exception):
    """The submission as a whole cannot be graded; the message says why."""


@dataclass(frozen=True)
class Cell:
    source: str
    label: str  # how the student finds it: "mha.py" or "cell 4"


@dataclass(frozen=True)
class Program:
    """What the child runs, in order: the cells of a notebook or the one cell of a module."""

    kind: str  # "module" or "notebook"
    cells: tuple[Cell, ...]
    notes: tuple[str, ...] = field(default=())

    def line(self, label: str, number: int) -> str | None:
        """Line ``number`` (from 1) of the cell labelled ``label``, stripped; None if there is none."""
        lines = self._lines.get(label, [])
        return lines[number - 1].strip() if 0 < number <= len(lines) else None

    @functools.cached_property
    def _lines(self) -> dict[str, list[str]]:
        """Each cell's lines, by label (the first cell of a label), split once: a traceback the
        student's process sends names lines of a source that may be megabytes long."""
        lines: dict[str, list[str]] = {}
        for cell in self.cells:
            lines.setdefault(cell.label, cell.source.splitlines())
        return lines

    def to_dict(self) -> dict:
        """What the student's process is sent (the notes stay with the grader)."""
        return {"kind": self.kind, "cells": [[cell.source, cell.label] for cell in self.cells]}

    @classmethod
    def from_dict(cls, data: dict) -> Program:
        return cls(data["kind"], tuple(Cell(source, label) for source, label in data["cells"]))


SUBMISSION_SUFFIXES = (".py", ".ipynb")


def load_submission(path: Path) -> Program:
    """The program in the file at ``path``."""
    return parse_submission(path.name, read_submission(path))


def read_submission(path: Path) -> bytes:
    """The bytes of the file at ``path``, read once, or :class:`Ungradable` saying why not.

    The grader reads with its own rights, before any sandbox: so a link is never followed
    (a student's archive or repository can hold one to the reference), and the type and
    size are checked on the open file before a byte is read (a FIFO would block, /dev/zero
    never ends, a sparse file of terabytes costs no disk).
    """
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise Ungradable(_why_unopened(path, exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Ungradable(f"{path.name} is not a regular file")
        limit = size_limit(path.name)
        if info.st_size > limit:
            advice = ": clear the notebook's outputs and submit it again" if path.suffix == ".ipynb" else ""
            raise Ungradable(f"the file is too large ({info.st_size} bytes; the limit is {limit}){advice}")
        with open(fd, "rb", closefd=False) as file:
            data = file.read(limit + 1)  # one byte over tells a file that grew since fstat, without reading on
    except OSError as exc:
        raise Ungradable(f"the file cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise Ungradable(f"the file is too large (it grew past the limit of {limit} bytes while it was read)")
    return data


def _why_unopened(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:  # what O_NOFOLLOW answers for a link
        return f"{path.name} is a link, not a regular file: submit the file itself, not a link to it"
    return f"the file cannot be read: {exc.strerror or exc}"


def size_limit(name: str) -> int:
    """The most the grader reads of a file called ``name``; a file that is neither a module
    nor a notebook is read only to be hashed."""
    return MAX_SOURCE_BYTES if Path(name).suffix == ".py" else MAX_NOTEBOOK_BYTES


def submission_sha256(data: bytes) -> str:
    """The content hash a report carries: batch grading regrades a file whose hash changed."""
    return hashlib.sha256(data).hexdigest()


def parse_submission(name: str, data: bytes) -> Program:
    """The program in ``data``, the bytes of a file called ``name`` (from :func:`read_submission`)."""
    suffix = Path(name).suffix
    if suffix not in SUBMISSION_SUFFIXES:
        raise Ungradable(f"{name} is not a submission: expected a .py or .ipynb file")
    _check_text(data)
    text = decode_text(data)
    if not text.strip():
        raise Ungradable("the file is empty")
    if suffix == ".ipynb":
        return _notebook_program(text)
    return _module_program(text, name)


def _check_text(data: bytes) -> None:
    if _is_utf16_or_32(data[:8192]):
        raise Ungradable("the file is saved as UTF-16 or UTF-32 text: save it as UTF-8 and submit it again")
    if b"\x00" in data[:8192]:
        raise Ungradable("the file is binary, not Python source or a notebook")


def _is_utf16_or_32(head: bytes) -> bool:
    """A UTF-16/32 byte-order mark, or UTF-16 of Latin-1 text without one (every other byte NUL)."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE)):
        return True
    even, odd = head[0::2], head[1::2]
    return len(head) >= 4 and any(b"\x00" not in text and not zeros.strip(b"\x00")
                                  for text, zeros in ((even, odd), (odd, even)))


def decode_text(data: bytes) -> str:
    """UTF-8 with or without BOM, falling back to Latin-1; line endings normalised."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _module_program(source: str, name: str) -> Program:
    error = syntax_error(source)
    if error:
        raise Ungradable(f"{name} has a syntax error: {error}")
    return Program("module", (Cell(_exported_cell_magics_expanded(source), name),))


def _exported_cell_magics_expanded(source: str) -> str:
    """A notebook exported as a .py (``jupyter nbconvert --to script``) holds each cell magic's
    body as a string: ``get_ipython().run_cell_magic('time', '', '...')``. Each such statement at
    the top level is replaced by what the grader makes of the notebook's cell: its body where
    it is Python (``%%time``), else nothing. So the grader reads, checks and flags the code that
    runs, not a string (a string that runs is dynamic code, flagged as exec is)."""
    if "run_cell_magic" not in source:
        return source
    lines = source.splitlines(keepends=True)
    for node in reversed(ast.parse(source).body):
        call = node.value if isinstance(node, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "run_cell_magic" and isinstance(call.func.value, ast.Call)
                and isinstance(call.func.value.func, ast.Name) and call.func.value.func.id == "get_ipython"
                and len(call.args) == 3 and not call.keywords
                and all(isinstance(arg, ast.Constant) and isinstance(arg.value, str) for arg in call.args)
                and _alone_on_its_lines(node, lines)):
            continue
        magic, _, body = (arg.value for arg in call.args)
        if magic in PYTHON_CELL_MAGICS and syntax_error(body) is None:
            lines[node.lineno - 1:node.end_lineno] = [body if body.endswith("\n") else body + "\n"]
        elif magic not in PYTHON_CELL_MAGICS:
            lines[node.lineno - 1:node.end_lineno] = ["pass\n"]
    return "".join(lines)


def _alone_on_its_lines(node: ast.stmt, lines: list[str]) -> bool:
    """Whether ``node`` shares none of its lines with another statement (``x = 1; ...``), so that
    replacing them replaces it alone. Its end column counts UTF-8 bytes."""
    after = lines[node.end_lineno - 1].encode("utf-8")[node.end_col_offset:].decode("utf-8", "replace").strip()
    return node.col_offset == 0 and (not after or after.startswith("#"))


def syntax_error(source: str) -> str | None:
    """A one-line description of why ``source`` does not parse, or None if it does."""
    try:
        with warnings.catch_warnings():  # "invalid escape sequence" and the like: not the grader's to print
            warnings.simplefilter("ignore")
            ast.parse(source)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}" if exc.lineno else exc.msg
    except (RecursionError, MemoryError):  # the parser's own limits; MemoryError comes without a message
        return "the code is nested too deeply (or one expression is too long) for Python's parser"
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# ---- notebooks: a list of small steps -------------------------------------------------


def _notebook_program(text: str) -> Program:
    cells = read_notebook_cells(text)
    notes: list[str] = []
    program_cells: list[Cell] = []
    code_size = 0  # parsing is slow (~4 MiB in 20 s) and runs in the grader: the same budget as a .py file
    for number, cell in enumerate(cells, start=1):
        label = f"cell {number}"
        if cell.get("cell_type") != "code":
            continue
        metadata = cell.get("metadata")
        tags = metadata.get("tags") if isinstance(metadata, dict) else None
        if isinstance(tags, list) and SKIP_TAG in tags:  # a string of tags would match substrings
            notes.append(f"{label} is tagged {SKIP_TAG!r}; not run")
            continue
        source = cell_source(cell)
        code_size += len(source)
        if code_size > MAX_SOURCE_BYTES:
            raise Ungradable(f"the notebook has too much code (over {MAX_SOURCE_BYTES} characters; the limit is "
                             "the same as for a .py file)")
        source, why_not = strip_magics(source)
        if why_not:
            notes.append(f"{label} {why_not}; not run")
            continue
        if not source.strip():
            continue
        error = syntax_error(source)
        if error:
            notes.append(f"{label} has a syntax error ({error}); not run")
            continue
        program_cells.append(Cell(source, label))
    if not program_cells:
        raise Ungradable("the notebook has no code cells that can run" + _joined(notes))
    return Program("notebook", tuple(program_cells), tuple(notes))


def _joined(notes: list[str]) -> str:
    return f" ({'; '.join(notes)})" if notes else ""


NOT_A_NOTEBOOK = "the file is JSON but not a Jupyter notebook"


def read_notebook_cells(text: str) -> list[dict]:
    """The notebook's cells as nbformat 4 has them (dicts only: anything else is not a cell).

    Its cost in the grader is bounded before any cell is looked at: the file's size bounds
    its one ``json.loads``, and then its cells are counted. An nbformat 4 notebook is read
    as it is, since the grader needs only each cell's type, source and tags: nbformat's
    validation, whose verdict the grader never used, took 45 s and 1.6 GiB for 64 MiB of
    empty markdown cells. Older formats are upgraded by nbformat, which is handed only what
    the grader reads (:func:`_upgraded_cells`).
    """
    notebook = _parse_json(text)
    if not isinstance(notebook, dict):
        raise Ungradable(f"{NOT_A_NOTEBOOK} (not a JSON object)")
    cell_lists = _cell_lists(notebook)
    count = sum(len(cells) for cells in cell_lists)
    if count > MAX_NOTEBOOK_CELLS:
        raise Ungradable(f"the notebook has too many cells ({count}; the limit is {MAX_NOTEBOOK_CELLS})")
    cells = cell_lists[0] if _is_nbformat_4(notebook) else _upgraded_cells(notebook, cell_lists)
    return [cell for cell in cells if isinstance(cell, dict)]


def _parse_json(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Ungradable(f"the notebook is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise Ungradable("the notebook is not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # valid JSON that Python will not convert: an integer of over 4300 digits
        raise Ungradable(f"the notebook cannot be read ({str(exc).split(':')[0]})") from None


def _is_nbformat_4(notebook: dict) -> bool:
    version = notebook.get("nbformat")
    return type(version) is int and version == 4  # not True, 4.0 or "4": nbformat has its own view of those


def _cell_lists(notebook: dict) -> list[list]:
    """Where the notebook keeps its cells: ``cells`` (nbformat 4, and 1), else each worksheet's (2, 3)."""
    if _is_nbformat_4(notebook) or "worksheets" not in notebook:
        lists = [notebook.get("cells")]
    else:
        worksheets = notebook["worksheets"]
        lists = [sheet.get("cells") if isinstance(sheet, dict) else None
                 for sheet in (worksheets if isinstance(worksheets, list) else [None])]
    if not all(isinstance(cells, list) for cells in lists):
        raise Ungradable(f"{NOT_A_NOTEBOOK} (no list of cells)")
    return lists


def _upgraded_cells(notebook: dict, cell_lists: list[list]) -> list:
    """The cells of an older notebook (nbformat 1-3, or what nbformat takes for one), upgraded
    to nbformat 4 by nbformat from a copy that holds only what the grader reads: nbformat
    validates everything it is handed, up to three times, and would otherwise also expand a
    heading cell's level into that many '#' (a 300-byte file asking for 1 GiB)."""
    import nbformat  # imported here: only old notebooks need it

    slim_lists = [[_slim_cell(cell) for cell in cells if isinstance(cell, dict)] for cells in cell_lists]
    slim = {key: notebook[key] for key in ("nbformat", "nbformat_minor") if key in notebook} | {"metadata": {}}
    if "worksheets" in notebook:
        slim["worksheets"] = [{"cells": cells, "metadata": {}} for cells in slim_lists]
    else:
        slim["cells"] = slim_lists[0]
    try:
        with warnings.catch_warnings():  # e.g. cells without ids: nbformat fixes them, the student need not hear
            warnings.simplefilter("ignore")
            upgraded = nbformat.reads(json.dumps(slim), as_version=4, capture_validation_error={})
    except Exception as exc:  # nbformat raises many types for malformed notebooks, some without a message
        why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise Ungradable(f"{NOT_A_NOTEBOOK} ({why})") from None
    cells = upgraded.get("cells") if isinstance(upgraded, dict) else None
    if not isinstance(cells, list):
        raise Ungradable(f"{NOT_A_NOTEBOOK} (no list of cells)")
    return cells


def _slim_cell(cell: dict) -> dict:
    """What the grader reads of a cell, in a shape nbformat upgrades: a code cell's code (under
    the key its format uses) and tags, with no outputs; any other cell as an empty markdown cell."""
    if cell.get("cell_type") != "code":
        return {"cell_type": "markdown", "metadata": {}, "source": ""}
    metadata = cell.get("metadata")
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    code = {key: cell[key] for key in ("source", "input", "code") if key in cell}  # nbformat 4, 2-3, 1
    return {"cell_type": "code", "outputs": [], **code,
            "metadata": {"tags": [tag for tag in tags if isinstance(tag, str)]} if isinstance(tags, list) else {}}


def cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        source = "".join(item for item in source if isinstance(item, str))
    return source if isinstance(source, str) else ""


def strip_magics(source: str) -> tuple[str, str | None]:
    """Remove IPython magics and shell lines; returns (source, why the cell cannot run).

    Only a line that starts a statement can be a magic: a ``%`` or ``!`` that continues
    an expression or sits inside a string is Python. Line numbers are kept, so syntax
    errors point at the student's line.
    """
    lines = source.split("\n")
    first = lines[0].strip()
    if first.startswith("%%"):
        magic = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        if magic not in PYTHON_CELL_MAGICS:
            return "", f"is a %%{magic} cell, not Python"
        lines[0] = ""
    continued = _continuation_lines("\n".join(lines))
    # Keep the indentation so that a magic inside a block leaves the block valid.
    return "\n".join(line if number in continued else _MAGIC_LINE.sub(r"\1pass  # ", line)
                     for number, line in enumerate(lines, start=1)), None


def _continuation_lines(source: str) -> set[int]:
    """Numbers of lines that continue a statement: inside brackets or a string, or after a backslash."""
    continued: set[int] = set()
    depth = 0
    line_done = True  # the previous line ended a statement (or a blank/comment line)
    last_line = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            row = token.start[0]
            if row != last_line and not (depth == 0 and line_done):
                continued.add(row)
            continued.update(range(row + 1, token.end[0] + 1))  # rows inside a multi-line token
            last_line = token.end[0]
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth = max(depth - 1, 0)
            line_done = token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    except (tokenize.TokenError, SyntaxError):
        pass  # unterminated code: what was seen so far is still right
    return continued
