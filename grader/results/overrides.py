"""The instructor's word over the grader's: ``grade batch --overrides FILE``, a CSV such as

    student,part,score,comment,file
    lea,MultiHeadAttention,5,regrade request: her mask is right,
    max,split_heads,,read by hand: the reshape is fine,
    nina,,,she asked for her final version,nina/mha_final.py

- ``score``: the part's final points, from 0 to the part's max; blank keeps the autograder's
  points and only adds the comment;
- ``file``: the file the student's grade comes from (a path as grades.csv's ``submission``
  column gives it), instead of the one :data:`~grader.results.students.FILE_RULE` takes.

The file is applied on every run to every report, reused or new: a stored report is reused
while its fingerprint holds, whatever the overrides, and a row removed gives the autograder's
points back. Each overridden part keeps the autograder's score beside the final one
(:class:`grader.core.report.Override`), so that a regrade can say when it moved.

A row that cannot be applied is an :class:`OverrideError` naming it: a student or a part the
batch does not have, a file the student did not hand in (:meth:`Overrides.check`, before
anything is graded), a score over the part's points or a part of a submission that was not
graded (:meth:`Overrides.apply`, once the reports are there, before the results are written).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from grader.core.report import GradeReport, Override, Status
from grader.results.students import Handin, Pin
from grader.results.tables import TableError, read_table, table_rows

COLUMNS = ("student", "part", "score", "comment", "file")


class OverrideError(TableError):
    """An override cannot be applied: the message names each row that cannot, and why."""


@dataclass(frozen=True)
class Row:
    number: int  # as a spreadsheet numbers it: the header is row 1
    student: str
    part: str  # "" for a row that only pins a file
    score: float | None  # None: the autograder's points stand
    comment: str
    file: PurePosixPath | None


@dataclass(frozen=True)
class Overrides:
    source: str = "overrides"  # the file, as messages name it
    rows: tuple[Row, ...] = ()

    @classmethod
    def load(cls, path: Path) -> Overrides:
        return cls.parse(read_table(path, "overrides file", OverrideError), str(path))

    @classmethod
    def parse(cls, text: str, source: str = "overrides") -> Overrides:
        header, rows = table_rows(text, COLUMNS, OverrideError, source)
        unknown = [name for name in header if name and name not in COLUMNS]
        if "student" not in header or unknown or not {"part", "file"} & set(header):
            raise OverrideError(f"{source}: its first row must name the columns student, and part (with score and "
                                f"comment) or file" + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
        found: list[Row] = []
        parts: dict[tuple[str, str], int] = {}
        files: dict[str, tuple[PurePosixPath, int]] = {}
        for number, values in rows:
            where = f"{source}, row {number}"
            row = Row(number, values.get("student", ""), values.get("part", ""),
                      _points(values.get("score", ""), where), values.get("comment", ""),
                      PurePosixPath(values["file"].replace("\\", "/")) if values.get("file") else None)
            if not row.student:
                raise OverrideError(f"{where}: no student")
            if row.score is not None and not row.part:
                raise OverrideError(f"{where}: a score needs the part it is for")
            if not row.part and row.file is None:
                raise OverrideError(f"{where}: neither a part nor a file: nothing to override")
            if row.part and row.score is None and not row.comment:
                raise OverrideError(f"{where}: neither a score nor a comment for {row.student}'s {row.part}")
            if row.part and (earlier := parts.setdefault((row.student, row.part), number)) != number:
                raise OverrideError(f"{where}: {row.student}'s {row.part} is already overridden in row {earlier}")
            if row.file and files.setdefault(row.student, (row.file, number))[0] != row.file:
                raise OverrideError(f"{where}: {row.student}'s file is already pinned to {files[row.student][0]} "
                                    f"in row {files[row.student][1]}")
            found.append(row)
        return cls(source, tuple(found))

    def pins(self) -> dict[str, Pin]:
        """The file each student's grade comes from, where a row pins one, by student id."""
        return {row.student: Pin(row.file, row.comment) for row in self.rows if row.file}

    def check(self, students: Iterable[Handin], part_ids: Iterable[str]) -> None:
        """Raise an :class:`OverrideError` for each row the batch's ``students`` (chosen with
        :meth:`pins`) cannot take: what is known before anything is graded."""
        by_id = {handin.student.id: handin for handin in students}
        part_ids = list(part_ids)
        errors = []
        for row in self.rows:
            handin = by_id.get(row.student)
            if handin is None:
                close = difflib.get_close_matches(row.student, by_id, n=1)
                errors.append(f"row {row.number}: no student {row.student} in this batch (the ids of grades.csv's "
                              "student column)" + (f"; did you mean {close[0]}?" if close else ""))
            elif row.part and row.part not in part_ids:
                errors.append(f"row {row.number}: no part {row.part}; the parts are {', '.join(part_ids)}")
            elif row.part and handin.graded is None:
                errors.append(f"row {row.number}: {row.student} handed in nothing: there are no points to override")
            elif row.file and (handin.graded is None or PurePosixPath(handin.graded.as_posix()) != row.file):
                handed_in = ", ".join(path.as_posix() for path in handin.files) or "none"
                errors.append(f"row {row.number}: {row.student} handed in no file {row.file} "
                              f"(their files: {handed_in})")
        self._raise(errors)

    def apply(self, students: Iterable[Handin], reports: Mapping[Path, GradeReport]) -> dict[Path, GradeReport]:
        """Every report of ``reports`` (by file) as this file decides it: each override taken off
        (the last run's), then the rows applied to the report of the file graded for their
        student. Raises an :class:`OverrideError` for each row that cannot be applied."""
        final = {path: report.autograders() for path, report in reports.items()}
        graded = {handin.student.id: handin.graded for handin in students}
        errors = []
        decided: dict[Path, list[Row]] = {}
        for row in self.rows:
            path = graded.get(row.student)
            if not row.part or path is None:  # a pin, or a row check() refuses
                continue
            report = final.get(path)
            part = next((part for part in report.parts if part.id == row.part), None) if report else None
            if report is None:
                errors.append(f"row {row.number}: {row.student}'s {path.as_posix()} has no report")
            elif report.status != Status.GRADED:
                errors.append(f"row {row.number}: {row.student}'s {path.as_posix()} was not graded "
                              f"({report.status.replace('_', ' ')}: {report.error}), so it has no points to override")
            elif part is None:
                errors.append(f"row {row.number}: {row.student}'s report has no part {row.part}")
            elif row.score is not None and row.score > part.max_score:
                errors.append(f"row {row.number}: {row.score:g} is over {part.max_score:g}, the points of "
                              f"{row.student}'s {row.part}")
            else:
                decided.setdefault(path, []).append(row)
        self._raise(errors)
        return {path: _overridden(report, decided.get(path, [])) for path, report in final.items()}

    def _raise(self, errors: list[str]) -> None:
        if errors:
            raise OverrideError("\n".join(f"{self.source}, {error}" for error in errors))


def _points(value: str, where: str) -> float | None:
    """A score cell: blank is None; "4,5" (a comma as the decimal mark, as Excel may save) is 4.5."""
    if not value:
        return None
    # Digits and one decimal mark, nothing else: float() would also take "1_0", "-0", "inf", "1e400".
    if not re.fullmatch(r"\d{1,9}([.,]\d{1,9})?", value):
        raise OverrideError(f"{where}: the score {value} is not a number of points from 0 to the part's")
    return float(value.replace(",", "."))


def _overridden(report: GradeReport, rows: list[Row]) -> GradeReport:
    """``report`` (the autograder's) with each of ``rows`` applied to its part."""
    if not rows:
        return report
    by_part = {row.part: row for row in rows}
    parts = [replace(part, score=part.score if row.score is None else row.score,
                     override=Override(part.score, row.comment)) if (row := by_part.get(part.id)) else part
             for part in report.parts]
    return replace(report, score=report.score + sum(new.score - old.score for new, old in zip(parts, report.parts)),
                   parts=parts)
