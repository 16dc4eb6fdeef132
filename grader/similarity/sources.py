"""The sources a similarity report compares: the file each student's grade comes from, the
files the instructor supplies (``--against``), and the handout's own code, the base.

Each is read as the grader reads a submission (:func:`grader.core.ingest.read_submission`: a
link is never followed, the size is bounded) and decoded, never run. A notebook is its code
cells in order, each under a line ``# cell N`` in the text the report shows, so that a match's
lines point into that text and say which cell they are in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.ingest import (
    MAX_SOURCE_BYTES,
    Ungradable,
    cell_source,
    decode_text,
    read_notebook_cells,
    read_submission,
    strip_magics,
)
from grader.results.students import SOURCE_SUFFIXES, Handin
from grader.results.submissions import discover
from grader.similarity.tokens import Token, normalised_tokens


@dataclass(frozen=True)
class Source:
    name: str  # the student's id, or a known source's path under its folder
    file: str  # the file read, as the report names it
    known: bool  # supplied by the instructor, not a student's
    text: str  # what the report shows: the module, or a notebook's code cells under their headers
    cells: tuple[tuple[str, int], ...]  # a notebook's cells: (label, the line of its header); () for a module
    tokens: tuple[Token, ...]

    def where(self, first: int, last: int) -> str:
        """Lines ``first`` to ``last`` of :attr:`text`, as the student finds them: "lines 3-9",
        "cell 4, lines 2-8", "cell 4, line 2 to cell 6, line 3"."""
        if not self.cells:
            return f"line {first}" if first == last else f"lines {first}-{last}"
        (start_cell, start), (end_cell, end) = self._cell_line(first), self._cell_line(last)
        if start_cell != end_cell:
            return f"{start_cell}, line {start} to {end_cell}, line {end}"
        return f"{start_cell}, line {start}" if start == end else f"{start_cell}, lines {start}-{end}"

    def _cell_line(self, line: int) -> tuple[str, int]:
        label, header = next(((label, header) for label, header in reversed(self.cells) if header <= line),
                             self.cells[0])
        return label, max(line - header, 1)


class Unreadable(Exception):
    """A file the report cannot compare: the message says why."""


def read_source(path: Path, name: str, file: str, *, known: bool = False) -> Source:
    """The source at ``path`` (a ``.py`` file or a notebook), or :class:`Unreadable` saying why not."""
    try:
        text = decode_text(read_submission(path))
        if "\x00" in text:
            raise Ungradable("the file is binary, not Python source or a notebook")
        if path.suffix == ".ipynb":
            return _notebook(text, name, file, known)
    except Ungradable as exc:
        raise Unreadable(str(exc)) from None
    return Source(name, file, known, text, (), tuple(normalised_tokens([(text, 0)])))


def _notebook(text: str, name: str, file: str, known: bool) -> Source:
    code_cells = [(number, cell_source(cell).replace("\r\n", "\n").replace("\r", "\n"))
                  for number, cell in enumerate(read_notebook_cells(text), start=1) if cell.get("cell_type") == "code"]
    if sum(len(source) for _, source in code_cells) > MAX_SOURCE_BYTES:  # the grader's bound: tokenizing is slow
        raise Ungradable(f"the notebook has too much code (over {MAX_SOURCE_BYTES} characters)")
    lines: list[str] = []
    cells: list[tuple[str, int]] = []
    pieces: list[tuple[str, int]] = []
    for number, source in code_cells:
        code, not_python = strip_magics(source)
        if not_python or not code.strip():
            continue
        label = f"cell {number}"
        lines.append(f"# {label}")
        cells.append((label, len(lines)))
        pieces.append((code, len(lines)))
        lines += source.split("\n")  # as the student wrote it: strip_magics keeps the lines
    return Source(name, file, known, "\n".join(lines), tuple(cells), tuple(normalised_tokens(pieces)))


def student_sources(folder: Path, handins: Iterable[Handin]) -> tuple[list[Source], list[tuple[str, str]]]:
    """The file each student's grade comes from (``Handin.graded``), read; and the files that
    could not be, with why."""
    sources, unreadable = [], []
    for handin in handins:
        graded = handin.graded
        if graded is None:
            continue
        if graded.suffix not in SOURCE_SUFFIXES:
            unreadable.append((graded.as_posix(), "not a .py or .ipynb file"))
            continue
        try:
            sources.append(read_source(folder / graded, handin.student.id, graded.as_posix()))
        except Unreadable as exc:
            unreadable.append((graded.as_posix(), str(exc)))
    return sources, unreadable


def known_sources(folder: Path) -> tuple[list[Source], list[tuple[str, str]]]:
    """Every ``.py`` and ``.ipynb`` file under ``folder`` (a tutorial, last year's solutions),
    named by its path there; and those that could not be read, with why."""
    sources, unreadable = [], []
    for relative in discover(folder):
        if relative.suffix not in SOURCE_SUFFIXES:
            continue
        name = relative.as_posix()
        try:
            sources.append(read_source(folder / relative, name, f"{folder.name}/{name}", known=True))
        except Unreadable as exc:
            unreadable.append((f"{folder.name}/{name}", str(exc)))
    return sources, unreadable


def base_sources(assignment: Assignment) -> list[Source]:
    """The handout's own code, the same in every submission: the stub module, its notebook (the
    ``check()`` cells too) and any other file of the assignment's folder (given helpers, public
    tests)."""
    sources = []
    for path in sorted(assignment.directory.iterdir()):
        if path.suffix in SOURCE_SUFFIXES and path.is_file():
            try:
                sources.append(read_source(path, path.name, path.name))
            except Unreadable:  # the handout's own file: nothing of a student's to ignore there
                continue
    return sources
