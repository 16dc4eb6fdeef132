"""A batch's results folder, and the one shape every view of it takes.

    OUT/reports/NAME.json     a report per file graded (:func:`report_path`)
    OUT/removed/              reports of files no longer handed in, kept but not counted
    OUT/summary.json          the class's numbers and the gradebook (:mod:`grader.results.outputs`)
    OUT/grades.csv, canvas.csv, gradescope.csv
    OUT/changes.csv, history/ what each run changed              (:mod:`grader.results.changes`)
    OUT/feedback/, report.html                                     (:mod:`grader.views`)

A batch holds its results in memory (:class:`BatchResult`), and ``grade report`` and ``grade
feedback`` read a folder back (:func:`read_results`): both give a :class:`ClassResults`, whose
numbers are computed once, and the same writers make the files from it. Every report is
written atomically; a report is current while its fingerprint holds (:func:`why_graded`), and
holds the instructor's overrides of the last run (:mod:`grader.results.overrides`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.fingerprint import Fingerprint
from grader.core.ingest import Ungradable, read_submission, submission_sha256
from grader.core.report import GradeReport, PartResult, Status
from grader.core.report_words import counts, headline, part_score
from grader.core.sanitize import clean
from grader.results.changes import HISTORY, Change, read_changes, student_change, vanished
from grader.results.class_stats import ClassStatistics, student_statistics
from grader.results.students import Handin, Student

MISSING = "missing"  # a student's status when they handed in nothing
GRADEBOOK_HINT_CHARS = 300  # a cell, not a report: the feedback page has the rest
# Bytes in a report's file name: write_atomic's temporary ".NAME.XXXXXXXX.tmp" beside it must fit
# in NAME_MAX (255) too.
REPORT_NAME_MAX = 200
_PLAIN_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789._-")


class ResultsError(Exception):
    """The folder is not a results folder this grader can read: the message says why."""


@dataclass(frozen=True)
class StudentGrade:
    """A gradebook row: a student, what they handed in, and the report of the file graded for
    them (None: nothing handed in, or a report that cannot be read back); ``others``, the
    reports of the other files they handed in (None: not graded)."""
    handin: Handin
    report: GradeReport | None
    others: dict[Path, GradeReport | None] = field(default_factory=dict)

    @property
    def student(self) -> str:
        return self.handin.student.id

    @property
    def name(self) -> str:
        return self.handin.student.name

    @property
    def submission(self) -> str | None:
        return self.handin.graded.as_posix() if self.handin.graded else None

    @property
    def report_file(self) -> str | None:
        """The report's path in the results folder."""
        return report_path(Path(), self.handin.graded).as_posix() if self.handin.graded else None

    @property
    def late(self) -> bool:
        return self.handin.late or bool(self.report and self.report.late)

    @property
    def note(self) -> str:
        return self.handin.note

    @property
    def status(self) -> str:
        if self.report:
            return self.report.status
        return MISSING if self.handin.graded is None else Status.GRADER_ERROR  # a report gone or unreadable

    @property
    def score(self) -> float:
        return self.report.score if self.report and counts(self.report) else 0.0

    def part_score(self, part_id: str) -> float:
        return sum(part_score(self.report, part) for part in self.report.parts if part.id == part_id) if self.report else 0.0

    @property
    def hint(self) -> str:
        return clean(headline(self.report) if self.report else "no submission", GRADEBOOK_HINT_CHARS)

    @property
    def overridden(self) -> list[PartResult]:
        """The parts of the report graded for them that an instructor's override decides."""
        return [part for part in self.report.parts if part.override] if self.report else []


@dataclass(frozen=True)
class ClassResults:
    """A class's results: its reports, its gradebook, and its numbers, computed once."""
    assignment: str  # the assignment's id
    reports: dict[str, GradeReport]  # by file in the results folder: "reports/NAME.json"
    students: list[StudentGrade]  # the gradebook, roster order first; empty for a folder of reports alone
    statistics: ClassStatistics  # over the file graded for each student (all the reports, without a gradebook)
    skipped: list[Path] = field(default_factory=list)  # files under reports/ that are not grade reports
    changes: list[Change] = field(default_factory=list)  # the students whose score the last run moved

    @classmethod
    def of(cls, assignment: str, part_ids: Iterable[str], reports: dict[str, GradeReport],
           students: list[StudentGrade], skipped: list[Path] | None = None,
           changes: list[Change] | None = None) -> ClassResults:
        counted = {grade.report_file for grade in students} & reports.keys()
        numbers = student_statistics(part_ids, reports, counted or reports.keys())
        return cls(assignment, reports, students, numbers, skipped or [], changes or [])


@dataclass(frozen=True)
class Regrade:
    """Why a run graded what it graded, and what it changed (:mod:`grader.results.changes`)."""
    stamp: str = ""  # the run's time: its folder in history/
    why: dict[Path, str] = field(default_factory=dict)  # each file graded in the run, and why (NEW: no report yet)
    earlier: dict[Path, GradeReport] = field(default_factory=dict)  # each file's report before the run, as it was
    before: dict[str, dict] = field(default_factory=dict)  # the previous run's gradebook lines, by student

    def reasons(self) -> dict[str, int]:
        """How many files were graded again, by why; most first."""
        return dict(Counter(why for why in self.why.values() if why != NEW).most_common())

    def change(self, grade: StudentGrade) -> Change | None:
        """How the run changed the student's grade (None: it did not)."""
        graded = grade.handin.graded
        return student_change(grade.student, self.before.get(grade.student), grade.score, grade.submission,
                              grade.report, self.earlier.get(graded) if graded else None,
                              self.why.get(graded) if graded else None, pinned=grade.handin.pinned is not None)


@dataclass
class BatchResult:
    """What a batch did: the reports of the files it graded (and those already up to date)."""
    assignment: Assignment
    reports: dict[Path, GradeReport]  # by path relative to the submissions folder: the files graded
    graded: int  # graded in this run
    skipped: int  # reports already up to date
    duration_s: float
    handins: list[Handin] = field(default_factory=list)  # by student, roster order first
    removed: list[Path] = field(default_factory=list)  # reports of files gone from the folder, moved aside
    regrade: Regrade = field(default_factory=Regrade)
    summary: dict = field(default_factory=dict)  # summary.json, once the results folder is written
    similarity_error: str | None = None  # why the similarity report asked for was not written

    @cached_property
    def class_results(self) -> ClassResults:
        by_file = {report_path(Path(), relative).as_posix(): report for relative, report in self.reports.items()}
        students = [StudentGrade(handin, self.reports.get(handin.graded) if handin.graded else None,
                                 {path: None if path in handin.not_graded else self.reports.get(path)
                                  for path in handin.others})
                    for handin in self.handins]
        changes = [change for grade in students if (change := self.regrade.change(grade))]
        changes += vanished(self.regrade.before, {grade.student for grade in students})
        return ClassResults.of(self.assignment.id, self.assignment.parts, by_file, students, changes=changes)


def report_path(out: Path, relative: Path) -> Path:
    """Where the report of the submission at ``relative`` goes: ``out/reports/NAME.json``, NAME
    one flat name per submission, so that no two share a report whatever their names."""
    return out / "reports" / (report_name(relative) + ".json")


def report_name(relative: Path) -> str:
    """The path's bytes, percent-encoded but for lowercase letters, digits and ``._-``, so that
    ``/`` (and ``%``) cannot collide, nor capitals on a case-insensitive disk; a name too long
    for REPORT_NAME_MAX keeps its start and ends in ``~`` and a hash of the whole path (``~``
    is always encoded otherwise, so no plain name looks like one)."""
    raw = os.fsencode(relative.as_posix())  # undecodable names come back as the bytes on disk
    name = "".join(chr(byte) if byte in _PLAIN_BYTES else f"%{byte:02X}" for byte in raw)
    if len(name) + len(".json") <= REPORT_NAME_MAX:
        return name
    digest = hashlib.sha256(raw).hexdigest()[:32]
    start = name[:REPORT_NAME_MAX - len(".json") - len("~") - len(digest)]
    if "%" in start[-2:]:  # no escape cut in half: the start stays readable
        start = start[:start.rindex("%")]
    return f"{start}~{digest}"


def read_report(path: Path) -> GradeReport | None:
    """The report in ``path`` (upgraded to the current schema), or None when the file is not
    one this grader can read."""
    return _report_in(_json_in(path))


def _json_in(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _report_in(data: object) -> GradeReport | None:
    try:
        return GradeReport.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError):  # AttributeError: JSON that is not an object
        return None


NEW = "new"  # a file with no report yet: graded, not regraded


def why_graded(stored: GradeReport | None, current: Fingerprint, submission: Path) -> str | None:
    """None while the ``stored`` report still holds for the file at ``submission``, graded as
    ``current`` says (its ``submission`` part left empty: the file is read only when there is a
    report to compare it with); otherwise why it is graded."""
    if stored is None:
        return NEW
    if stored.status == Status.GRADER_ERROR:
        return "grader error last time"
    if not stored.fingerprint:
        return "report of an older grader"
    try:
        sha256 = submission_sha256(read_submission(submission))
    except Ungradable:  # no longer readable: its report must say so
        sha256 = ""
    changed = replace(current, submission=sha256).changed(stored.fingerprint)
    return ", ".join(changed) if changed else None


def previous_gradebook(out: Path) -> dict[str, dict]:
    """The gradebook lines of the summary.json an earlier run wrote in ``out``, by student."""
    return {str(line.get("student")): line for line in _summary(out).get("gradebook", []) if isinstance(line, dict)}


def stored_reports(out: Path, assignment: str) -> dict[str, GradeReport]:
    """The reports in ``out/reports`` that this grader can read, by file name, once the folder
    is known to be ``assignment``'s (:func:`check_assignment`); each file is read once."""
    reports: dict[str, GradeReport] = {}
    named: set[str | None] = set()
    for path in sorted((out / "reports").glob("*.json")):
        data = _json_in(path)
        named.add(_named_assignment(data))
        if (report := _report_in(data)) is not None:
            reports[path.name] = report
    check_assignment(out, assignment, named)
    return reports


def check_assignment(out: Path, assignment: str, reports_name: set[str | None] | None = None) -> None:
    """A results folder belongs to one assignment: raises :class:`ResultsError` if anything in
    ``out`` names another (a report, current, removed or kept in history/, whatever its schema;
    the summary), before anything is written there. ``reports_name``: the assignments the
    reports in ``out/reports`` name, where the caller has read them already."""
    if reports_name is None:
        reports_name = {_named_assignment(_json_in(path)) for path in (out / "reports").glob("*.json")}
    others = reports_name | {_named_assignment(_json_in(path)) for folder in ("removed", HISTORY)
                             for path in (out / folder).rglob("*.json")}
    others |= {_named_assignment(_json_in(out / "summary.json"))}
    others -= {assignment, None}
    if others:
        raise ResultsError(f"{out} holds the results of assignment {', '.join(sorted(others))}, not {assignment}: "
                           "give each assignment its own --out folder")


def _named_assignment(data: object) -> str | None:
    """The assignment a JSON file of the grader's names, read as plainly as can be."""
    named = data.get("assignment") if isinstance(data, dict) else None
    return str(named) if named is not None else None


def prune_reports(out: Path, current: Iterable[Path], stamp: str) -> list[Path]:
    """Move the reports of files no longer handed in (``current``: the batch's files) from
    ``out/reports`` to ``out/removed``, kept but no longer counted; returns where they went. A
    report removed before under the same name goes to ``history/STAMP/removed/``: none is lost."""
    keep = {report_path(out, relative).name for relative in current}
    moved = []
    for path in sorted((out / "reports").glob("*.json")):
        if path.name not in keep and read_report(path) is not None:
            target = out / "removed" / path.name
            target.parent.mkdir(exist_ok=True)
            if target.exists():
                (out / HISTORY / stamp / "removed").mkdir(parents=True, exist_ok=True)
                os.replace(target, out / HISTORY / stamp / "removed" / path.name)
            os.replace(path, target)
            moved.append(target)
    return moved


def read_results(folder: Path) -> ClassResults:
    """A results folder read back: every report in ``folder/reports`` (a file that is not one is
    skipped and listed) and, where ``summary.json`` has one, the gradebook, each student with
    the report graded for them. Without a gradebook, every report counts."""
    reports_dir = folder / "reports"
    if not reports_dir.is_dir():
        raise ResultsError(f"{folder} has no reports/ folder: give the results folder `grade batch` wrote")
    reports, skipped = {}, []
    for path in sorted(p for p in reports_dir.glob("*.json") if p.is_file()):
        report = read_report(path)
        if report is None:
            skipped.append(path.relative_to(folder))
        else:
            reports[path.relative_to(folder).as_posix()] = report
    students = _gradebook(folder, reports)
    assignments = sorted({report.assignment for report in reports.values()})
    if len(assignments) > 1:  # per-part numbers across assignments would mix unrelated parts
        raise ResultsError(f"{reports_dir} holds reports for several assignments ({', '.join(assignments)})")
    if not reports and not students:
        raise ResultsError(f"no grade reports in {reports_dir}"
                           + (f" ({len(skipped)} unreadable files skipped)" if skipped else ""))
    assignment = assignments[0] if assignments else _summary(folder).get("assignment", "")
    part_ids = dict.fromkeys(part.id for report in reports.values() for part in report.parts)
    return ClassResults.of(str(assignment), part_ids, reports, students, skipped, read_changes(folder))


def _summary(folder: Path) -> dict:
    """``summary.json``, or nothing where it is missing or holds no gradebook: the reports alone count."""
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) and isinstance(summary.get("gradebook"), list) else {}


def _gradebook(folder: Path, reports: dict[str, GradeReport]) -> list[StudentGrade]:
    """The students of ``summary.json``'s gradebook, each with the report graded for them."""
    students = []
    for line in _summary(folder).get("gradebook", []):
        try:
            submission = line.get("submission")
            handin = Handin(Student(str(line["student"]), str(line.get("name") or "")),
                            files=tuple(Path(path) for path in line.get("files", [])),
                            graded=Path(submission) if submission else None, note=str(line.get("note") or ""),
                            late=bool(line.get("late")),
                            not_graded=tuple(Path(path) for path in line.get("not_graded", [])),
                            pinned=None if line.get("pinned") is None else str(line["pinned"]))
        except (AttributeError, KeyError, TypeError) as exc:
            raise ResultsError(f"{folder / 'summary.json'} has a gradebook line this grader cannot read "
                               f"({type(exc).__name__}): run `grade batch` again to rewrite it") from None
        students.append(StudentGrade(handin, _report_of(reports, handin.graded),
                                     {path: None if path in handin.not_graded else _report_of(reports, path)
                                      for path in handin.others}))
    return students


def _report_of(reports: dict[str, GradeReport], relative: Path | None) -> GradeReport | None:
    return reports.get(report_path(Path(), relative).as_posix()) if relative else None
