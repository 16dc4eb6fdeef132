"""The batch's gradebook as the LMS imports it: one score per student, matched by their ids.

``grade batch`` writes both beside ``grades.csv`` (docs/instructors.md has the steps):

- ``canvas.csv``, Canvas's gradebook import: ``Student, ID, SIS User ID, SIS Login ID,
  Section``, then the assignment's column, with a ``Points Possible`` row first. Canvas
  matches a row by its Canvas ID, SIS User ID or SIS Login ID; a column header that names no
  existing assignment creates one.
- ``gradescope.csv``, for Gradescope's score upload: ``Name, Email, SID, Score``, matched by
  Email or SID, then ``Overrides``: the parts an instructor decided (``grade batch
  --overrides``), with the autograder's score and the comment; the upload imports only the
  columns it is told to.

Both scores are final: overrides applied. ``canvas.csv`` cannot say which parts were
overridden: Canvas makes a new assignment of every column it does not know (all but the
identity columns, its own read-only totals and a course's custom columns), so the comment
reaches the student on their feedback page, and the instructor in ``grades.csv``.

A student with none of the ids the LMS matches on is left out of its file (and listed by
:func:`write_gradebooks`): a row the LMS cannot match is at best an import error, at worst
another student's grade. A student who handed in nothing gets a blank score (``grade batch
--missing zero``: 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.core.report import write_atomic
from grader.core.report_words import overrides_line
from grader.core.sanitize import csv_text
from grader.results.folder import MISSING, BatchResult, StudentGrade

CANVAS_FILE, GRADESCOPE_FILE = "canvas.csv", "gradescope.csv"
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


@dataclass(frozen=True)
class Gradebook:
    name: str  # its file, in the results folder
    text: str
    left_out: list[str]  # students the LMS could not match, by id


def canvas_column(result: BatchResult) -> str:
    """The assignment's column: Canvas creates an assignment of this name on import."""
    return f"Assignment {result.assignment.id}: {result.assignment.title}"


def _score(grade: StudentGrade, missing_zero: bool) -> str:
    """A student with no submission is a blank cell, unless ``missing_zero``: a 0 would overwrite
    what the LMS already says of them (missing, excused, an extension)."""
    return "" if grade.status == MISSING and not missing_zero else f"{grade.score:g}"


def canvas_gradebook(result: BatchResult, column: str | None = None, *, missing_zero: bool = False) -> Gradebook:
    """``column``: the assignment's header; to update an existing Canvas assignment, the header
    of its column in Canvas's own export, e.g. ``Assignment 03 (12345)``."""
    points = result.class_results.statistics.total.max_score
    rows: list[list[object]] = [[*CANVAS_IDENTITY, column or canvas_column(result)],
                                ["Points Possible", "", "", "", "", f"{points:g}"]]
    left_out = []
    for grade in result.class_results.students:
        student = grade.handin.student
        if not (student.canvas_id or student.sis_user_id or student.sis_login_id):
            left_out.append(student.id)
            continue
        rows.append([student.name or student.id, student.canvas_id, student.sis_user_id, student.sis_login_id,
                     student.section, _score(grade, missing_zero)])
    return Gradebook(CANVAS_FILE, csv_text(rows), left_out)


def gradescope_gradebook(result: BatchResult, *, missing_zero: bool = False) -> Gradebook:
    rows: list[list[object]] = [["Name", "Email", "SID", "Score", "Overrides"]]
    left_out = []
    for grade in result.class_results.students:
        student = grade.handin.student
        if not (student.email or student.sis_user_id):
            left_out.append(student.id)
            continue
        rows.append([student.name or student.id, student.email, student.sis_user_id, _score(grade, missing_zero),
                     overrides_line(grade.overridden)])
    return Gradebook(GRADESCOPE_FILE, csv_text(rows), left_out)


def write_gradebooks(result: BatchResult, out: Path, canvas_header: str | None = None, *,
                     missing_zero: bool = False) -> list[Gradebook]:
    books = [canvas_gradebook(result, canvas_header, missing_zero=missing_zero),
             gradescope_gradebook(result, missing_zero=missing_zero)]
    for book in books:
        write_atomic(out / book.name, book.text)
    return books

