"""A batch's results folder: ``reports/NAME.json`` per file handed in, ``summary.json``, and the
gradebooks, one row per student: ``grades.csv`` and the LMS imports of :mod:`grader.results.lms_gradebooks`.

Written by ``grade batch`` (:mod:`grader.engine.batch`), read by ``grade report``
(:mod:`grader.views.class_report`) and ``grade feedback``. Every report is written atomically; a
report is current when it is in the current schema and holds the submission's content hash.
The reports of files no longer in the batch folder are moved to ``removed/``, so that every
view counts the same submissions.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.ingest import Ungradable, read_submission, submission_sha256
from grader.core.report import SCHEMA_VERSION, GradeReport, Status
from grader.core.report_words import counts, headline, part_score
from grader.core.sanitize import clean, csv_text
from grader.results.class_stats import ClassStatistics, student_statistics
from grader.results.students import Handin

# 2: the students, each with the file graded for them. 3: submissions, counts, scores and hints
# are those of the files graded for the students; also_handed_in counts the other files. 4: only
# those files are graded (unless --all-files); not_graded counts the others, and each student's
# lists theirs.
SUMMARY_SCHEMA_VERSION = 4
MISSING = "missing"  # a student's status when they handed in nothing
GRADEBOOK_HINT_CHARS = 300  # a cell, not a report: the feedback page has the rest
# Bytes in a report's file name: write_atomic's temporary ".NAME.XXXXXXXX.tmp" beside it must fit
# in NAME_MAX (255) too.
REPORT_NAME_MAX = 200
_PLAIN_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789._-")


@dataclass(frozen=True)
class StudentGrade:
    """A gradebook row: a student, and the report of the file graded for them (None: no file)."""
    handin: Handin
    report: GradeReport | None

    @property
    def status(self) -> str:
        return self.report.status if self.report else MISSING

    @property
    def score(self) -> float:
        return self.report.score if self.report and counts(self.report) else 0.0

    def part_score(self, part_id: str) -> float:
        return sum(part_score(self.report, part) for part in self.report.parts if part.id == part_id) if self.report else 0.0

    @property
    def hint(self) -> str:
        return clean(headline(self.report) if self.report else "no submission", GRADEBOOK_HINT_CHARS)


@dataclass
class BatchResult:
    assignment: Assignment
    reports: dict[Path, GradeReport]  # by path relative to the submissions folder: the files graded
    graded: int  # graded in this run
    skipped: int  # reports already up to date
    duration_s: float
    handins: list[Handin] = field(default_factory=list)  # by student, roster order first
    removed: list[Path] = field(default_factory=list)  # reports of files gone from the folder, moved aside

    def statistics(self) -> ClassStatistics:
        """The class's numbers over the file graded for each student (see :func:`student_statistics`)."""
        return student_statistics(self.assignment.parts, self.reports, (handin.graded for handin in self.handins))

    def students(self) -> list[StudentGrade]:
        return [StudentGrade(handin, self.reports.get(handin.graded) if handin.graded else None)
                for handin in self.handins]


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


def read_report(path: Path, *, current_only: bool = False) -> GradeReport | None:
    """The report in ``path`` (upgraded to the current schema), or None when the file is not
    one this grader can read, or with ``current_only``, not written in the current schema."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if current_only and data.get("schema_version") != SCHEMA_VERSION:
            return None
        return GradeReport.from_dict(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # AttributeError: JSON that is not an object
        return None


def load_current_report(path: Path, submission: Path) -> GradeReport | None:
    """The report at ``path`` if it is worth keeping and for the submission's current bytes:
    an older schema's report is regraded (an upgraded one lacks what the new version adds).
    The submission is read only when there is such a report to compare it with."""
    report = read_report(path, current_only=True)
    if report is None or report.status == Status.GRADER_ERROR or not report.submission_sha256:
        return None
    try:
        current = submission_sha256(read_submission(submission))
    except Ungradable:  # no longer readable: its report must say so
        return None
    return report if report.submission_sha256 == current else None


def prune_reports(out: Path, current: Iterable[Path]) -> list[Path]:
    """Move the reports of files no longer handed in (``current``: the batch's files) from
    ``out/reports`` to ``out/removed``, kept but no longer counted; returns where they went."""
    keep = {report_path(out, relative).name for relative in current}
    moved = []
    for path in sorted((out / "reports").glob("*.json")):
        if path.name not in keep and read_report(path) is not None:
            target = out / "removed" / path.name
            target.parent.mkdir(exist_ok=True)
            os.replace(path, target)
            moved.append(target)
    return moved


def summarize(result: BatchResult) -> dict:
    """Counts by status, per-part statistics, the most frequent hints, timing, and each student
    with the file graded for them."""
    stats = result.statistics()
    students = result.students()
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "assignment": result.assignment.id,
        "submissions": stats.submissions,
        "also_handed_in": stats.also_handed_in,
        "not_graded": sum(len(grade.handin.not_graded) for grade in students),
        "counts": stats.counts,
        # The gradebook's mean: 0 for a student with no score, where "score" leaves them out.
        "students": {"count": len(students), "missing": sum(grade.status == MISSING for grade in students),
                     "not_on_roster": sum(grade.handin.unlisted for grade in students),
                     "mean_score": round(statistics.fmean(grade.score for grade in students), 4) if students else None},
        "score": stats.total.stats(),
        "parts": {part_id: scores.stats() for part_id, scores in stats.parts.items()},
        "hints": [{"hint": hint, "count": count} for hint, count in stats.hints],
        "timing": {
            "duration_s": round(result.duration_s, 3),
            "graded": result.graded,
            "skipped_up_to_date": result.skipped,
            "seconds_per_submission": round(result.duration_s / result.graded, 4) if result.graded else None,
        },
        "removed_reports": [path.name for path in result.removed],
        "gradebook": [_student_entry(grade) for grade in students],
    }


def _student_entry(grade: StudentGrade) -> dict:
    handin = grade.handin
    return {"student": handin.student.id, "name": handin.student.name, "status": grade.status, "score": grade.score,
            "submission": handin.graded.as_posix() if handin.graded else None,
            "report": f"reports/{report_path(Path(), handin.graded).name}" if handin.graded else None,
            "files": [path.as_posix() for path in handin.files],
            "not_graded": [path.as_posix() for path in handin.not_graded],
            "late": handin.late or bool(grade.report and grade.report.late), "note": handin.note}


GRADEBOOK_COLUMNS = ("student", "name", "status", "score", "points_possible")


def gradebook_csv(result: BatchResult) -> str:
    """One row per student: who, status, score and points possible, one column per part, the
    headline hint, the file graded and a note on the choice."""
    parts = result.assignment.parts
    stats = result.statistics()
    rows = [[*GRADEBOOK_COLUMNS, *parts, "hint", "submission", "note"]]
    for grade in result.students():
        handin = grade.handin
        rows.append([handin.student.id, handin.student.name, grade.status, f"{grade.score:g}",
                     f"{stats.total.max_score:g}", *(f"{grade.part_score(part):g}" for part in parts), grade.hint,
                     handin.graded.as_posix() if handin.graded else "", handin.note])
    return csv_text(rows)
